"""The Chroma-backed memory store: reads and writes of memories, embedded (a folder) or on a Chroma server.

Its parts: ``chroma/client.py`` opens the client (the only chromadb importer; it maps what chromadb raises to
vecmem's errors); ``chroma/registry.py`` keeps the registry (the model; a row per user) and the collections by
name; ``chroma/layout.py`` says where a user's memories are and repairs a user's layout on first open;
``chroma/shared.py`` is the collection small users share; ``chroma/batch.py`` writes many users' memories in
a few calls; ``chroma/moves.py`` moves users between layouts and reindexes; ``chroma/search.py`` splits a
search of a user's own collections into Chroma calls. Similarity is ``1 - cosine distance``. Rows (``rows.py``) keep
the fields and the keyword tokens in the metadata, written with the vector: the keyword index is rebuilt
from the store. Writes are announced on the ``ChangeFeed`` (embedded stores) around the Chroma call, so other
banks' copies learn what to re-read; a move between layouts or a reindex announces a reset of the user.

**Two layouts, chosen by the user's size.** Each Chroma collection has its own HNSW index, files and caches, so
one collection per user and type costs every small user memory and disk it never amortises (docs/benchmarks.md,
"The two layouts"). So a user below ``dedicated_at`` memories (``VECMEM_DEDICATED_AT``, default 500) has rows in
a shared collection (one of 8), user and type in each row's id and metadata, every row read back checked against
both; their searches are exact scans of their own rows (one filtered read, a matrix product here). A bigger user
has collections of their own, one per type, searched by HNSW. Both look alike from here ({type: collection}), so
every method below serves both.

**The threshold.** The filtered read of a user's vectors grows with the user's rows, while HNSW in a collection
of their own answers in about the same time at any size: Chroma's read, not the comparison, is the cost, so the
scan never wins on time, only on memory and disk. The default keeps a shared user's search inside the search
latency target, and the per-collection overhead is paid only by users big enough to amortise it (the figures:
docs/benchmarks.md, "The two layouts").

**The move runs inside the write that crosses the threshold**, not in a background thread: it copies at most
``dedicated_at`` rows (under a second), once in a user's life, and no write may land in the shared rows
while they are copied. Within the write, under the lock every write takes (``ChromaCollections.writing``),
that comes free; a background move would need writes fenced or sent to both places. Each step is recorded in
the user's registry row, so a move that died is finished on the user's next open, nothing lost or doubled
(``chroma/moves.py``). A user of their own collections with under half of ``dedicated_at`` memories (every
user of a store written before this layout) moves into the shared collection when first opened.

**Chroma's own cache.** chromadb 1.5's embedded client (its Rust backend) ignores
``chroma_segment_cache_policy`` and ``chroma_memory_limit_bytes`` (it keeps up to open-file-limit / 5 HNSW
indexes), and passing them would break every other client of the folder in the process (chromadb refuses a
second client with other settings). What bounds Chroma's memory is the shared layout: a few HNSW indexes,
not four per user. ``VECMEM_CACHE_MB`` budgets vecmem's own caches.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from vecmem.errors import EmbeddingMismatchError, InvalidInputError, StoreError
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.storage.base import IndexedRow, RawRow, UserWrite, announced, check_owner
from vecmem.storage.chroma.batch import stored_ids, write_many
from vecmem.storage.chroma.client import DEFAULT_DATABASE, chroma_errors, open_client
from vecmem.storage.chroma.layout import (
    DEDICATED_AT,
    ChromaCollections,
    collection_name,
    model_of,
    pages,
)
from vecmem.storage.chroma.registry import DEDICATED_HNSW, ChromaRegistry
from vecmem.storage.chroma.repair import is_shared, may_be_torn, torn_because
from vecmem.storage.chroma.repair import rebuild as rebuild_torn
from vecmem.storage.chroma.rows import from_row, to_metadata, where_clause
from vecmem.storage.chroma.search import SearchThreads, filtered_search, plan_searches
from vecmem.storage.chroma.shared import (
    SHARED_BUCKETS,
    SHARED_HNSW,
    SharedPlace,
    shared_nearest,
    typed_rows,
    with_vectors,
)
from vecmem.storage.state.changes import ChangeFeed

__all__ = ["ChromaStore", "where_clause"]

_Method = TypeVar("_Method", bound=Callable[..., Any])
_SEGMENT_PAUSE_S = 0.2  # before a segment that failed a read, and is not torn, is read once more (``_worth_again``)


def _mending(method: _Method) -> _Method:
    """A call on a user's memories that, when Chroma cannot load one of the user's HNSW segments (torn by a
    kill: chroma/repair.py), rebuilds it and runs once more; and runs once more when another thread rebuilt a
    collection while the call read it (the handle it held names a collection deleted since)."""
    @functools.wraps(method)
    def run(self: ChromaStore, user_id: str, *args: Any, **kwargs: Any) -> Any:
        rebuilds = self._layout.rebuilds
        try:
            return method(self, user_id, *args, **kwargs)
        except StoreError as exc:
            if not self._worth_again(exc, [user_id], rebuilds):
                raise
        return method(self, user_id, *args, **kwargs)
    return run  # type: ignore[return-value]


# an item a row method yields, less the rows in ``given`` (None when none is left); notes its own rows as given
_Rest = Callable[[Any, set[Any]], Any]


def _mending_rows(rest: _Rest) -> Callable[[_Method], _Method]:
    """``_mending`` for a method that yields rows. When it fails after giving some, the second run leaves those
    out (``rest``): a rebuilt collection holds the same rows under the same ids, in an order of its own."""
    def decorate(method: _Method) -> _Method:
        @functools.wraps(method)
        def run(self: ChromaStore, user_id: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
            given: set[Any] = set()
            rebuilds = self._layout.rebuilds
            try:
                for item in method(self, user_id, *args, **kwargs):
                    rest(item, given)
                    yield item
                return
            except StoreError as exc:
                if not self._worth_again(exc, [user_id], rebuilds):
                    raise
            for item in method(self, user_id, *args, **kwargs):
                left = rest(item, given)
                if left is not None:
                    yield left
        return run  # type: ignore[return-value]
    return decorate


def _one_row(key: Callable[[Any], Any]) -> _Rest:
    """``rest`` for a method that yields a row at a time, ``key`` naming it."""
    def rest(item: Any, given: set[Any]) -> Any:
        name = key(item)
        if name in given:
            return None
        given.add(name)
        return item
    return rest


def _page_rest(page: tuple[list[str], np.ndarray], given: set[Any]) -> tuple[list[str], np.ndarray] | None:
    """``rest`` for a page of (ids, vectors); a page none of whose rows was given (every page of a read that did
    not fail) is passed on without a row-by-row copy."""
    ids, matrix = page
    if given.isdisjoint(ids):
        given.update(ids)
        return page
    keep = [i for i, memory_id in enumerate(ids) if memory_id not in given]
    given.update(ids)
    return ([ids[i] for i in keep], matrix[keep]) if keep else None


class ChromaStore:
    """Memories of many users in Chroma, embedded (a folder) or on a Chroma server (a URL)."""

    collection_name = staticmethod(collection_name)  # for tools that open a user's collection directly

    def __init__(
        self,
        *,
        model_name: str,
        path: Path | None = None,
        url: str | None = None,
        database: str = DEFAULT_DATABASE,
        changes: ChangeFeed | None = None,
        dedicated_at: int = DEDICATED_AT,
        adopt_stored_model: bool = False,
    ) -> None:
        """``adopt_stored_model``: a store that records a model is opened for that one instead of ``model_name``
        (which then only names the model of a new store)."""
        if (path is None) == (url is None):
            raise InvalidInputError("path", "give exactly one of a store folder (path) or a Chroma server (url)")
        self.model_name = model_name
        self.changes = changes
        self._folder = path
        # the model's (name, embed_documents), which rebuilds a torn collection (``mend_with``); None: not rebuilt
        self._mender: tuple[str, Callable[[Sequence[str]], np.ndarray]] | None = None
        if url is None:
            self.location = str(path)
        else:
            self.location = url if database == DEFAULT_DATABASE else f"{url} (database {database})"
        client = open_client(path=path, url=url, database=database)
        if adopt_stored_model:
            stored = ChromaRegistry(client, model_name, self.location).stored_model()
            self.model_name = model_name = model_name if stored is None else stored[0]
        self._layout = ChromaCollections(client, model_name, changes, dedicated_at, self.location)
        self._threads = SearchThreads()
        # a write's collections at once, on a server (chroma/batch.py); an embedded store's writes share this
        # process's cores, so they gain nothing by it
        self._write_threads = None if url is None else SearchThreads(SHARED_BUCKETS, "vecmem-write")

    @property
    def _client(self) -> Any:  # the raw Chroma client, for tests that recreate what a crash leaves behind
        return self._layout.client

    def claim(self, *, take_over: bool = False) -> None:
        """Record this store's change feed as the state its writers share; ConfigError when the store is shared
        through another one (chroma/registry.py, ``claim``), unless ``take_over``."""
        if self.changes is not None:
            self._layout.claim(self.changes.identity(), self.changes.where, take_over=take_over)

    def mend_with(self, model_name: str, embed_documents: Callable[[Sequence[str]], np.ndarray]) -> None:
        """Rebuild a collection of this model whose HNSW segment Chroma cannot load, embedding its memories
        with ``embed_documents`` (an embedded store only: chroma/repair.py)."""
        self._mender = (model_name, embed_documents)

    def _worth_again(self, exc: StoreError, user_ids: Sequence[str], rebuilds: int) -> bool:
        """Whether a call that raised ``exc`` is worth running once more: a collection was rebuilt since it began
        (``rebuilds``: the layout's count then), one it touched was torn and is rebuilt now, or Chroma could not
        read a segment that is not torn: a server has nothing to mend from here, and under concurrent writes
        answers a search with "Error creating hnsw segment reader: Nothing found on disk" now and then
        (chroma-core/chroma#4212); an embedded store under its own process's writes met "Error getting embedding"
        in a read whose segment files were sound, and met it again in the check that followed at once. Either is
        read once more a moment later; a failure that persists is raised then."""
        with self._layout.writing:  # a rebuild under way in another thread (it holds this) has counted once done
            rebuilt_since = self._layout.rebuilds != rebuilds
        if rebuilt_since or not may_be_torn(exc):
            return rebuilt_since
        mended = None if self._folder is None else self._mend(user_ids)
        if mended is None:
            time.sleep(_SEGMENT_PAUSE_S)
            return True
        return mended

    def _mend(self, user_ids: Sequence[str]) -> bool | None:
        """Rebuild the torn collections that hold these users' memories. True when they read now, so the failed
        call is worth running once more (also when another thread rebuilt them while this one waited for the
        lock); False when there is nothing here to mend them with; None when one whose files are sound failed
        to read again (not torn: ``_worth_again``)."""
        if self._folder is None or self._mender is None:
            return False
        model, embed = self._mender
        rebuilt = checked = unsettled = False
        with self._layout.writing:
            for collection in self._layout.collections_of(user_ids):
                if model_of(collection.metadata)[0] != model:
                    continue
                checked = True
                try:
                    why = torn_because(collection, self._folder)
                except StoreError:  # its files are sound and it still failed to read
                    unsettled = True
                    continue
                if why is None:
                    continue
                rebuild_torn(self._layout, collection, self._folder, embed,
                             SHARED_HNSW if is_shared(collection.name) else DEDICATED_HNSW, why)
                rebuilt = True
            if rebuilt:
                self._layout.forget_collections()
        return None if unsettled else checked

    def close(self) -> None:
        """Stop the search and write threads. The Chroma client stays open: chromadb shares one per folder or
        server among every store of the process, so closing it here would close it under other banks."""
        self._threads.close()
        if self._write_threads is not None:
            self._write_threads.close()

    def residence(self, user_id: str) -> list[str]:
        """Ids of the collections the user's memories are in (their own, and a shared one), as chroma.sqlite3
        names them."""
        return sorted(str(collection.id) for collection in self._layout.collections_of([user_id]))

    # ----------------------------------------------------------------------------------------- layout

    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the store was built with, or None for a store that has never been written."""
        return self._layout.stored_model()

    def check_model(self) -> None:
        """Raise EmbeddingMismatchError when the store was built with a different model."""
        stored = self.stored_model()
        if stored is not None and stored[0] != self.model_name:
            raise EmbeddingMismatchError(stored[0], stored[1], self.model_name)

    def users(self) -> list[str]:
        """Every user id of the store, of either layout (the registry's rows and the users' own collections)."""
        return self._layout.users()

    @_mending
    def refresh(self, user_id: str) -> None:
        """Forget which collections of the user exist (another bank or server client may have made one since)."""
        self._layout.refresh(user_id)

    def _typed(
        self,
        user_id: str,
        types: Iterable[str] | None = None,
        *,
        create_with_dimension: int | None = None,
        verify: bool = True,
    ) -> dict[str, Any]:
        """The user's collections for ``types`` (all four when None) that exist; with a dimension (a write),
        the missing ones are created."""
        return self._layout.typed(user_id, types, create_with_dimension=create_with_dimension, verify=verify)

    # ----------------------------------------------------------------------------------------- reads

    @_mending
    def get(
        self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str] | None = None
    ) -> dict[str, MemoryRecord]:
        """The memories with these ids; ``type_of`` (id -> type, from the keyword index) saves asking every
        type's collection."""
        return {i: record for i, (record, _, _) in self._read(user_id, ids, type_of, embeddings=False).items()}

    @_mending
    def get_indexed(self, user_id: str, ids: Sequence[str]) -> dict[str, IndexedRow]:
        """The memories with these ids, their embeddings and their stored keyword tokens (None when written
        before they existed), looking in collections another bank may have created since: what re-reads
        another bank's writes."""
        found = self._read(user_id, ids, None, embeddings=True)
        if len(found) < len(set(ids)):
            self.refresh(user_id)
            found.update(self._read(user_id, [i for i in ids if i not in found], None, embeddings=True))
        return found  # type: ignore[return-value]

    @_mending_rows(_page_rest)
    def scan_vectors(self, user_id: str, page: int = 5_000) -> Iterator[tuple[list[str], np.ndarray]]:
        """Every stored embedding of the user, a page (ids, matrix) at a time."""
        for collection in self._typed(user_id).values():
            for rows in pages(collection, ["embeddings"], "reading embeddings", size=page):
                yield list(rows["ids"]), np.asarray(rows["embeddings"], dtype=np.float32)

    @_mending
    def vectors(self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str]) -> dict[str, np.ndarray]:
        """The stored embeddings of these memories (ids without a type in ``type_of`` are skipped), one read
        per type collection, those run at once."""
        collections = self._typed(user_id, set(type_of.values()))
        plan: dict[str, list[str]] = {}
        for memory_id in dict.fromkeys(ids):
            if type_of.get(memory_id) in collections:
                plan.setdefault(type_of[memory_id], []).append(memory_id)

        def one(item: tuple[str, list[str]]) -> list[tuple[str, np.ndarray]]:
            memory_type, wanted = item
            rows = with_vectors(lambda: collections[memory_type].get(ids=wanted, include=["embeddings"]),
                                "reading embeddings")
            if not rows["ids"]:  # none of them is stored there (a memory that moved to another type)
                return []
            matrix = np.asarray(rows["embeddings"], dtype=np.float32).reshape(len(rows["ids"]), -1)
            return list(zip(rows["ids"], matrix, strict=True))

        results = self._threads.map(one, list(plan.items()))
        return {memory_id: vector for result in results for memory_id, vector in result}

    def _read(
        self, user_id: str, ids: Sequence[str], type_of: Mapping[str, str] | None, *, embeddings: bool
    ) -> dict[str, tuple[MemoryRecord, np.ndarray | None, list[str] | None]]:
        if not ids:
            return {}
        collections = self._typed(user_id, verify=embeddings)
        plan: dict[str, list[str]] = {}
        for memory_id in dict.fromkeys(ids):
            known = None if type_of is None else type_of.get(memory_id)
            for memory_type in [known] if known in collections else collections:
                plan.setdefault(memory_type, []).append(memory_id)
        include = ["documents", "metadatas", "embeddings"] if embeddings else ["documents", "metadatas"]
        found: dict[str, tuple[MemoryRecord, np.ndarray | None, list[str] | None]] = {}
        for memory_type, wanted in plan.items():
            def read(collection: Any = collections[memory_type], ids: list[str] = wanted) -> Any:
                return collection.get(ids=ids, include=include)

            if embeddings:
                rows = with_vectors(read, "reading memories", torn_is_error=True)
            else:
                with chroma_errors("reading memories"):
                    rows = read()
            vectors = rows["embeddings"] if embeddings else [None] * len(rows["ids"])
            for memory_id, document, metadata, vector in zip(
                rows["ids"], rows["documents"], rows["metadatas"], vectors, strict=True
            ):
                keywords = (metadata or {}).get("keywords")
                found[memory_id] = (from_row(memory_id, document, metadata),
                                    None if vector is None else np.asarray(vector, dtype=np.float32),
                                    None if keywords is None else keywords.split())
        return found

    @_mending
    def count(self, user_id: str) -> int:
        """How many memories the user has (costs some ms at 100,000; kept off the search path)."""
        self.refresh(user_id)  # a collection another process created since counts too
        total = 0
        for collection in self._typed(user_id, verify=False).values():
            with chroma_errors("counting memories"):
                total += int(collection.count())
        return total

    @_mending_rows(_one_row(lambda record: record.id))
    def scan(self, user_id: str, memory_filter: MemoryFilter) -> Iterator[MemoryRecord]:
        """Every memory of the user that passes the filter, page by page."""
        collections = self._typed(user_id, memory_filter.types, verify=False)
        for _, memory_id, document, metadata in typed_rows(collections, "listing memories", where_clause(memory_filter)):
            record = from_row(memory_id, document, metadata)
            if memory_filter.matches(record):
                yield record

    @_mending_rows(_one_row(lambda item: item[0].id))
    def scan_keywords(self, user_id: str) -> Iterator[tuple[MemoryRecord, list[str] | None]]:
        """Every memory of the user with its stored keyword tokens (None when written before they existed)."""
        for _, memory_id, document, metadata in typed_rows(self._typed(user_id, verify=False),
                                                           "reading the keyword index"):
            stored = (metadata or {}).get("keywords")
            yield from_row(memory_id, document, metadata), None if stored is None else stored.split()

    @_mending_rows(_one_row(lambda row: row[:2]))  # (collection's type, id)
    def raw_rows(self, user_id: str) -> Iterator[RawRow]:
        """Every row of the user as stored: (collection's type, id, document, metadata), unread ones included
        (what ``vecmem doctor`` examines)."""
        yield from typed_rows(self._typed(user_id, verify=False), "examining the store")

    @_mending
    def collection_models(self, user_id: str) -> dict[str, tuple[str, int]]:
        """{type: (embedding model, dimension)} as each of the user's collections records it."""
        return {memory_type: model_of(collection.metadata)
                for memory_type, collection in self._typed(user_id, verify=False).items()}

    @_mending
    def replaced_by(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        """The memories whose ``superseded_by`` points at ``memory_id``."""
        return [from_row(row_id, document, metadata)
                for _, row_id, document, metadata in typed_rows(self._typed(user_id, verify=False),
                                                                "reading the supersession history",
                                                                {"superseded_by": memory_id})]

    @_mending
    def nearest(
        self,
        user_id: str,
        embedding: np.ndarray,
        n_results: int,
        *,
        types: Iterable[str] | None = None,
        among: Mapping[str, Sequence[str]] | None = None,
        sizes: Mapping[str, int] | None = None,
    ) -> tuple[list[str], list[float]]:
        """Ids and cosine similarities of the ``n_results`` nearest memories of ``types`` (all when None), best
        first; with ``among`` (type -> ids), a search restricted to those ids. ``sizes`` (type -> how
        many memories its collection holds, from the keyword index's catalogue) lets a restricted search pick
        its cheaper way (``chroma/search.py``); without it, only a few ids are compared here."""
        if n_results <= 0:
            return [], []
        vector = np.asarray(embedding, dtype=np.float32)
        collections = self._typed(user_id, types)
        places = [c for c in collections.values() if isinstance(c, SharedPlace)]
        if places and len(places) == len(collections):  # a shared user: one read, compared exactly here
            found = shared_nearest(places, vector, n_results, among)
            return [i for _, i in found], [1.0 - d for d, _ in found]
        searches = plan_searches(collections, among, sizes)
        found = sorted(pair for result in self._threads.map(lambda search: search.run(vector, n_results), searches)
                       for pair in result)
        return [i for _, i in found[:n_results]], [1.0 - d for d, _ in found[:n_results]]

    @_mending
    def query(
        self, user_id: str, embedding: np.ndarray, n_results: int, memory_filter: MemoryFilter
    ) -> list[tuple[MemoryRecord, float]]:
        """Up to ``n_results`` nearest memories passing the filter, with Chroma's where-filter (exact, but at
        100,000 memories far slower than ``nearest``; retrieval.py does not use it)."""
        return filtered_search(self._typed(user_id, memory_filter.types), embedding, n_results, memory_filter)

    # ----------------------------------------------------------------------------------------- writes

    def upsert(
        self,
        user_id: str,
        records: Sequence[MemoryRecord],
        embeddings: np.ndarray,
        keywords: Sequence[Sequence[str]],
        *,
        new: bool = False,
    ) -> None:
        """Write memories with their embeddings and keyword tokens, each into its type's collection.

        Unless the caller knows the ids are ``new``, a memory whose type changed is removed from the
        collection of its old type, so an id is only ever in one place.
        """
        self.upsert_many([UserWrite(user_id, records, embeddings, keywords)], new=new)

    def upsert_many(self, writes: Sequence[UserWrite], *, new: bool = False) -> None:
        """Several users' upserts in a few Chroma calls (``chroma/batch.py``)."""
        rebuilds = self._layout.rebuilds
        try:
            write_many(self._layout, self.changes, writes, new=new, threads=self._write_threads)
            return
        except StoreError as exc:
            if not self._worth_again(exc, list(dict.fromkeys(w.user_id for w in writes)), rebuilds):
                raise
        write_many(self._layout, self.changes, writes, new=new, threads=self._write_threads)

    def stored_ids(self, ids_by_user: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
        """Which of these ids each user has stored, a Chroma read per collection asked."""
        return stored_ids(self._layout, ids_by_user)

    @_mending
    def update_metadata(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the fields of existing memories whose content, tags and type did not change."""
        if not records:
            return
        check_owner(user_id, records)
        with self._layout.writing:
            self._update(user_id, records)

    def _update(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        """The writes of ``update_metadata``, announced."""
        collections = self._typed(user_id, {r.type for r in records}, verify=False)
        with announced(self.changes, user_id, [r.id for r in records]):
            for memory_type, collection in collections.items():
                batch = [r for r in records if r.type == memory_type]
                with chroma_errors("updating memories"):
                    collection.update(ids=[r.id for r in batch], metadatas=[to_metadata(r) for r in batch])
        missing = {r.type for r in records} - set(collections)
        if missing:
            raise StoreError(f"user {user_id!r} has no {', '.join(sorted(missing))} memories to update")

    @_mending
    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._layout.writing, announced(self.changes, user_id, ids):
            for collection in self._typed(user_id, verify=False).values():
                with chroma_errors("deleting memories"):
                    collection.delete(ids=list(ids))

    # ----------------------------------------------------------------------------------------- reindex

    def rebuild(
        self,
        user_id: str,
        embed_documents: Callable[[Sequence[str]], np.ndarray],
        dimension: int,
        *,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Re-embed every memory of a user: with the same model, into fresh collections swapped in at once; with
        another, beside the old ones, which the store reads until ``finish_rebuild``. Returns how many memories
        the user has (``chroma/moves.py`` says how a kill midway is survived and what a rerun skips)."""
        return self._layout.rebuild(user_id, embed_documents, dimension, batch_size=batch_size, progress=progress)

    def finish_rebuild(self, dimension: int) -> None:
        """After every user is rebuilt, record the new model for the whole store and switch every user to it
        (``chroma/moves.py`` says how a kill meanwhile is survived)."""
        self._layout.finish_rebuild(dimension)

"""The Chroma-backed memory store: reads and writes of memories, embedded (a folder) or on a Chroma server.

Its parts: ``chroma_client.py`` opens the client and is the only module that imports chromadb, turning what
it raises into vecmem's errors; ``chroma_layout.py`` names the collections (one per user and memory type),
keeps the registry of the embedding model, repairs a user's layout on first open and reindexes;
``chroma_search.py`` splits a nearest-neighbour search into Chroma calls. Similarity is ``1 - cosine
distance``.

Rows (``rows.py``) keep a memory's fields in the metadata together with its keyword tokens (``keywords``),
written in the same call as the vector, so the keyword index is always rebuilt from the store.

Given a ``ChangeFeed`` (``changes.py``, embedded stores), every write is announced there around the Chroma
call, so other banks' in-memory copies learn which memories to re-read.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from vecmem.errors import EmbeddingMismatchError, InvalidInputError, StoreError
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.storage.base import IndexedRow, RawRow
from vecmem.storage.changes import ChangeFeed
from vecmem.storage.chroma_client import DEFAULT_DATABASE, chroma_errors, open_client
from vecmem.storage.chroma_layout import ChromaCollections, collection_name, model_of, pages, user_key
from vecmem.storage.chroma_search import filtered_search, plan_searches
from vecmem.storage.rows import from_row, to_metadata, where_clause

__all__ = ["ChromaStore", "where_clause"]

_SEARCH_THREADS = 4  # collections searched at once (an untyped search reads four)
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")
_user_key = user_key  # the first layout's collection name, for tests that write a store in that layout


def _zip_rows(rows: Mapping[str, Any], *fields: str) -> Iterator[tuple[Any, ...]]:
    return zip(rows["ids"], *(rows[f] for f in fields), strict=True)


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
    ) -> None:
        if (path is None) == (url is None):
            raise InvalidInputError("path", "give exactly one of a store folder (path) or a Chroma server (url)")
        self.model_name = model_name
        self.changes = changes
        if url is None:
            self.location = str(path)
        else:
            self.location = url if database == DEFAULT_DATABASE else f"{url} (database {database})"
        self._layout = ChromaCollections(open_client(path=path, url=url, database=database), model_name, changes)
        self._pool: ThreadPoolExecutor | None = None  # created on the first search that reads several collections
        self._pool_lock = threading.Lock()

    @property
    def _client(self) -> Any:  # the raw Chroma client, for tests that recreate what a crash leaves behind
        return self._layout.client

    def close(self) -> None:
        """Stop the search threads. The Chroma client stays open: chromadb shares one per folder or server
        among every store of the process, so closing it here would close it under other banks."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _map(self, work: Callable[[_Item], _Result], items: Sequence[_Item]) -> list[_Result]:
        """``work`` on every item, at once when there are several (Chroma releases the GIL while it searches)."""
        if len(items) <= 1:
            return [work(item) for item in items]
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_SEARCH_THREADS, thread_name_prefix="vecmem-search")
            pool = self._pool
        return list(pool.map(work, items))

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
        """Every user id that has a collection in this store."""
        return self._layout.users()

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

    def get(
        self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str] | None = None
    ) -> dict[str, MemoryRecord]:
        """The memories with these ids; ``type_of`` (id -> type, from the keyword index) saves asking every
        type's collection."""
        return {i: record for i, (record, _, _) in self._read(user_id, ids, type_of, embeddings=False).items()}

    def get_with_embeddings(
        self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str] | None = None
    ) -> dict[str, tuple[MemoryRecord, np.ndarray]]:
        return {i: (record, vector) for i, (record, vector, _) in  # type: ignore[misc]
                self._read(user_id, ids, type_of, embeddings=True).items()}

    def get_indexed(self, user_id: str, ids: Sequence[str]) -> dict[str, IndexedRow]:
        """The memories with these ids, their embeddings and their stored keyword tokens (None when written
        before they existed), looking in collections another bank may have created since: what re-reads
        another bank's writes."""
        found = self._read(user_id, ids, None, embeddings=True)
        if len(found) < len(set(ids)):
            self.refresh(user_id)
            found.update(self._read(user_id, [i for i in ids if i not in found], None, embeddings=True))
        return found  # type: ignore[return-value]

    def scan_vectors(self, user_id: str, page: int = 5_000) -> Iterator[tuple[list[str], np.ndarray]]:
        """Every stored embedding of the user, a page (ids, matrix) at a time."""
        for collection in self._typed(user_id).values():
            for rows in pages(collection, ["embeddings"], "reading embeddings", size=page):
                yield list(rows["ids"]), np.asarray(rows["embeddings"], dtype=np.float32)

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
            with chroma_errors("reading embeddings"):
                rows = collections[memory_type].get(ids=wanted, include=["embeddings"])
            if not rows["ids"]:  # none of them is stored there (a memory that moved to another type)
                return []
            matrix = np.asarray(rows["embeddings"], dtype=np.float32).reshape(len(rows["ids"]), -1)
            return list(zip(rows["ids"], matrix, strict=True))

        results = self._map(one, list(plan.items()))
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
            with chroma_errors("reading memories"):
                rows = collections[memory_type].get(ids=wanted, include=include)
            vectors = rows["embeddings"] if embeddings else [None] * len(rows["ids"])
            for memory_id, document, metadata, vector in zip(
                rows["ids"], rows["documents"], rows["metadatas"], vectors, strict=True
            ):
                keywords = (metadata or {}).get("keywords")
                found[memory_id] = (from_row(memory_id, document, metadata),
                                    None if vector is None else np.asarray(vector, dtype=np.float32),
                                    None if keywords is None else keywords.split())
        return found

    def count(self, user_id: str) -> int:
        """How many memories the user has (costs about 7 ms at 100,000; kept off the search path)."""
        self.refresh(user_id)  # a collection another process created since counts too
        total = 0
        for collection in self._typed(user_id, verify=False).values():
            with chroma_errors("counting memories"):
                total += int(collection.count())
        return total

    @staticmethod
    def _rows(collection: Any, action: str, where: dict[str, Any] | None = None) -> Iterator[tuple[Any, ...]]:
        """(id, document, metadata) of every row of a collection that passes ``where``."""
        for rows in pages(collection, ["documents", "metadatas"], action, where=where):
            yield from _zip_rows(rows, "documents", "metadatas")

    def scan(self, user_id: str, memory_filter: MemoryFilter) -> Iterator[MemoryRecord]:
        """Every memory of the user that passes the filter, page by page."""
        where = where_clause(memory_filter)
        for collection in self._typed(user_id, memory_filter.types, verify=False).values():
            for memory_id, document, metadata in self._rows(collection, "listing memories", where):
                record = from_row(memory_id, document, metadata)
                if memory_filter.matches(record):
                    yield record

    def scan_keywords(self, user_id: str) -> Iterator[tuple[MemoryRecord, list[str] | None]]:
        """Every memory of the user with its stored keyword tokens (None when written before they existed)."""
        for collection in self._typed(user_id, verify=False).values():
            for memory_id, document, metadata in self._rows(collection, "reading the keyword index"):
                stored = (metadata or {}).get("keywords")
                yield from_row(memory_id, document, metadata), None if stored is None else stored.split()

    def raw_rows(self, user_id: str) -> Iterator[RawRow]:
        """Every row of the user as stored: (collection's type, id, document, metadata), unread ones included
        (what ``vecmem doctor`` examines)."""
        for memory_type, collection in self._typed(user_id, verify=False).items():
            for memory_id, document, metadata in self._rows(collection, "examining the store"):
                yield memory_type, memory_id, document, metadata

    def collection_models(self, user_id: str) -> dict[str, tuple[str, int]]:
        """{type: (embedding model, dimension)} as each of the user's collections records it."""
        return {memory_type: model_of(collection.metadata)
                for memory_type, collection in self._typed(user_id, verify=False).items()}

    def replaced_by(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        """The memories whose ``superseded_by`` points at ``memory_id``."""
        return [
            from_row(row_id, document, metadata)
            for collection in self._typed(user_id, verify=False).values()
            for row_id, document, metadata in self._rows(
                collection, "reading the supersession history", {"superseded_by": memory_id}
            )
        ]

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
        its cheaper way (``chroma_search.py``); without it, only a few ids are compared here."""
        if n_results <= 0:
            return [], []
        vector = np.asarray(embedding, dtype=np.float32)
        searches = plan_searches(self._typed(user_id, types), among, sizes)
        found = sorted(pair for result in self._map(lambda search: search.run(vector, n_results), searches)
                       for pair in result)
        return [i for _, i in found[:n_results]], [1.0 - d for d, _ in found[:n_results]]

    def query(
        self, user_id: str, embedding: np.ndarray, n_results: int, memory_filter: MemoryFilter
    ) -> list[tuple[MemoryRecord, float]]:
        """Up to ``n_results`` nearest memories passing the filter, with Chroma's where-filter (exact, but at
        100,000 memories 60 times slower than ``nearest``; retrieval.py does not use it)."""
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
        if not records:
            return
        self._check_owner(user_id, records)
        if len(keywords) != len(records):
            raise InvalidInputError("keywords", f"{len(keywords)} token lists for {len(records)} records")
        vectors = np.asarray(embeddings, dtype=np.float32)
        by_type: dict[str, list[int]] = {}
        for position, record in enumerate(records):
            by_type.setdefault(record.type, []).append(position)
        collections = self._typed(user_id, by_type, create_with_dimension=int(vectors.shape[1]))
        with self._announced(user_id, [r.id for r in records]):
            for memory_type, positions in by_type.items():
                batch = [records[p] for p in positions]
                with chroma_errors("writing memories", sends_vectors=True):
                    collections[memory_type].upsert(
                        ids=[r.id for r in batch],
                        embeddings=vectors[positions],
                        documents=[r.content for r in batch],
                        metadatas=[{**to_metadata(r), "keywords": " ".join(keywords[p])}
                                   for r, p in zip(batch, positions, strict=True)],
                    )
            if not new:
                for memory_type, collection in self._typed(user_id, verify=False).items():
                    stale = [r.id for r in records if r.type != memory_type]
                    if stale:
                        with chroma_errors("moving memories between types"):
                            collection.delete(ids=stale)

    def update_metadata(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the fields of existing memories whose content, tags and type did not change."""
        if not records:
            return
        self._check_owner(user_id, records)
        collections = self._typed(user_id, {r.type for r in records}, verify=False)
        with self._announced(user_id, [r.id for r in records]):
            for memory_type, collection in collections.items():
                batch = [r for r in records if r.type == memory_type]
                with chroma_errors("updating memories"):
                    collection.update(ids=[r.id for r in batch], metadatas=[to_metadata(r) for r in batch])
        missing = {r.type for r in records} - set(collections)
        if missing:
            raise StoreError(f"user {user_id!r} has no {', '.join(sorted(missing))} memories to update")

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._announced(user_id, ids):
            for collection in self._typed(user_id, verify=False).values():
                with chroma_errors("deleting memories"):
                    collection.delete(ids=list(ids))

    def _announced(self, user_id: str, ids: Sequence[str]) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self.changes is None else self.changes.writing(user_id, ids)

    @staticmethod
    def _check_owner(user_id: str, records: Sequence[MemoryRecord]) -> None:
        for record in records:
            if record.user_id != user_id:
                raise InvalidInputError("user_id", f"memory {record.id} belongs to {record.user_id!r}, not {user_id!r}")

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
        """Re-embed every memory of a user into fresh collections, swapping each in; returns the count
        (``ChromaCollections.rebuild`` says how a crash midway is survived)."""
        return self._layout.rebuild(user_id, embed_documents, dimension, batch_size=batch_size, progress=progress)

    def finish_rebuild(self, dimension: int) -> None:
        """After every user is rebuilt, record the new model for the whole store."""
        self._layout.record_model(dimension, replace=True)

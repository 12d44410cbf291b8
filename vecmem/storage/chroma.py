"""The Chroma-backed memory store. The only module that imports chromadb.

Layout
------
* One collection per user and memory type (``vecmem-u-<hash of user_id>-<type>``). Memories of different
  users live in different HNSW indexes, so no query or filter mistake can return another user's memory; and a
  type filter (a coding request wants preferences and instructions) is a choice of collections instead of
  Chroma's where-filter, which costs 140 to 300 ms at 100,000 memories against 2 ms for a plain search.
* A ``vecmem-registry`` collection whose metadata records the store's embedding model and dimension; every
  user collection records them too. Chroma ignores metadata passed for an existing collection, so vecmem
  compares them itself and raises ``EmbeddingMismatchError`` on a change.
* Cosine space; similarity is ``1 - cosine distance``. Embeddings are always supplied by vecmem
  (``embedding_function=None``), so Chroma's own default model is never loaded. Telemetry is off.
* A store written before the per-type layout (one ``vecmem-u-<hash>`` collection per user) is split into it
  the first time the user is opened; the old collection is dropped only once every row was copied.

Rows (``rows.py``) keep a memory's fields in the metadata together with its keyword tokens (``keywords``),
written in the same call as the vector, so the keyword index is always rebuilt from the store.

Given a ``ChangeFeed`` (``changes.py``, embedded stores), every write is announced there around the Chroma
call, so other banks' in-memory copies learn which memories to re-read.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlparse

import numpy as np

from vecmem.storage.changes import ChangeFeed
from vecmem.errors import EmbeddingMismatchError, InvalidInputError, StoreError, VecmemError
from vecmem.models import MEMORY_TYPES, MemoryFilter, MemoryRecord
from vecmem.storage.rows import from_row, to_metadata, where_clause

__all__ = ["ChromaStore", "where_clause"]

_USER_PREFIX = "vecmem-u-"
_DEFAULT_DATABASE = "default_database"  # Chroma's own default
_REGISTRY = "vecmem-registry"
_REBUILD_SUFFIX = "-reindex"
_SCHEMA_VERSION = 2  # 1: one collection per user; 2: one per user and type
_PAGE = 1000  # rows per Chroma get() page when scanning a collection
# An id-restricted search either reads the allowed ids' vectors and compares them here, or asks HNSW to search
# only among them. Measured on two cores: reading costs about 0.6 ms + 0.05 ms an id; a restricted HNSW search
# about 1.5 ms + 0.1 ms per (collection size / allowed ids), up to about 45 ms (20 ids among 50,000), because
# the graph walk must pass many disallowed nodes to find allowed ones. The cheaper one is chosen per collection.
_READ_MS, _READ_MS_PER_ID = 0.6, 0.05
_RESTRICTED_MS, _RESTRICTED_MS_PER_SPARSITY, _RESTRICTED_MS_MOST = 1.5, 0.1, 45.0
_FETCH_AT_MOST = 32  # without the collection's size, read the vectors of up to this many ids
_RECHECK_MISSING_S = 5.0  # without a change feed: how long a missing collection is believed missing
_RESTRICT_CHUNK = 50_000  # ids per id-restricted query (90,000 at once worked; stay well inside the limits)


def _user_key(user_id: str) -> str:
    # Chroma names allow [a-zA-Z0-9._-] only, so the user id is hashed and kept in the collection metadata.
    return _USER_PREFIX + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:32]


def _collection_name(user_id: str, memory_type: str) -> str:
    return f"{_user_key(user_id)}-{memory_type}"


@contextlib.contextmanager
def _chroma_errors(action: str) -> Iterator[None]:
    """Convert whatever Chroma raises into StoreError, keeping vecmem's own errors as they are."""
    try:
        yield
    except VecmemError:
        raise
    except Exception as exc:  # chromadb raises ChromaError subclasses, ValueError, httpx errors, ...
        message = str(exc) or type(exc).__name__
        if "dimension" in message.lower():
            message += " (the embedding model changed its output size; run `vecmem reindex`)"
        raise StoreError(f"{action} failed: {message}") from exc


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _search_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="vecmem-search")
        return _POOL


def _ensure_database(chromadb: Any, settings_class: Any, host: str, port: int, https: bool, database: str) -> None:
    """Create the server's database when it does not exist yet (one server can hold many vecmem stores)."""
    admin = chromadb.AdminClient(settings_class(
        anonymized_telemetry=False, chroma_api_impl="chromadb.api.fastapi.FastAPI", chroma_server_host=host,
        chroma_server_http_port=port, chroma_server_ssl_enabled=https,
    ))
    try:
        admin.get_database(database)
    except Exception as exc:  # NotFoundError on recent servers; older ones say so in the message
        if "not found" not in str(exc).lower() and "does not exist" not in str(exc).lower() and \
                type(exc).__name__ != "NotFoundError":
            raise
        admin.create_database(database)


def _read_is_cheaper(allowed: int, collection_size: int | None) -> bool:
    """Whether reading ``allowed`` vectors beats an HNSW search restricted to them (see the costs above)."""
    if collection_size is None:
        return allowed <= _FETCH_AT_MOST
    sparsity = collection_size / max(allowed, 1)
    restricted = _RESTRICTED_MS + min(_RESTRICTED_MS_MOST, _RESTRICTED_MS_PER_SPARSITY * sparsity)
    return _READ_MS + _READ_MS_PER_ID * allowed < restricted


def _zip_rows(rows: Mapping[str, Any], *fields: str) -> Iterator[tuple[Any, ...]]:
    return zip(rows["ids"], *(rows[f] for f in fields), strict=True)


class ChromaStore:
    """Memories of many users in Chroma, embedded (a folder) or on a Chroma server (a URL)."""

    collection_name = staticmethod(_collection_name)  # for tools that open a user's collection directly

    def __init__(
        self,
        *,
        model_name: str,
        path: Path | None = None,
        url: str | None = None,
        database: str = _DEFAULT_DATABASE,
        changes: ChangeFeed | None = None,
    ) -> None:
        if (path is None) == (url is None):
            raise ValueError("give exactly one of path or url")
        self.model_name = model_name
        self.changes = changes
        if url is None:
            self.location = str(path)
        else:
            self.location = url if database == _DEFAULT_DATABASE else f"{url} (database {database})"
        self._client = self._connect(path, url, database)
        self._collections: dict[str, dict[str, Any]] = {}  # user -> {type: collection} of those that exist
        self._resolved: dict[str, float] = {}  # user -> _moment() when its collections were last looked up
        self._lock = threading.RLock()

    @staticmethod
    def _connect(path: Path | None, url: str | None, database: str) -> Any:
        try:
            import chromadb
            from chromadb.config import Settings as ChromaSettings
        except ImportError as exc:  # pragma: no cover - chromadb is a hard dependency
            raise StoreError(f"chromadb is not installed: {exc}") from exc
        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        if url is not None:
            parsed = urlparse(url)
            https = parsed.scheme == "https"
            port = parsed.port or (443 if https else 8000)
            host = parsed.hostname or "localhost"
            with _chroma_errors(f"connecting to the Chroma server at {url}"):
                if database != _DEFAULT_DATABASE:
                    _ensure_database(chromadb, ChromaSettings, host, port, https, database)
                return chromadb.HttpClient(host=host, port=port, ssl=https, settings=chroma_settings,
                                           database=database)
        assert path is not None
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store folder {path}: {exc}") from exc
        with _chroma_errors(f"opening the store in {path}"):
            return chromadb.PersistentClient(path=str(path), settings=chroma_settings)

    # ----------------------------------------------------------------------------------------- model record

    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the store was built with, or None for a store that has never been written."""
        registry = self._get_collection(_REGISTRY)
        if registry is None:
            return None
        meta = registry.metadata or {}
        return str(meta.get("embed_model", "")), int(meta.get("embed_dim", 0) or 0)

    def check_model(self) -> None:
        """Raise EmbeddingMismatchError when the store was built with a different model."""
        stored = self.stored_model()
        if stored is not None and stored[0] != self.model_name:
            raise EmbeddingMismatchError(stored[0], stored[1], self.model_name)

    def _record_model(self, dimension: int, *, replace: bool = False) -> None:
        """Create the registry for a new store; ``replace`` (reindex only) moves it to the current model."""
        metadata = {"embed_model": self.model_name, "embed_dim": dimension, "vecmem_schema": _SCHEMA_VERSION}
        with _chroma_errors("recording the embedding model"):
            registry = self._client.get_or_create_collection(_REGISTRY, metadata=metadata, embedding_function=None)
            stored = registry.metadata or {}
            if stored == metadata:
                return
            if stored.get("embed_model") != self.model_name and not replace:
                raise EmbeddingMismatchError(
                    str(stored.get("embed_model")), int(stored.get("embed_dim", 0) or 0), self.model_name
                )
            registry.modify(metadata=metadata)

    # ----------------------------------------------------------------------------------------- collections

    def _get_collection(self, name: str) -> Any | None:
        try:
            return self._client.get_collection(name, embedding_function=None)
        except Exception as exc:
            if "does not exist" in str(exc) or type(exc).__name__ in ("NotFoundError", "CollectionNotFoundError"):
                return None
            raise StoreError(f"reading collection {name} failed: {exc}") from exc

    def _create_collection(self, name: str, metadata: dict[str, Any]) -> Any:
        try:
            return self._client.create_collection(
                name, configuration={"hnsw": {"space": "cosine"}}, metadata=metadata, embedding_function=None
            )
        except Exception as exc:
            if "already exists" in str(exc):  # another bank of this process (or a server client) just made it
                existing = self._get_collection(name)
                if existing is not None:
                    return existing
            raise StoreError(f"creating collection {name} failed: {exc}") from exc

    def _user_metadata(self, user_id: str, dimension: int, memory_type: str, **extra: Any) -> dict[str, Any]:
        return {
            "vecmem_user": user_id,
            "vecmem_type": memory_type,
            "embed_model": self.model_name,
            "embed_dim": dimension,
            "vecmem_schema": _SCHEMA_VERSION,
            **extra,
        }

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
        wanted = MEMORY_TYPES if types is None else tuple(types)
        with self._lock:
            known = self._collections.get(user_id)
            if known is not None and any(t not in known for t in wanted) and self._may_have_new(user_id):
                known = None  # another bank may have created the missing ones since
            if known is None:
                self._resolved[user_id] = self._moment()
                self._split_legacy(user_id)
                known = {}
                for memory_type in MEMORY_TYPES:
                    name = _collection_name(user_id, memory_type)
                    collection = self._get_collection(name) or self._finish_interrupted_rebuild(name)
                    if collection is not None:
                        known[memory_type] = collection
                self._collections[user_id] = known
            if create_with_dimension is not None:
                missing = [t for t in wanted if t not in known]
                if missing:
                    self._record_model(create_with_dimension)
                for memory_type in missing:
                    known[memory_type] = self._create_collection(
                        _collection_name(user_id, memory_type),
                        self._user_metadata(user_id, create_with_dimension, memory_type),
                    )
            found = {t: known[t] for t in wanted if t in known}
        if verify:
            for collection in found.values():
                meta = collection.metadata or {}
                stored = str(meta.get("embed_model", ""))
                if stored != self.model_name:
                    raise EmbeddingMismatchError(stored, int(meta.get("embed_dim", 0) or 0), self.model_name)
        return found

    def refresh(self, user_id: str) -> None:
        """Forget which collections of the user exist (another bank or server client may have made one since)."""
        with self._lock:
            self._collections.pop(user_id, None)

    def _moment(self) -> float:
        """Where the store's history stands: the change feed's newest row, or (no feed) the time."""
        return float(self.changes.head()) if self.changes is not None else time.monotonic()

    def _may_have_new(self, user_id: str) -> bool:
        """Whether a collection missing from what was found for this user may exist by now:
        another bank wrote since (by the change feed), or, without one, the last look is older than
        _RECHECK_MISSING_S. A write of this process creates what it needs itself."""
        resolved = self._resolved.get(user_id, 0.0)
        if self.changes is not None:
            return self.changes.others_wrote(user_id, int(resolved))
        return time.monotonic() - resolved >= _RECHECK_MISSING_S

    def _split_legacy(self, user_id: str) -> None:
        """Move a one-collection-per-user store (schema 1) into the per-type layout, rows with their vectors."""
        legacy = self._get_collection(_user_key(user_id))
        if legacy is None:
            return
        meta = legacy.metadata or {}
        dimension = int(meta.get("embed_dim", 0) or 0)
        targets: dict[str, Any] = {}
        with _chroma_errors(f"moving the memories of user {user_id!r} to the per-type layout"):
            offset = 0
            while True:
                rows = legacy.get(limit=_PAGE, offset=offset, include=["documents", "metadatas", "embeddings"])
                by_type: dict[str, list[int]] = {}
                for position, metadata in enumerate(rows["metadatas"]):
                    by_type.setdefault((metadata or {}).get("type", "fact"), []).append(position)
                for memory_type, positions in by_type.items():
                    if memory_type not in targets:
                        name = _collection_name(user_id, memory_type)
                        targets[memory_type] = self._get_collection(name) or self._create_collection(
                            name, {**self._user_metadata(user_id, dimension, memory_type),
                                   "embed_model": meta.get("embed_model", self.model_name)},
                        )
                    targets[memory_type].upsert(
                        ids=[rows["ids"][p] for p in positions],
                        embeddings=np.asarray([rows["embeddings"][p] for p in positions], dtype=np.float32),
                        documents=[rows["documents"][p] for p in positions],
                        metadatas=[rows["metadatas"][p] for p in positions],
                    )
                if len(rows["ids"]) < _PAGE:
                    break
                offset += _PAGE
            self._client.delete_collection(legacy.name)  # only now: every row is in its new home
        self._announce_reset(user_id)

    def _finish_interrupted_rebuild(self, name: str) -> Any | None:
        """A reindex that died between dropping the old collection and renaming the new one left it complete."""
        rebuilt = self._get_collection(name + _REBUILD_SUFFIX)
        if rebuilt is None or not (rebuilt.metadata or {}).get("vecmem_rebuild_complete"):
            return None
        with _chroma_errors("finishing an interrupted reindex"):
            rebuilt.modify(name=name)
            return self._client.get_collection(name, embedding_function=None)

    def users(self) -> list[str]:
        """Every user id that has a collection in this store."""
        with _chroma_errors("listing users"):
            collections = self._client.list_collections()
        found = set()
        for collection in collections:
            name = collection.name
            meta = collection.metadata or {}
            if name.startswith(_USER_PREFIX) and not name.endswith(_REBUILD_SUFFIX) and "vecmem_user" in meta:
                found.add(str(meta["vecmem_user"]))
        return sorted(found)

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

    def get_indexed(
        self, user_id: str, ids: Sequence[str]
    ) -> dict[str, tuple[MemoryRecord, np.ndarray, list[str] | None]]:
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
            offset = 0
            while True:
                with _chroma_errors("reading embeddings"):
                    rows = collection.get(limit=page, offset=offset, include=["embeddings"])
                if rows["ids"]:
                    yield list(rows["ids"]), np.asarray(rows["embeddings"], dtype=np.float32)
                if len(rows["ids"]) < page:
                    break
                offset += page

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
            with _chroma_errors("reading embeddings"):
                rows = collections[memory_type].get(ids=wanted, include=["embeddings"])
            matrix = np.asarray(rows["embeddings"], dtype=np.float32).reshape(len(rows["ids"]), -1)
            return list(zip(rows["ids"], matrix, strict=True))

        items = list(plan.items())
        results = [one(items[0])] if len(items) == 1 else list(_search_pool().map(one, items))
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
            with _chroma_errors("reading memories"):
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
            with _chroma_errors("counting memories"):
                total += int(collection.count())
        return total

    def _pages(self, collection: Any, where: dict[str, Any] | None, action: str) -> Iterator[tuple[Any, ...]]:
        offset = 0
        while True:
            with _chroma_errors(action):
                rows = collection.get(where=where, limit=_PAGE, offset=offset, include=["documents", "metadatas"])
            yield from _zip_rows(rows, "documents", "metadatas")
            if len(rows["ids"]) < _PAGE:
                return
            offset += _PAGE

    def scan(self, user_id: str, memory_filter: MemoryFilter) -> Iterator[MemoryRecord]:
        """Every memory of the user that passes the filter, page by page."""
        where = where_clause(memory_filter)
        for collection in self._typed(user_id, memory_filter.types, verify=False).values():
            for memory_id, document, metadata in self._pages(collection, where, "listing memories"):
                record = from_row(memory_id, document, metadata)
                if memory_filter.matches(record):
                    yield record

    def scan_keywords(self, user_id: str) -> Iterator[tuple[MemoryRecord, list[str] | None]]:
        """Every memory of the user with its stored keyword tokens (None when written before they existed)."""
        for collection in self._typed(user_id, verify=False).values():
            for memory_id, document, metadata in self._pages(collection, None, "reading the keyword index"):
                stored = (metadata or {}).get("keywords")
                yield from_row(memory_id, document, metadata), None if stored is None else stored.split()

    def raw_rows(self, user_id: str) -> Iterator[tuple[str, str, str | None, dict[str, Any] | None]]:
        """Every row of the user as stored: (collection's type, id, document, metadata), unread ones included
        (what ``vecmem doctor`` examines)."""
        for memory_type, collection in self._typed(user_id, verify=False).items():
            for memory_id, document, metadata in self._pages(collection, None, "examining the store"):
                yield memory_type, memory_id, document, metadata

    def collection_models(self, user_id: str) -> dict[str, tuple[str, int]]:
        """{type: (embedding model, dimension)} as each of the user's collections records it."""
        found = {}
        for memory_type, collection in self._typed(user_id, verify=False).items():
            meta = collection.metadata or {}
            found[memory_type] = (str(meta.get("embed_model", "")), int(meta.get("embed_dim", 0) or 0))
        return found

    def replaced_by(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        """The memories whose ``superseded_by`` points at ``memory_id``."""
        return [
            from_row(row_id, document, metadata)
            for collection in self._typed(user_id, verify=False).values()
            for row_id, document, metadata in self._pages(
                collection, {"superseded_by": memory_id}, "reading the supersession history"
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
        its cheaper way; without it, only a few ids are compared here.

        Only ids and distances: asking Chroma for documents and metadata too costs three times as much for
        a few hundred neighbours. The caller filters (retrieval.py) and fetches the few it keeps.
        """
        if n_results <= 0:
            return [], []
        vector = [np.asarray(embedding, dtype=np.float32)]
        calls: list[tuple[Any, Sequence[str] | None, int | None]] = []
        for memory_type, collection in self._typed(user_id, types).items():
            if among is None:
                calls.append((collection, None, None))
            else:
                allowed = among.get(memory_type, ())
                size = None if sizes is None else sizes.get(memory_type)
                calls.extend((collection, allowed[i : i + _RESTRICT_CHUNK], size)
                             for i in range(0, len(allowed), _RESTRICT_CHUNK))

        def one(call: tuple[Any, Sequence[str] | None, int | None]) -> list[tuple[float, str]]:
            collection, chunk, size = call
            if chunk is not None and _read_is_cheaper(len(chunk), size):
                with _chroma_errors("searching memories"):
                    rows = collection.get(ids=list(chunk), include=["embeddings"])
                if not rows["ids"]:
                    return []
                cosines = np.asarray(rows["embeddings"], dtype=np.float32) @ vector[0]
                return [(1.0 - float(c), i) for i, c in zip(rows["ids"], cosines, strict=True)]
            with _chroma_errors("searching memories"):
                rows = collection.query(query_embeddings=vector, n_results=n_results, ids=chunk, include=["distances"])
            return [(float(d), i) for i, d in zip(rows["ids"][0], rows["distances"][0], strict=True)]

        # several collections (an untyped search reads four) are searched at once: Chroma releases the GIL
        results = [one(calls[0])] if len(calls) == 1 else list(_search_pool().map(one, calls))
        found = sorted(pair for result in results for pair in result)
        return [i for _, i in found[:n_results]], [1.0 - d for d, _ in found[:n_results]]

    def query(
        self, user_id: str, embedding: np.ndarray, n_results: int, memory_filter: MemoryFilter
    ) -> list[tuple[MemoryRecord, float]]:
        """Up to ``n_results`` nearest memories passing the filter, with Chroma's where-filter (exact, but at
        100,000 memories 60 times slower than ``nearest``; retrieval.py does not use it)."""
        vector = [np.asarray(embedding, dtype=np.float32)]
        found: list[tuple[MemoryRecord, float]] = []
        for collection in self._typed(user_id, memory_filter.types).values():
            with _chroma_errors("searching memories"):
                rows = collection.query(
                    query_embeddings=vector,
                    n_results=n_results,
                    where=where_clause(memory_filter),
                    include=["documents", "metadatas", "distances"],
                )
            for memory_id, document, metadata, distance in zip(
                rows["ids"][0], rows["documents"][0], rows["metadatas"][0], rows["distances"][0], strict=True
            ):
                record = from_row(memory_id, document, metadata)
                if memory_filter.matches(record):  # defence in depth: never trust a filter we did not write
                    found.append((record, 1.0 - float(distance)))
        found.sort(key=lambda pair: -pair[1])
        return found[:n_results]

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
            raise ValueError("one token list per record")
        vectors = np.asarray(embeddings, dtype=np.float32)
        by_type: dict[str, list[int]] = {}
        for position, record in enumerate(records):
            by_type.setdefault(record.type, []).append(position)
        collections = self._typed(user_id, by_type, create_with_dimension=int(vectors.shape[1]))
        with self._announced(user_id, [r.id for r in records]):
            for memory_type, positions in by_type.items():
                batch = [records[p] for p in positions]
                with _chroma_errors("writing memories"):
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
                        with _chroma_errors("moving memories between types"):
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
                with _chroma_errors("updating memories"):
                    collection.update(ids=[r.id for r in batch], metadatas=[to_metadata(r) for r in batch])
        missing = {r.type for r in records} - set(collections)
        if missing:
            raise StoreError(f"user {user_id!r} has no {', '.join(sorted(missing))} memories to update")

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._announced(user_id, ids):
            for collection in self._typed(user_id, verify=False).values():
                with _chroma_errors("deleting memories"):
                    collection.delete(ids=list(ids))

    def _announced(self, user_id: str, ids: Sequence[str]) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self.changes is None else self.changes.writing(user_id, ids)

    def _announce_reset(self, user_id: str) -> None:
        if self.changes is not None:
            self.changes.reset(user_id)

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
        """Re-embed every memory of a user into fresh collections, swapping each in; returns the count.

        An old collection stays untouched until its new one is complete; if the process dies after the old
        one is dropped, the next open finds the complete rebuild and renames it into place.
        """
        copied = 0
        for memory_type, old in self._typed(user_id, verify=False).items():
            name = _collection_name(user_id, memory_type)
            staging_name = name + _REBUILD_SUFFIX
            with _chroma_errors(f"reindexing user {user_id!r}"):
                if self._get_collection(staging_name) is not None:
                    self._client.delete_collection(staging_name)
                staging = self._create_collection(
                    staging_name, self._user_metadata(user_id, dimension, memory_type, vecmem_rebuild_complete=False)
                )
                try:
                    copied += self._copy_embedded(old, staging, embed_documents, batch_size, progress)
                except BaseException:
                    self._client.delete_collection(staging_name)  # the old collection was never touched
                    raise
                staging.modify(metadata=self._user_metadata(user_id, dimension, memory_type,
                                                            vecmem_rebuild_complete=True))
                self._client.delete_collection(name)
                staging.modify(name=name)
                renamed = self._client.get_collection(name, embedding_function=None)
                renamed.modify(metadata=self._user_metadata(user_id, dimension, memory_type))
        self.refresh(user_id)
        self._announce_reset(user_id)
        return copied

    @staticmethod
    def _copy_embedded(
        source: Any,
        target: Any,
        embed_documents: Callable[[Sequence[str]], np.ndarray],
        batch_size: int,
        progress: Callable[[int], None] | None,
    ) -> int:
        copied = offset = 0
        while True:
            rows = source.get(limit=batch_size, offset=offset, include=["documents", "metadatas"])
            if rows["ids"]:
                target.add(
                    ids=rows["ids"],
                    embeddings=np.asarray(embed_documents(rows["documents"]), dtype=np.float32),
                    documents=rows["documents"],
                    metadatas=rows["metadatas"],
                )
                copied += len(rows["ids"])
                if progress is not None:
                    progress(len(rows["ids"]))
            if len(rows["ids"]) < batch_size:
                return copied
            offset += batch_size

    def finish_rebuild(self, dimension: int) -> None:
        """After every user is rebuilt, record the new model for the whole store."""
        self._record_model(dimension, replace=True)

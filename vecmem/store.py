"""The Chroma-backed memory store. The only module that imports chromadb.

Layout
------
* One collection per user (``vecmem-u-<hash of user_id>``): memories of different users live in different
  HNSW indexes, so no query or filter mistake can ever return another user's memory.
* A ``vecmem-registry`` collection whose metadata records the store's embedding model and dimension; every
  user collection records them too. Chroma ignores metadata passed for an existing collection, so vecmem
  compares them itself and raises ``EmbeddingMismatchError`` on a change.
* Cosine space; similarity is ``1 - cosine distance``. Embeddings are always supplied by vecmem
  (``embedding_function=None``), so Chroma's own default model is never loaded. Telemetry is off.

A memory's fields live in the Chroma metadata (times as epoch seconds, ``last_accessed`` 0 for never,
``superseded`` as a boolean beside ``superseded_by`` so the filter is one equality test), together with its
keyword tokens (``keywords``, space-separated), written in the same call as the vector so the keyword index
can always be rebuilt from the store and never disagrees with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlparse

import numpy as np

from .errors import EmbeddingMismatchError, InvalidInputError, StoreError, VecmemError
from .models import MemoryFilter, MemoryRecord

__all__ = ["ChromaStore", "where_clause"]

_USER_PREFIX = "vecmem-u-"
_REGISTRY = "vecmem-registry"
_REBUILD_SUFFIX = "-reindex"
_SCHEMA_VERSION = 1
_PAGE = 1000  # rows per Chroma get() page when scanning a collection
_RESTRICT_CHUNK = 50_000  # ids per id-restricted query (90,000 at once worked; stay well inside the limits)


def where_clause(memory_filter: MemoryFilter) -> dict[str, Any] | None:
    """Translate a MemoryFilter into a Chroma ``where`` (Chroma wants ``$and`` only for 2+ clauses)."""
    clauses: list[dict[str, Any]] = []
    if not memory_filter.include_superseded:
        clauses.append({"superseded": False})
    scopes = memory_filter.scopes
    if scopes is not None:
        clauses.append({"scope": {"$in": list(scopes)}})
    if memory_filter.types is not None:
        clauses.append({"type": {"$in": sorted(memory_filter.types)}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _epoch(moment: datetime | None) -> float:
    return 0.0 if moment is None else moment.timestamp()


def _to_metadata(record: MemoryRecord) -> dict[str, Any]:
    return {
        "type": record.type,
        "scope": record.scope,
        "importance": record.importance,
        "confidence": record.confidence,
        "source": record.source,
        "created_at": _epoch(record.created_at),
        "last_accessed": _epoch(record.last_accessed),
        "access_count": record.access_count,
        "superseded": record.superseded,
        "superseded_by": record.superseded_by or "",
        "user_id": record.user_id,
        # Chroma refuses empty lists and merges metadata on update; None removes a stale key.
        "tags": list(record.tags) or None,
        "context": record.context or None,
    }


def _from_row(memory_id: str, document: str | None, metadata: dict[str, Any] | None) -> MemoryRecord:
    meta = metadata or {}
    try:
        last_accessed = float(meta.get("last_accessed") or 0.0)
        return MemoryRecord.trusted(
            id=memory_id,
            content=document or "",
            type=str(meta.get("type", "fact")),
            tags=tuple(meta.get("tags") or ()),
            importance=float(meta.get("importance", 0.5)),
            scope=str(meta.get("scope", "global")),
            created_at=datetime.fromtimestamp(float(meta.get("created_at", 0.0)), timezone.utc),
            last_accessed=None if last_accessed <= 0 else datetime.fromtimestamp(last_accessed, timezone.utc),
            access_count=int(meta.get("access_count", 0)),
            source=str(meta.get("source", "manual")),
            confidence=float(meta.get("confidence", 1.0)),
            superseded_by=meta.get("superseded_by") or None,
            user_id=str(meta.get("user_id", "default")),
            context=meta.get("context") or "",
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise StoreError(f"memory {memory_id} in the store is unreadable: {exc}") from exc


def _collection_name(user_id: str) -> str:
    # Chroma names allow [a-zA-Z0-9._-] only, so the user id is hashed and kept in the collection metadata.
    return _USER_PREFIX + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:32]





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


class ChromaStore:
    """Memories of many users in Chroma, embedded (a folder) or on a Chroma server (a URL)."""

    collection_name = staticmethod(_collection_name)  # for tools that open a user's collection directly

    def __init__(self, *, model_name: str, path: Path | None = None, url: str | None = None) -> None:
        if (path is None) == (url is None):
            raise ValueError("give exactly one of path or url")
        self.model_name = model_name
        self.location = url or str(path)
        self._client = self._connect(path, url)
        self._collections: dict[str, Any] = {}
        self._lock = threading.RLock()

    @staticmethod
    def _connect(path: Path | None, url: str | None) -> Any:
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
            with _chroma_errors(f"connecting to the Chroma server at {url}"):
                return chromadb.HttpClient(
                    host=parsed.hostname or "localhost", port=port, ssl=https, settings=chroma_settings
                )
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

    def _user_metadata(self, user_id: str, dimension: int, **extra: Any) -> dict[str, Any]:
        return {
            "vecmem_user": user_id,
            "embed_model": self.model_name,
            "embed_dim": dimension,
            "vecmem_schema": _SCHEMA_VERSION,
            **extra,
        }

    def _user_collection(self, user_id: str, *, dimension: int | None = None, verify: bool = True) -> Any | None:
        """The user's collection; created when ``dimension`` is given (a write), else None if it does not exist."""
        with self._lock:
            collection = self._collections.get(user_id)
            if collection is None:
                name = _collection_name(user_id)
                collection = self._get_collection(name) or self._finish_interrupted_rebuild(name)
                if collection is None:
                    if dimension is None:
                        return None
                    self._record_model(dimension)
                    with _chroma_errors(f"creating the collection of user {user_id!r}"):
                        collection = self._client.create_collection(
                            name,
                            configuration={"hnsw": {"space": "cosine"}},
                            metadata=self._user_metadata(user_id, dimension),
                            embedding_function=None,
                        )
                self._collections[user_id] = collection
        if verify:
            meta = collection.metadata or {}
            stored = str(meta.get("embed_model", ""))
            if stored != self.model_name:
                raise EmbeddingMismatchError(stored, int(meta.get("embed_dim", 0) or 0), self.model_name)
        return collection

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
        found = []
        for collection in collections:
            name = collection.name
            meta = collection.metadata or {}
            if name.startswith(_USER_PREFIX) and not name.endswith(_REBUILD_SUFFIX) and "vecmem_user" in meta:
                found.append(str(meta["vecmem_user"]))
        return sorted(found)

    # ----------------------------------------------------------------------------------------- reads

    def get(self, user_id: str, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        collection = self._user_collection(user_id, verify=False)
        if collection is None or not ids:
            return {}
        with _chroma_errors("reading memories"):
            rows = collection.get(ids=list(ids), include=["documents", "metadatas"])
        return {
            memory_id: _from_row(memory_id, document, metadata)
            for memory_id, document, metadata in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)
        }

    def count(self, user_id: str) -> int:
        collection = self._user_collection(user_id, verify=False)
        if collection is None:
            return 0
        with _chroma_errors("counting memories"):
            return int(collection.count())

    def scan(self, user_id: str, memory_filter: MemoryFilter) -> Iterator[MemoryRecord]:
        """Every memory of the user that passes the filter, page by page."""
        collection = self._user_collection(user_id, verify=False)
        if collection is None:
            return
        where = where_clause(memory_filter)
        offset = 0
        while True:
            with _chroma_errors("listing memories"):
                rows = collection.get(where=where, limit=_PAGE, offset=offset, include=["documents", "metadatas"])
            for memory_id, document, metadata in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True):
                record = _from_row(memory_id, document, metadata)
                if memory_filter.matches(record):
                    yield record
            if len(rows["ids"]) < _PAGE:
                return
            offset += _PAGE

    def scan_keywords(self, user_id: str) -> Iterator[tuple[MemoryRecord, list[str] | None]]:
        """Every memory of the user with its stored keyword tokens (None when written before they existed)."""
        collection = self._user_collection(user_id, verify=False)
        if collection is None:
            return
        offset = 0
        while True:
            with _chroma_errors("reading the keyword index"):
                rows = collection.get(limit=_PAGE, offset=offset, include=["documents", "metadatas"])
            for memory_id, document, metadata in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True):
                stored = (metadata or {}).get("keywords")
                yield _from_row(memory_id, document, metadata), None if stored is None else stored.split()
            if len(rows["ids"]) < _PAGE:
                return
            offset += _PAGE

    def replaced_by(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        """The memories whose ``superseded_by`` points at ``memory_id``."""
        collection = self._user_collection(user_id, verify=False)
        if collection is None:
            return []
        with _chroma_errors("reading the supersession history"):
            rows = collection.get(where={"superseded_by": memory_id}, include=["documents", "metadatas"])
        return [
            _from_row(row_id, document, metadata)
            for row_id, document, metadata in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)
        ]

    def nearest(
        self, user_id: str, embedding: np.ndarray, n_results: int, *, among: Sequence[str] | None = None
    ) -> tuple[list[str], list[float]]:
        """Ids and cosine similarities of the ``n_results`` nearest memories, best first: of all the user's
        memories, or only of those in ``among`` (an exact search restricted to them).

        Only ids and distances: asking Chroma for documents and metadata too costs three times as much for
        a few hundred neighbours. The caller filters (retrieval.py) and fetches the few it keeps.
        """
        collection = self._user_collection(user_id)
        if collection is None or n_results <= 0 or (among is not None and not among):
            return [], []
        vector = [np.asarray(embedding, dtype=np.float32)]
        chunks = [None] if among is None else [among[i : i + _RESTRICT_CHUNK] for i in range(0, len(among), _RESTRICT_CHUNK)]
        found: list[tuple[float, str]] = []
        for chunk in chunks:
            with _chroma_errors("searching memories"):
                rows = collection.query(query_embeddings=vector, n_results=n_results, ids=chunk, include=["distances"])
            found.extend((float(d), i) for i, d in zip(rows["ids"][0], rows["distances"][0], strict=True))
        found.sort()
        return [i for _, i in found[:n_results]], [1.0 - d for d, _ in found[:n_results]]

    def query(
        self, user_id: str, embedding: np.ndarray, n_results: int, memory_filter: MemoryFilter
    ) -> list[tuple[MemoryRecord, float]]:
        """Up to ``n_results`` nearest memories passing the filter (Chroma's where-filter: exact but, at
        100,000 memories, about 60 times slower than ``nearest``; retrieval.py uses it only as a fallback)."""
        collection = self._user_collection(user_id)
        if collection is None or n_results <= 0:
            return []
        return self._filtered_query(collection, [np.asarray(embedding, dtype=np.float32)], n_results, memory_filter)

    def _filtered_query(
        self, collection: Any, vector: list[np.ndarray], n_results: int, memory_filter: MemoryFilter
    ) -> list[tuple[MemoryRecord, float]]:
        with _chroma_errors("searching memories"):
            rows = collection.query(
                query_embeddings=vector,
                n_results=n_results,
                where=where_clause(memory_filter),
                include=["documents", "metadatas", "distances"],
            )
        found = []
        for memory_id, document, metadata, distance in zip(
            rows["ids"][0], rows["documents"][0], rows["metadatas"][0], rows["distances"][0], strict=True
        ):
            record = _from_row(memory_id, document, metadata)
            if memory_filter.matches(record):  # defence in depth: never trust a filter we did not write
                found.append((record, 1.0 - float(distance)))
        return found

    def get_with_embeddings(self, user_id: str, ids: Sequence[str]) -> dict[str, tuple[MemoryRecord, np.ndarray]]:
        collection = self._user_collection(user_id)
        if collection is None or not ids:
            return {}
        with _chroma_errors("reading memories"):
            rows = collection.get(ids=list(ids), include=["documents", "metadatas", "embeddings"])
        return {
            memory_id: (_from_row(memory_id, document, metadata), np.asarray(vector, dtype=np.float32))
            for memory_id, document, metadata, vector in zip(
                rows["ids"], rows["documents"], rows["metadatas"], rows["embeddings"], strict=True
            )
        }

    # ----------------------------------------------------------------------------------------- writes

    def upsert(
        self,
        user_id: str,
        records: Sequence[MemoryRecord],
        embeddings: np.ndarray,
        keywords: Sequence[Sequence[str]],
    ) -> None:
        """Write new or changed memories together with their embeddings and keyword tokens."""
        if not records:
            return
        self._check_owner(user_id, records)
        if len(keywords) != len(records):
            raise ValueError("one token list per record")
        vectors = np.asarray(embeddings, dtype=np.float32)
        collection = self._user_collection(user_id, dimension=int(vectors.shape[1]))
        assert collection is not None  # a dimension means: create it if missing
        with _chroma_errors("writing memories"):
            collection.upsert(
                ids=[r.id for r in records],
                embeddings=vectors,
                documents=[r.content for r in records],
                metadatas=[{**_to_metadata(r), "keywords": " ".join(tokens)} for r, tokens in zip(records, keywords, strict=True)],
            )

    def update_metadata(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the fields of existing memories whose content (hence embedding) did not change."""
        if not records:
            return
        self._check_owner(user_id, records)
        collection = self._user_collection(user_id, verify=False)
        if collection is None:
            raise StoreError(f"user {user_id!r} has no memories to update")
        with _chroma_errors("updating memories"):
            collection.update(ids=[r.id for r in records], metadatas=[_to_metadata(r) for r in records])

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        collection = self._user_collection(user_id, verify=False)
        if collection is None or not ids:
            return
        with _chroma_errors("deleting memories"):
            collection.delete(ids=list(ids))

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
        """Re-embed every memory of a user into a fresh collection, then swap it in; returns the count.

        The old collection stays untouched until the new one is complete; if the process dies after the old
        one is dropped, the next open finds the complete rebuild and renames it into place.
        """
        old = self._user_collection(user_id, verify=False)
        if old is None:
            return 0
        name = _collection_name(user_id)
        staging_name = name + _REBUILD_SUFFIX
        with _chroma_errors(f"reindexing user {user_id!r}"):
            if self._get_collection(staging_name) is not None:
                self._client.delete_collection(staging_name)
            staging = self._client.create_collection(
                staging_name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata=self._user_metadata(user_id, dimension, vecmem_rebuild_complete=False),
                embedding_function=None,
            )
            try:
                copied = self._copy_embedded(old, staging, embed_documents, batch_size, progress)
            except BaseException:
                self._client.delete_collection(staging_name)  # the old collection was never touched
                raise
            staging.modify(metadata=self._user_metadata(user_id, dimension, vecmem_rebuild_complete=True))
            self._client.delete_collection(name)
            staging.modify(name=name)
            with self._lock:
                self._collections.pop(user_id, None)
            renamed = self._client.get_collection(name, embedding_function=None)
            renamed.modify(metadata=self._user_metadata(user_id, dimension))
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

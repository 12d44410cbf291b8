"""Which Chroma collections hold a store's memories: their names, the registry, and the repairs made when a
user is first opened.

* One collection per user and memory type (``vecmem-u-<hash of user_id>-<type>``). Memories of different
  users live in different HNSW indexes, so no query or filter mistake can return another user's memory; and a
  type filter (a coding request wants preferences and instructions) is a choice of collections instead of
  Chroma's where-filter, which costs 140 to 300 ms at 100,000 memories against 2 ms for a plain search.
* A ``vecmem-registry`` collection whose metadata records the store's embedding model and dimension; every
  user collection records them too. Chroma ignores metadata passed for an existing collection, so vecmem
  compares them itself and raises ``EmbeddingMismatchError`` on a change.
* Cosine space; embeddings are always supplied by vecmem (``embedding_function=None``), so Chroma's own
  default model is never loaded.
* A store written before the per-type layout (one ``vecmem-u-<hash>`` collection per user) is split into it
  the first time the user is opened; the old collection is dropped only once every row was copied.
* A reindex that died between dropping a collection and renaming its rebuilt copy into place left that copy
  complete (``-reindex``, marked ``vecmem_rebuild_complete``); opening the user renames it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from vecmem.errors import EmbeddingMismatchError, StoreError
from vecmem.models import MEMORY_TYPES
from vecmem.storage.changes import ChangeFeed
from vecmem.storage.chroma_client import chroma_errors, create_or_existing, found_or_none

__all__ = ["REBUILD_SUFFIX", "ChromaCollections", "collection_name", "model_of", "pages", "user_key"]

_USER_PREFIX = "vecmem-u-"
_REGISTRY = "vecmem-registry"
REBUILD_SUFFIX = "-reindex"
_SCHEMA_VERSION = 2  # 1: one collection per user; 2: one per user and type
_PAGE = 1000  # rows per Chroma get() page when scanning a collection
_RECHECK_MISSING_S = 5.0  # without a change feed: how long a missing collection is believed missing


def user_key(user_id: str) -> str:
    """The user's name in Chroma (and the name of their collection in the first layout)."""
    # Chroma names allow [a-zA-Z0-9._-] only, so the user id is hashed and kept in the collection metadata.
    return _USER_PREFIX + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:32]


def collection_name(user_id: str, memory_type: str) -> str:
    """The collection holding the user's memories of one type."""
    return f"{user_key(user_id)}-{memory_type}"


def pages(
    collection: Any, include: list[str], action: str, *, where: dict[str, Any] | None = None, size: int = _PAGE
) -> Iterator[Mapping[str, Any]]:
    """Every row of a collection (those passing ``where``), a Chroma ``get`` result of up to ``size`` rows at
    a time; empty pages are not yielded."""
    offset = 0
    while True:
        with chroma_errors(action):
            rows = collection.get(where=where, limit=size, offset=offset, include=include)
        if rows["ids"]:
            yield rows
        if len(rows["ids"]) < size:
            return
        offset += size


def model_of(metadata: Mapping[str, Any] | None) -> tuple[str, int]:
    """(embedding model, dimension) as a collection's metadata records them."""
    meta = metadata or {}
    return str(meta.get("embed_model", "")), int(meta.get("embed_dim", 0) or 0)


class ChromaCollections:
    """The collections of one store: looked up once per user and cached, created on a user's first write."""

    def __init__(self, client: Any, model_name: str, changes: ChangeFeed | None) -> None:
        self.client = client
        self.model_name = model_name
        self.changes = changes
        self._known: dict[str, dict[str, Any]] = {}  # user -> {type: collection} of those that exist
        self._resolved: dict[str, float] = {}  # user -> _moment() when its collections were last looked up
        self._lock = threading.RLock()

    # ------------------------------------------------------------------------------------------ one collection

    def get(self, name: str) -> Any | None:
        """The collection called ``name``, or None when there is none."""
        return found_or_none(lambda: self.client.get_collection(name, embedding_function=None),
                             f"reading collection {name}")

    def create(self, name: str, metadata: dict[str, Any]) -> Any:
        """A new collection; the existing one when another bank of this process (or a server client) has just
        made it."""
        return create_or_existing(
            lambda: self.client.create_collection(
                name, configuration={"hnsw": {"space": "cosine"}}, metadata=metadata, embedding_function=None
            ),
            lambda: self.client.get_collection(name, embedding_function=None),
            f"creating collection {name}",
        )

    def delete(self, name: str) -> None:
        with chroma_errors(f"dropping collection {name}"):
            self.client.delete_collection(name)

    def user_metadata(self, user_id: str, dimension: int, memory_type: str, **extra: Any) -> dict[str, Any]:
        return {
            "vecmem_user": user_id,
            "vecmem_type": memory_type,
            "embed_model": self.model_name,
            "embed_dim": dimension,
            "vecmem_schema": _SCHEMA_VERSION,
            **extra,
        }

    # ------------------------------------------------------------------------------------------ the registry

    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the store was built with, or None for a store that has never been written."""
        registry = self.get(_REGISTRY)
        return None if registry is None else model_of(registry.metadata)

    def record_model(self, dimension: int, *, replace: bool = False) -> None:
        """Create the registry for a new store; ``replace`` (reindex only) moves it to the current model."""
        metadata = {"embed_model": self.model_name, "embed_dim": dimension, "vecmem_schema": _SCHEMA_VERSION}
        with chroma_errors("recording the embedding model"):
            registry = self.client.get_or_create_collection(_REGISTRY, metadata=metadata, embedding_function=None)
            stored = registry.metadata or {}
            if stored == metadata:
                return
            if stored.get("embed_model") != self.model_name and not replace:
                raise EmbeddingMismatchError(*model_of(stored), self.model_name)
            registry.modify(metadata=metadata)

    def users(self) -> list[str]:
        """Every user id that has a collection in this store."""
        with chroma_errors("listing users"):
            collections = self.client.list_collections()
        found = set()
        for collection in collections:
            name = collection.name
            meta = collection.metadata or {}
            if name.startswith(_USER_PREFIX) and not name.endswith(REBUILD_SUFFIX) and "vecmem_user" in meta:
                found.add(str(meta["vecmem_user"]))
        return sorted(found)

    # ------------------------------------------------------------------------------------------ a user's

    def typed(
        self,
        user_id: str,
        types: Iterable[str] | None = None,
        *,
        create_with_dimension: int | None = None,
        verify: bool = True,
    ) -> dict[str, Any]:
        """The user's collections for ``types`` (all four when None) that exist; with a dimension (a write),
        the missing ones are created. ``verify``: raise EmbeddingMismatchError for one built with another model."""
        wanted = MEMORY_TYPES if types is None else tuple(types)
        with self._lock:
            known = self._known.get(user_id)
            if known is not None and any(t not in known for t in wanted) and self._may_have_new(user_id):
                known = None  # another bank may have created the missing ones since
            if known is None:
                self._resolved[user_id] = self._moment()
                self._split_legacy(user_id)
                known = {}
                for memory_type in MEMORY_TYPES:
                    name = collection_name(user_id, memory_type)
                    collection = self.get(name) or self._finish_interrupted_rebuild(name)
                    if collection is not None:
                        known[memory_type] = collection
                self._known[user_id] = known
            if create_with_dimension is not None:
                missing = [t for t in wanted if t not in known]
                if missing:
                    self.record_model(create_with_dimension)
                for new_type in missing:
                    known[new_type] = self.create(
                        collection_name(user_id, new_type),
                        self.user_metadata(user_id, create_with_dimension, new_type),
                    )
            found = {t: known[t] for t in wanted if t in known}
        if verify:
            for collection in found.values():
                stored, dimension = model_of(collection.metadata)
                if stored != self.model_name:
                    raise EmbeddingMismatchError(stored, dimension, self.model_name)
        return found

    def refresh(self, user_id: str) -> None:
        """Forget which collections of the user exist (another bank or server client may have made one since)."""
        with self._lock:
            self._known.pop(user_id, None)

    def announce_reset(self, user_id: str) -> None:
        """Tell other banks that every memory of the user may have moved."""
        if self.changes is not None:
            self.changes.reset(user_id)

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

    # ------------------------------------------------------------------------------------------ repairs on open

    def _split_legacy(self, user_id: str) -> None:
        """Move a one-collection-per-user store (schema 1) into the per-type layout, rows with their vectors."""
        legacy = self.get(user_key(user_id))
        if legacy is None:
            return
        meta = legacy.metadata or {}
        dimension = model_of(meta)[1]
        action = f"moving the memories of user {user_id!r} to the per-type layout"
        targets: dict[str, Any] = {}
        for rows in pages(legacy, ["documents", "metadatas", "embeddings"], action):
            by_type: dict[str, list[int]] = {}
            for position, metadata in enumerate(rows["metadatas"]):
                by_type.setdefault((metadata or {}).get("type", "fact"), []).append(position)
            for memory_type, positions in by_type.items():
                if memory_type not in targets:
                    name = collection_name(user_id, memory_type)
                    targets[memory_type] = self.get(name) or self.create(
                        name, {**self.user_metadata(user_id, dimension, memory_type),
                               "embed_model": meta.get("embed_model", self.model_name)},
                    )
                with chroma_errors(action, sends_vectors=True):
                    targets[memory_type].upsert(
                        ids=[rows["ids"][p] for p in positions],
                        embeddings=np.asarray([rows["embeddings"][p] for p in positions], dtype=np.float32),
                        documents=[rows["documents"][p] for p in positions],
                        metadatas=[rows["metadatas"][p] for p in positions],
                    )
        self.delete(legacy.name)  # only now: every row is in its new home
        self.announce_reset(user_id)

    def _finish_interrupted_rebuild(self, name: str) -> Any | None:
        """A reindex that died between dropping the old collection and renaming the new one left it complete."""
        rebuilt = self.get(name + REBUILD_SUFFIX)
        if rebuilt is None or not (rebuilt.metadata or {}).get("vecmem_rebuild_complete"):
            return None
        with chroma_errors("finishing an interrupted reindex"):
            rebuilt.modify(name=name)
            return self.client.get_collection(name, embedding_function=None)

    # ------------------------------------------------------------------------------------------ reindex

    def rebuild(
        self,
        user_id: str,
        embed_documents: Callable[[Sequence[str]], np.ndarray],
        dimension: int,
        *,
        batch_size: int,
        progress: Callable[[int], None] | None,
    ) -> int:
        """Re-embed every memory of a user into fresh collections, swapping each in; returns the count.

        An old collection stays untouched until its new one is complete; if the process dies after the old
        one is dropped, the next open finds the complete rebuild and renames it into place
        (``_finish_interrupted_rebuild``).
        """
        action = f"reindexing user {user_id!r}"
        copied = 0
        for memory_type, old in self.typed(user_id, verify=False).items():
            name = collection_name(user_id, memory_type)
            staging_name = name + REBUILD_SUFFIX
            if self.get(staging_name) is not None:
                self.delete(staging_name)  # a rebuild that died before it was complete
            staging = self.create(
                staging_name, self.user_metadata(user_id, dimension, memory_type, vecmem_rebuild_complete=False)
            )
            try:
                copied += _copy_embedded(old, staging, embed_documents, batch_size, progress, action)
            except BaseException:
                self.delete(staging_name)  # the old collection was never touched
                raise
            with chroma_errors(action):
                staging.modify(metadata=self.user_metadata(user_id, dimension, memory_type,
                                                           vecmem_rebuild_complete=True))
                self.client.delete_collection(name)
                staging.modify(name=name)
                renamed = self.client.get_collection(name, embedding_function=None)
                renamed.modify(metadata=self.user_metadata(user_id, dimension, memory_type))
        self.refresh(user_id)
        self.announce_reset(user_id)
        return copied


def _copy_embedded(
    source: Any,
    target: Any,
    embed_documents: Callable[[Sequence[str]], np.ndarray],
    batch_size: int,
    progress: Callable[[int], None] | None,
    action: str,
) -> int:
    """Copy every row of ``source`` into ``target`` with its document embedded anew; returns how many."""
    copied = 0
    for rows in pages(source, ["documents", "metadatas"], action, size=batch_size):
        embeddings = np.asarray(embed_documents(rows["documents"]), dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(rows["ids"]):  # the embedder's bug, refused here
            raise StoreError(f"{action} failed: {len(rows['ids'])} documents gave embeddings of shape "
                             f"{embeddings.shape}")
        with chroma_errors(action, sends_vectors=True):
            target.add(ids=rows["ids"], embeddings=embeddings, documents=rows["documents"],
                       metadatas=rows["metadatas"])
        copied += len(rows["ids"])
        if progress is not None:
            progress(len(rows["ids"]))
    return copied

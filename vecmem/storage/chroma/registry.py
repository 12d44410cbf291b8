"""The store-wide part of a Chroma store's layout: opening, creating and dropping collections, the shared
collections, and the registry (``vecmem-registry``).

The registry's metadata records the store's embedding model and dimension; its rows, one per user (id: the
user's key), say which layout the user is in, which shared collection holds them and which types they have
there (``chroma/layout.py`` says what each means). ``ChromaCollections`` adds each user's part on top.

**The claim** (``vecmem-state``): which state database (database.py) the store's writers share, by the id
its change feed made. Every process that writes to a store must announce its writes on one feed and take
its locks in one place, or another process's copies go stale and concurrent updates are lost; a process
whose state is elsewhere (a second worker with a home of its own and no ``VECMEM_DATABASE_URL``) is refused
with a message saying so, rather than let to write. ``vecmem claim`` moves a store to another state on purpose.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from vecmem.errors import ConfigError, EmbeddingMismatchError
from vecmem.storage.chroma.client import chroma_errors, create_or_existing, found_or_none
from vecmem.storage.chroma.shared import (
    REBUILD_SUFFIX,
    SHARED_HNSW,
    SHARED_PREFIX,
    USER_PREFIX,
    SharedPlace,
    collection_name,
    model_of,
    pages,
    shared_model_prefix,
    shared_name,
    user_key,
)

__all__ = ["DEDICATED_HNSW", "REINDEX_FROM", "SCHEMA_VERSION", "ChromaRegistry"]

_REGISTRY = "vecmem-registry"
_CLAIM = "vecmem-state"
REINDEX_FROM = "vecmem_reindex_from"  # registry metadata: the model a reindex is switching users away from
SCHEMA_VERSION = 3  # 1: one collection per user; 2: one per user and type; 3: small users shared
_ENTRY_PAGE = 500  # registry rows read by one Chroma call
# The HNSW index of a user's own collections (those of VECMEM_DEDICATED_AT memories or more), which a search
# walks for max(4k, 20) neighbours. Measured against the exact scan by scripts/bench_ann.py (the figures:
# docs/benchmarks.md, *Why the store is built as it is*): Chroma's defaults (ef_construction 100, max_neighbors
# 16, ef_search 100) lose recall as a collection grows, and a larger ef_search alone stops helping at 100,000
# rows, where the graph, not the search, is the limit. Built 200x32 and searched with ef_search 200, the index
# stays close to the exact scan up to 100,000 rows, better than the defaults with any ef_search tried, for
# about twice the defaults' time to add a row and 128 more bytes a row; a query costs about the same.
# ef_search 200 rather than 100: it is the least that also brings collections built before (with the defaults,
# which only ef_search can change, see ``with_dedicated_search``) close to the exact scan at 100,000, and costs
# new ones little a query.
DEDICATED_HNSW: dict[str, Any] = {"space": "cosine", "ef_construction": 200, "max_neighbors": 32, "ef_search": 200}


class ChromaRegistry:
    """A store's collections by name, its shared collections and its registry."""

    def __init__(self, client: Any, model_name: str, where: str = "") -> None:
        self.client = client
        self.model_name = model_name
        self.where = where  # the folder or server, for messages
        self._shared: dict[str, Any] = {}  # name -> shared collection
        self._lock = threading.RLock()

    # ------------------------------------------------------------------------------------------ one collection

    def get(self, name: str) -> Any | None:
        """The collection called ``name``, or None when there is none."""
        return found_or_none(lambda: self.client.get_collection(name, embedding_function=None),
                             f"reading collection {name}")

    def create(self, name: str, metadata: dict[str, Any], hnsw: dict[str, Any] = DEDICATED_HNSW) -> Any:
        """A new collection (a user's own, unless ``hnsw`` says otherwise); the existing one when another bank of
        this process (or a server client) has just made it."""
        return create_or_existing(
            lambda: self.client.create_collection(
                name, configuration={"hnsw": dict(hnsw)}, metadata=metadata,
                embedding_function=None,
            ),
            lambda: self.client.get_collection(name, embedding_function=None),
            f"creating collection {name}",
        )

    @staticmethod
    def with_dedicated_search(collection: Any) -> Any:
        """A user's own collection made before ``DEDICATED_HNSW``, its ef_search raised to that one's (unless
        higher already); returned as it was.

        Chroma keeps a collection's ef_search with it and reads it when a process first loads the index, so
        this is done as a user's collections are opened, before any search or write of this process loads
        theirs; an index already loaded elsewhere (another worker, a ``chroma run`` server) keeps its old
        ef_search until that process loads it anew. ef_construction and max_neighbors are fixed when the index
        is built: only ``vecmem reindex`` (which rebuilds each collection) gives an old one those."""
        hnsw = (collection.configuration or {}).get("hnsw") or {}
        if int(hnsw.get("ef_search") or 0) >= DEDICATED_HNSW["ef_search"]:
            return collection  # the common case: no Chroma call
        with chroma_errors(f"raising the search breadth of collection {collection.name}"):
            collection.modify(configuration={"hnsw": {"ef_search": DEDICATED_HNSW["ef_search"]}})
        return collection

    def delete(self, name: str) -> None:
        with chroma_errors(f"dropping collection {name}"):
            self.client.delete_collection(name)

    def user_metadata(self, user_id: str, dimension: int, memory_type: str, **extra: Any) -> dict[str, Any]:
        return {
            "vecmem_user": user_id,
            "vecmem_type": memory_type,
            "embed_model": self.model_name,
            "embed_dim": dimension,
            "vecmem_schema": SCHEMA_VERSION,
            **extra,
        }

    def shared_for(self, model_name: str, dimension: int, user_id: str) -> Any:
        """The shared collection of this model and dimension for the user, created when missing."""
        name = shared_name(model_name, dimension, user_id)
        with self._lock:
            if name not in self._shared:
                metadata = {"embed_model": model_name, "embed_dim": dimension, "vecmem_schema": SCHEMA_VERSION}
                self._shared[name] = (self.get(name) or self.renamed_rebuild(name)
                                      or self.create(name, metadata, SHARED_HNSW))
            return self._shared[name]

    def _shared_named(self, name: str) -> Any | None:
        with self._lock:
            if name not in self._shared:
                found = self.get(name) or self.renamed_rebuild(name)
                if found is None:
                    return None
                self._shared[name] = found
            return self._shared[name]

    def renamed_rebuild(self, name: str) -> Any | None:
        """The complete copy of a collection whose rebuild died between dropping the collection and renaming the
        copy (``-reindex``, marked ``vecmem_rebuild_complete``: chroma/repair.py), renamed into place; None when
        there is none."""
        rebuilt = self.get(name + REBUILD_SUFFIX)
        if rebuilt is None or not (rebuilt.metadata or {}).get("vecmem_rebuild_complete"):
            return None
        with chroma_errors(f"finishing the rebuild of collection {name}"):
            rebuilt.modify(name=name)
            return self.client.get_collection(name, embedding_function=None)

    @staticmethod
    def place(shared: Any, user_id: str, memory_type: str) -> SharedPlace:
        return SharedPlace(shared, user_id, memory_type, collection_name(user_id, memory_type))

    # ------------------------------------------------------------------------------------------ the registry

    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the store was built with, or None for a store that has never been written."""
        registry = self.get(_REGISTRY)
        return None if registry is None else model_of(registry.metadata)

    def record_model(self, dimension: int, *, replace: bool = False, reindex_from: str | None = None) -> None:
        """Create the registry for a new store; ``replace`` (reindex only) moves it to the current model, with
        ``reindex_from`` the model it replaces while users are being switched (``chroma/moves.py``), or
        without (the switch is over)."""
        metadata: dict[str, Any] = {"embed_model": self.model_name, "embed_dim": dimension,
                                    "vecmem_schema": SCHEMA_VERSION}
        if reindex_from is not None:
            metadata[REINDEX_FROM] = reindex_from
        with chroma_errors("recording the embedding model"):
            registry = self.client.get_or_create_collection(_REGISTRY, metadata=metadata, embedding_function=None)
            stored = registry.metadata or {}
            if stored == metadata:
                return
            if stored.get("embed_model") != self.model_name and not replace:
                raise EmbeddingMismatchError(*model_of(stored), self.model_name)
            if not replace and all(stored.get(key) == value for key, value in metadata.items()):
                return  # a write while a switch is under way keeps its mark
            registry.modify(metadata=metadata)

    def reindex_pending(self) -> str | None:
        """The model a reindex to this one is replacing, while its users are being switched; None otherwise."""
        registry = self.get(_REGISTRY)
        stored = (registry.metadata or {}) if registry is not None else {}
        if stored.get("embed_model") != self.model_name:
            return None
        return str(stored[REINDEX_FROM]) if stored.get(REINDEX_FROM) else None

    def claim(self, state_id: str, where: str, *, take_over: bool = False) -> None:
        """Record that the state ``state_id`` (at ``where``) coordinates this store, when no state does yet (or
        ``take_over``); refuse with ConfigError when another one does."""
        wanted = {"state_id": state_id, "state_where": where}
        claim = self.get(_CLAIM) or self.create(_CLAIM, wanted, SHARED_HNSW)  # metadata only: no index to speak of
        stored = claim.metadata or {}
        if stored.get("state_id") == state_id:
            if stored.get("state_where") != where:
                with chroma_errors("recording the state database"):
                    claim.modify(metadata=wanted)  # the same state, reached another way (a moved home)
            return
        if not take_over:
            raise ConfigError(
                f"the store {self.where} is shared through the state in {stored.get('state_where', '?')}, not "
                f"{where}: every process writing to one store must share its state, or they lose each other's "
                "writes. Point this one at it (the same VECMEM_HOME on this machine, or the same "
                "VECMEM_DATABASE_URL for workers; see docs/deployment.md, 'Several processes'), or run `vecmem claim` "
                "to move the store to this state for good")
        with chroma_errors("recording the state database"):
            claim.modify(metadata=wanted)

    def entry(self, user_id: str) -> dict[str, Any] | None:
        """The user's registry row (layout, shared, types), or None for a user it does not know."""
        return self.entries([user_id]).get(user_id)

    def entries(self, user_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The registry rows of these users that it knows, read a page of users at a time."""
        registry = self.get(_REGISTRY)
        found: dict[str, dict[str, Any]] = {}
        if registry is None:
            return found
        by_key = {user_key(user): user for user in user_ids}
        keys = list(by_key)
        for start in range(0, len(keys), _ENTRY_PAGE):
            with chroma_errors("reading the user registry"):
                rows = registry.get(ids=keys[start:start + _ENTRY_PAGE], include=["metadatas"])
            for key, metadata in zip(rows["ids"], rows["metadatas"], strict=True):
                if (metadata or {}).get("vecmem_user") == by_key.get(key):  # a hash collision is no entry
                    found[by_key[key]] = dict(metadata)
        return found

    def put_entry(self, user_id: str, layout: str, shared: str, types: Iterable[str]) -> None:
        """Record the user's layout. The registry exists by then (created with a user's first collection)."""
        self.put_entries([(user_id, layout, shared, types)])

    def put_entries(self, entries: Sequence[tuple[str, str, str, Iterable[str]]]) -> None:
        """Record several users' (user, layout, shared collection, types) in one write."""
        if not entries:
            return
        metadatas = [{"vecmem_user": user, "layout": layout, "shared": shared, "types": " ".join(sorted(types))}
                     for user, layout, shared, types in entries]
        with chroma_errors("writing the user registry"):
            registry = self.client.get_or_create_collection(_REGISTRY, embedding_function=None)
            registry.upsert(ids=[user_key(user) for user, *_ in entries], embeddings=[[1.0]] * len(entries),
                            metadatas=metadatas)

    def users(self) -> list[str]:
        """Every user id of the store: those in the registry and those with collections of their own."""
        found: set[str] = set()
        registry = self.get(_REGISTRY)
        if registry is not None:
            for rows in pages(registry, ["metadatas"], "listing users"):
                found.update(str(m["vecmem_user"]) for m in rows["metadatas"] if m and "vecmem_user" in m)
        with chroma_errors("listing users"):
            collections = self.client.list_collections()
        for collection in collections:
            name = collection.name
            meta = collection.metadata or {}
            if name.startswith(USER_PREFIX) and not name.endswith(REBUILD_SUFFIX) and "vecmem_user" in meta:
                found.add(str(meta["vecmem_user"]))
        return sorted(found)

    def drop_stale_shared(self, dimension: int) -> None:
        """After a reindex of every user: drop the shared collections of other models (only leftovers remain)."""
        current = shared_model_prefix(self.model_name, dimension)
        with chroma_errors("listing collections"):
            names = [c.name for c in self.client.list_collections()]
        for name in names:
            if name.startswith(SHARED_PREFIX) and not name.startswith(current):
                self.delete(name)
                with self._lock:
                    self._shared.pop(name, None)

    def drop_staging(self) -> None:
        """After a reindex: drop ``-reindex`` collections no user was switched to (their user was erased)."""
        with chroma_errors("listing collections"):
            names = [c.name for c in self.client.list_collections()]
        for name in names:
            if name.startswith(USER_PREFIX) and name.endswith(REBUILD_SUFFIX):
                self.delete(name)

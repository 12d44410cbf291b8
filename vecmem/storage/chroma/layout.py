"""Which Chroma collections hold a store's memories: their names, the registry, and the repairs and moves
made when a user is first opened.

* Two layouts (``store.py`` says why): a user below ``dedicated_at`` memories has *places* in the shared
  collection of their model (``chroma/shared.py``); a bigger one has collections of their own, one per
  memory type (``vecmem-u-<hash of user_id>-<type>``), each its own HNSW index. Both answer the same calls,
  so the store above sees {type: collection} either way.
* The registry (``vecmem-registry``, kept by ``chroma/registry.py``): its metadata records the store's
  embedding model and dimension (every user collection records them too; Chroma ignores metadata passed for an
  existing collection, so vecmem compares them itself and raises ``EmbeddingMismatchError`` on a change).
  Its rows, one per user (id: the
  user's key), say which layout the user is in (``layout``: shared, dedicated, or a move under way), which
  shared collection holds them (``shared``) and which types they have there (``types``): opening a shared
  user is one read, and ``users()`` lists everyone without scanning rows.
* Cosine space; embeddings are always supplied by vecmem (``embedding_function=None``), so Chroma's own
  default model is never loaded.
* On a user's first open: a store written before the per-type layout (one ``vecmem-u-<hash>`` collection per
  user) is split into it, the old collection dropped only once every row was copied; a reindex that died
  between dropping a collection and renaming its rebuilt copy into place left that copy complete
  (``-reindex``, marked ``vecmem_rebuild_complete``), which is renamed; a move between layouts that died
  midway is finished (``chroma/moves.py``); and a user of collections of their own who has fewer than half
  of ``dedicated_at`` memories (every user of a store written before the shared layout) is moved into the
  shared collection. The half is a margin, so a user hovering at the threshold does not move back and forth.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from vecmem.errors import EmbeddingMismatchError
from vecmem.models import MEMORY_TYPES
from vecmem.storage.chroma.client import chroma_errors
from vecmem.storage.chroma.moves import (
    move_to_dedicated,
    move_to_shared,
    rebuild_dedicated,
    rebuild_shared,
    split_legacy,
    stage_user,
    swap_in,
    switch_shared,
)
from vecmem.storage.chroma.registry import ChromaRegistry
from vecmem.storage.chroma.shared import (
    REBUILD_SUFFIX,
    USER_PREFIX,
    SharedPlace,
    collection_name,
    model_of,
    pages,
    user_key,
)
from vecmem.storage.state.changes import ChangeFeed

__all__ = ["DEDICATED_AT", "REBUILD_SUFFIX", "ChromaCollections", "collection_name", "model_of", "pages", "user_key"]

DEDICATED_AT = 500  # VECMEM_DEDICATED_AT's default (config.py): store.py says how it was chosen
_RECHECK_MISSING_S = 5.0  # without a change feed: how long a missing collection is believed missing
_MOVE_CHECK_S = 0.05  # a look at the feed for another process's move of a user this recent stands for one now


class ChromaCollections(ChromaRegistry):
    """The collections of one store: a user's looked up once and cached, created on a user's first write."""

    def __init__(self, client: Any, model_name: str, changes: ChangeFeed | None,
                 dedicated_at: int = DEDICATED_AT, where: str = "") -> None:
        super().__init__(client, model_name, where)
        self.changes, self.dedicated_at = changes, dedicated_at
        self._known: dict[str, dict[str, Any]] = {}  # user -> {type: collection or place} of those that exist
        self._resolved: dict[str, float] = {}  # user -> _moment() when its collections were last looked up
        self._sizes: dict[str, int] = {}  # shared user -> memories at most (counted, plus what was added since)
        self.writing = threading.RLock()  # held by every write and by a move, so no write lands mid-move
        self.rebuilds = 0  # how often collections were rebuilt under their names: ``forget_collections``

    # ------------------------------------------------------------------------------------------ a user's

    def typed(
        self,
        user_id: str,
        types: Iterable[str] | None = None,
        *,
        create_with_dimension: int | None = None,
        verify: bool = True,
    ) -> dict[str, Any]:
        """The user's collections (or shared places) for ``types`` (all four when None) that exist; with a
        dimension (a write), the missing ones are created. ``verify``: raise EmbeddingMismatchError for one
        built with another model."""
        wanted = MEMORY_TYPES if types is None else tuple(types)
        self._forget_if_moved([user_id])
        with self._lock:
            known = self._cached(user_id, wanted)
        if known is None:  # opening may move the user's memories: no write of this process may run meanwhile
            with self.writing, self._lock:
                known = self._cached(user_id, wanted)
                if known is None:
                    self._resolved[user_id] = self._moment()
                    known = self._open(user_id)
                    self._known[user_id] = known
        with self._lock:
            if create_with_dimension is not None:
                missing = [t for t in wanted if t not in known]
                if missing:
                    self.record_model(create_with_dimension)
                    self._add_places(user_id, known, missing, create_with_dimension)
            found = {t: known[t] for t in wanted if t in known}
        if verify:
            self._verify(found.values())
        return found

    def _verify(self, collections: Iterable[Any]) -> None:
        """Raise EmbeddingMismatchError for a collection built with another model."""
        for collection in collections:
            stored, dimension = model_of(collection.metadata)
            if stored != self.model_name:
                raise EmbeddingMismatchError(stored, dimension, self.model_name)

    def typed_many(self, wanted: Mapping[str, Iterable[str]], dimension: int, *,
                   verify: bool = True) -> dict[str, dict[str, Any]]:
        """For a write of several users: {user: every collection or place of theirs}, with the ``wanted``
        types' places made. Users not known yet are opened together (``_open_many``: one registry read and one
        collection listing for all), and the new places recorded in one registry write. ``verify``: as in
        ``typed``."""
        made: list[tuple[str, str, str, Iterable[str]]] = []
        self._forget_if_moved(list(wanted))
        with self.writing, self._lock:
            unknown = [user for user, types in wanted.items() if self._cached(user, tuple(types)) is None]
            if unknown:
                moment = self._moment()
                for user, known in self._open_many(unknown).items():
                    self._resolved[user], self._known[user] = moment, known
            for user, types in wanted.items():
                known = self._known[user]
                missing = [t for t in dict.fromkeys(types) if t not in known]
                if missing:
                    if not made:
                        self.record_model(dimension)
                    entry = self._add_places(user, known, missing, dimension, record=False)
                    if entry is not None:
                        made.append(entry)
            self.put_entries(made)
            found = {user: dict(self._known[user]) for user in wanted}
        for collections in found.values() if verify else ():
            self._verify(collections.values())
        return found

    def _forget_if_moved(self, user_ids: Sequence[str]) -> None:
        """Forget what is known of these users' layout when another process moved or reindexed them since it was
        looked up (it announced a reset): their memories are elsewhere now. A move made here updated it here.

        One operation looks a user's collections up several times, and a search reads the user's changes from
        the feed just before (the replica rebuilds on a reset, which forgets the layout here): a look at the
        feed younger than ``_MOVE_CHECK_S`` stands for one made now, as a move landing in between would be no
        different from one landing just after (the next operation sees it either way)."""
        changes = self.changes
        if changes is None:
            return
        with self._lock:
            resolved = {user: self._resolved[user] for user in user_ids
                        if user in self._known and not changes.read_recently(user, _MOVE_CHECK_S)}
        for user, moment in resolved.items():
            if changes.reset_since(user, int(moment)):
                self.refresh(user)

    def _cached(self, user_id: str, wanted: Sequence[str]) -> dict[str, Any] | None:
        """What is known of the user's collections; None when unknown, or when a missing one may exist by now
        (another bank may have created it)."""
        known = self._known.get(user_id)
        if known is not None and any(t not in known for t in wanted) and self._may_have_new(user_id):
            return None
        return known

    def _add_places(self, user_id: str, known: dict[str, Any], missing: Sequence[str], dimension: int, *,
                    record: bool = True) -> tuple[str, str, str, Iterable[str]] | None:
        """Make the user's places of the ``missing`` types: in the shared collection, unless the user has
        collections of their own (or every user is to, ``dedicated_at`` 1). The registry entry of new places
        is written (``record``) or returned for the caller to write."""
        dedicated = any(not isinstance(c, SharedPlace) for c in known.values()) or self.dedicated_at <= 1
        if dedicated:
            for new_type in missing:
                known[new_type] = self.create(collection_name(user_id, new_type),
                                              self.user_metadata(user_id, dimension, new_type))
            return None
        shared = (next(iter(known.values())).shared if known
                  else self.shared_for(self.model_name, dimension, user_id))
        for new_type in missing:
            known[new_type] = self.place(shared, user_id, new_type)
        entry = (user_id, "shared", shared.name, list(known))
        if not record:
            return entry
        self.put_entries([entry])
        return None

    def _open_many(self, user_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``_open`` for several users (called holding ``writing``): shared users straight from their registry
        rows, read together; a user with no row and no collection of their own is new (nothing to open, no
        memories: a write of 256 new users costs two Chroma reads, not nine calls each); anyone else, whose
        layout may need repairs, through ``_open``."""
        entries = self.entries(user_ids)
        owners: set[str] | None = None  # the user keys that have collections of their own, listed when needed
        opened: dict[str, dict[str, Any]] = {}
        for user in user_ids:
            entry = entries.get(user, {})
            shared = self._shared_named(str(entry["shared"])) if entry.get("layout") == "shared" else None
            if shared is not None and model_of(shared.metadata)[0] == self.model_name:
                opened[user] = {t: self.place(shared, user, t) for t in str(entry.get("types", "")).split()}
                continue
            if entry and shared is not None:
                opened[user] = self._open(user)  # of another model: a reindex may be switching users
                continue
            if not entry and owners is None:
                with chroma_errors("listing collections"):
                    owners = {c.name[:len(user_key(""))] for c in self.client.list_collections()
                              if c.name.startswith(USER_PREFIX)}
            if not entry and owners is not None and user_key(user) not in owners:
                self._sizes[user] = 0
                opened[user] = {}
            else:
                opened[user] = self._open(user)
        return opened

    def _open(self, user_id: str) -> dict[str, Any]:
        """Where the user's memories are, finishing what an interrupted move or reindex left (module docstring);
        called holding ``writing``."""
        entry = self.entry(user_id) or {}
        layout = entry.get("layout")
        types = str(entry.get("types", "")).split()
        shared = self._shared_named(str(entry["shared"])) if entry.get("shared") else None
        if layout == "shared":
            if shared is None:
                return {}
            places = {t: self.place(shared, user_id, t) for t in types}
            if model_of(shared.metadata)[0] != self.model_name and self.reindex_pending():
                places = switch_shared(self, user_id, places, (self.stored_model() or (self.model_name, 0))[1])
                self.announce_reset(user_id)
            return places
        if layout == "to-dedicated" and shared is not None:
            move_to_dedicated(self, user_id, {t: self.place(shared, user_id, t) for t in types})
        split_legacy(self, user_id)
        dedicated: dict[str, Any] = {}
        for memory_type in MEMORY_TYPES:
            name = collection_name(user_id, memory_type)
            collection = self.get(name) or self._finish_interrupted_rebuild(name)
            if collection is not None and model_of(collection.metadata)[0] != self.model_name:
                collection = self._switch_staged(user_id, memory_type, collection)
            if collection is not None:  # before anything of this process loads its index: see the method
                dedicated[memory_type] = self.with_dedicated_search(collection)
        if dedicated and self._belongs_in_shared(dedicated, moving=layout == "to-shared"):
            return move_to_shared(self, user_id, dedicated)
        if dedicated and layout != "dedicated":
            self.put_entry(user_id, "dedicated", "", dedicated)
        return dedicated

    def _belongs_in_shared(self, dedicated: dict[str, Any], *, moving: bool) -> bool:
        """Whether a user's own collections go into the shared one: a move under way is finished; otherwise
        when they hold fewer than half of ``dedicated_at`` memories and all record one model."""
        if moving:
            return True
        if len({model_of(c.metadata) for c in dedicated.values()}) != 1:
            return False  # a reindex is half done: ``vecmem reindex`` finishes it first
        with chroma_errors("counting memories"):
            total = sum(int(c.count()) for c in dedicated.values())
        return total < self.dedicated_at // 2

    def after_write(self, user_id: str, written: int) -> None:
        """Count what a write added to a shared user; past ``dedicated_at``, move them to collections of their
        own. Done within the write (under ``writing``): see ``store.py`` for why not in the background."""
        with self._lock:
            known = self._known.get(user_id) or {}
            places = {t: c for t, c in known.items() if isinstance(c, SharedPlace)}
            if not places or len(places) != len(known):
                return
            size = self._sizes.get(user_id)
            size = self._count(places) if size is None else size + written
            if size >= self.dedicated_at:
                size = self._count(places)  # replaced memories were counted twice
            self._sizes[user_id] = size
            if size < self.dedicated_at:
                return
            self._known[user_id] = move_to_dedicated(self, user_id, places)
            self._sizes.pop(user_id, None)

    def collections_of(self, user_ids: Sequence[str]) -> list[Any]:
        """The Chroma collections that hold these users' memories, looked up by name without opening the
        users (which reads them: a torn collection fails that, chroma/repair.py)."""
        names: dict[str, None] = {}
        for user in user_ids:
            shared = (self.entry(user) or {}).get("shared")
            if shared:
                names[str(shared)] = None
            names.update(dict.fromkeys(collection_name(user, t) for t in MEMORY_TYPES))
        return [found for name in names if (found := self.get(name)) is not None]

    def forget_collections(self) -> None:
        """Forget every collection looked up (one was rebuilt under its name: chroma/repair.py)."""
        with self._lock:
            self.rebuilds += 1
            self._known.clear()
            self._sizes.clear()
            self._shared.clear()

    @staticmethod
    def _count(places: dict[str, SharedPlace]) -> int:
        with chroma_errors("counting memories"):
            return sum(place.count() for place in places.values())

    def refresh(self, user_id: str) -> None:
        """Forget which collections of the user exist (another bank or server client may have made one since)."""
        with self._lock:
            self._known.pop(user_id, None)
            self._sizes.pop(user_id, None)

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

    def _finish_interrupted_rebuild(self, name: str) -> Any | None:
        """A reindex that died between dropping the old collection and renaming the new one left it complete."""
        rebuilt = self.get(name + REBUILD_SUFFIX)
        if rebuilt is None or not (rebuilt.metadata or {}).get("vecmem_rebuild_complete"):
            return None
        with chroma_errors("finishing an interrupted reindex"):
            rebuilt.modify(name=name)
            return self.client.get_collection(name, embedding_function=None)

    def _switch_staged(self, user_id: str, memory_type: str, collection: Any) -> Any:
        """A collection of another model, while a reindex to this one is switching users: its complete staging
        copy swapped in (``chroma/moves.py``); otherwise the collection as it is."""
        staged = self.get(collection.name + REBUILD_SUFFIX)
        if (staged is None or model_of(staged.metadata)[0] != self.model_name
                or not (staged.metadata or {}).get("vecmem_rebuild_complete") or not self.reindex_pending()):
            return collection
        swapped = swap_in(self, user_id, memory_type, staged)
        self.announce_reset(user_id)
        return swapped

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
        """Re-embed every memory of a user (``chroma/moves.py``): in place for the same model, staged beside
        the old ones for another; returns how many memories the user has."""
        current = self.typed(user_id, verify=False)
        if any(model_of(c.metadata)[0] != self.model_name for c in current.values()):
            stage_user(self, user_id, current, embed_documents, dimension, batch_size=batch_size, progress=progress)
            with chroma_errors("counting memories"):
                return sum(int(c.count()) for c in current.values())
        if current and self.reindex_pending():  # switched already by the reindex this one finishes
            with chroma_errors("counting memories"):
                done = sum(int(c.count()) for c in current.values())
            if progress is not None and done:
                progress(done)
            return done
        places = {t: c for t, c in current.items() if isinstance(c, SharedPlace)}
        if places:
            return rebuild_shared(self, user_id, places, embed_documents, dimension, batch_size=batch_size,
                                  progress=progress)
        return rebuild_dedicated(self, user_id, current, embed_documents, dimension, batch_size=batch_size,
                                 progress=progress)

    def finish_rebuild(self, dimension: int) -> None:
        """After every user is staged: record the new model (marked as switching), switch every user, drop
        what the old model used, and clear the mark (``chroma/moves.py``)."""
        stored = self.stored_model()
        if stored is not None and stored[0] != self.model_name:
            self.record_model(dimension, replace=True, reindex_from=stored[0])
        if self.reindex_pending():
            for user in self.users():
                self.refresh(user)
                self.typed(user, verify=False)  # opening a user of the old model switches them
        self.drop_stale_shared(dimension)
        self.drop_staging()
        self.record_model(dimension, replace=True)

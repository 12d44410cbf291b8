"""Where a bank's store and state come from when it is given none, and the order its parts are let go in.

Chroma on ``VECMEM_CHROMA_URL`` (a server, which several processes and machines may write to), or embedded in
``VECMEM_HOME`` (then with the process lock: one process per embedded store, storage/state/lock.py). Either way the
change feed lives in the state database (storage/state/database.py: VECMEM_HOME's files, or the PostgreSQL database
of ``VECMEM_DATABASE_URL``), every writer announces its writes there so each process's copies stay exact, and
the store records which state that is (its *claim*), so a process with its state elsewhere is refused instead
of silently writing past the others. Each part is registered on the caller's ``ExitStack`` as soon as it is
taken, so a failure half-way (a model mismatch, an unreadable file) releases what was taken, newest first,
and leaves the lock free.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack

import numpy as np

from vecmem.config import Settings
from vecmem.retrieval.index.persisted import SavedReplica, replica_path
from vecmem.storage.base import MemoryStore
from vecmem.storage.chroma.segments import disarm_torn_segments
from vecmem.storage.chroma.store import ChromaStore
from vecmem.storage.state.access import AccessStats
from vecmem.storage.state.backend import state_database, write_locks
from vecmem.storage.state.changes import ChangeFeed
from vecmem.storage.state.database import WriteLocks
from vecmem.storage.state.lock import StoreLock

__all__ = ["claim_store", "closing_last", "mend_with", "open_saved", "open_state", "open_store", "say_how_to_move"]

log = logging.getLogger("vecmem")
_moves_said: set[tuple[str, str]] = set()


def say_how_to_move(stored: str, default: str) -> None:
    """Once a process: a store built with another model than today's default keeps its model, and how to move."""
    if (stored, default) not in _moves_said:
        _moves_said.add((stored, default))
        log.warning("vecmem: this store was built with %s and keeps using it; `vecmem reindex` moves it to %s, "
                    "the default model, which reads Chinese and English", stored, default)


def open_store(settings: Settings, model_name: str, acquired: ExitStack, *, take_over: bool = False,
               adopt_stored_model: bool = False) -> MemoryStore:
    """The configured Chroma store for embedding model ``model_name``, each part registered on ``acquired``.
    ``take_over``: claim the store for this state even when another state claimed it (``vecmem claim``);
    ``adopt_stored_model``: a store that records a model is opened for that one (its ``model_name``)."""
    if not settings.chroma_url:
        lock = StoreLock(settings.home)
        acquired.callback(lock.release)
        if lock.taken:  # nothing writes the store's files now: before Chroma loads a segment a kill tore
            disarm_torn_segments(settings.home / "chroma")
    changes = ChangeFeed(state_database(settings, "changes.sqlite3", "change feed"))
    acquired.callback(changes.close)
    if settings.chroma_url:
        opened = ChromaStore(model_name=model_name, url=settings.chroma_url, database=settings.chroma_database,
                             changes=changes, dedicated_at=settings.dedicated_at, adopt_stored_model=adopt_stored_model)
    else:
        opened = ChromaStore(model_name=model_name, path=settings.home / "chroma", changes=changes,
                             dedicated_at=settings.dedicated_at, adopt_stored_model=adopt_stored_model)
    acquired.callback(opened.close)
    opened.claim(take_over=take_over)
    return opened


def open_saved(settings: Settings, model_name: str, user: str) -> SavedReplica | None:
    """The user's saved replica as a store that answers searches without Chroma (retrieval/index/persisted.py), or
    None: a Chroma server, no file, or one that does not hold all the store holds of the user. Takes no lock: it
    only reads, and what it reads is the store as of the feed's row it checked."""
    if settings.chroma_url or not replica_path(settings.home / "replicas", user).exists():
        return None
    changes = ChangeFeed(state_database(settings, "changes.sqlite3", "change feed"))
    try:
        saved = SavedReplica.trusted(settings.home, settings.home / "chroma", model_name, changes, user)
    except BaseException:
        changes.close()
        raise
    if saved is None:
        changes.close()
    return saved


def mend_with(store: MemoryStore, model_name: str, embed_documents: Callable[[Sequence[str]], np.ndarray]) -> None:
    """Let an embedded Chroma store rebuild a collection of this model whose HNSW segment a kill tore, embedding
    its memories anew (storage/chroma/repair.py); other stores have nothing to rebuild."""
    if isinstance(store, ChromaStore):
        store.mend_with(model_name, embed_documents)


def open_state(settings: Settings, acquired: ExitStack) -> tuple[AccessStats, WriteLocks]:
    """The access statistics and the users' write locks of the configured state, each registered on ``acquired``."""
    access = AccessStats(state_database(settings, "access.sqlite3", "access statistics"))
    acquired.callback(access.close)
    locks = write_locks(settings)
    acquired.callback(locks.close)
    return access, locks


def claim_store(settings: Settings, model_name: str) -> str:
    """Make the configured state the one the configured store is shared through, whatever claimed it before
    (``vecmem claim``); returns where that state is."""
    with ExitStack() as acquired:
        store = open_store(settings, model_name, acquired, take_over=True)
        assert store.changes is not None, "a Chroma store opened here always has its change feed"
        return store.changes.where


def closing_last(release: ExitStack, store: MemoryStore) -> ExitStack:
    """``release``, then a store the caller gave and its change feed: closed after everything that uses them."""
    stack = ExitStack()
    if store.changes is not None:
        stack.callback(store.changes.close)
    stack.callback(store.close)
    stack.push(release)
    return stack

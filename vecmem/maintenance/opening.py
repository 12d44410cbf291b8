"""Where a bank's store comes from when it is given none, and the order its parts are let go in.

Chroma on ``VECMEM_CHROMA_URL`` (a server: other clients' writes are seen through the count check), or
embedded in ``VECMEM_HOME``: then with the process lock (one process per embedded store, storage/lock.py) and the
change feed the banks of this process announce their writes on, so each other's copies stay exact. Each part
is registered on the caller's ``ExitStack`` as soon as it is taken, so a failure half-way (a model mismatch, an
unreadable file) releases what was taken, newest first, and leaves the lock free.
"""

from __future__ import annotations

from contextlib import ExitStack

from vecmem.config import Settings
from vecmem.storage.base import MemoryStore
from vecmem.storage.changes import ChangeFeed
from vecmem.storage.chroma import ChromaStore
from vecmem.storage.lock import StoreLock

__all__ = ["closing_last", "open_store"]


def open_store(settings: Settings, model_name: str, acquired: ExitStack) -> MemoryStore:
    """The configured Chroma store for embedding model ``model_name``, each part registered on ``acquired``."""
    if settings.chroma_url:
        opened = ChromaStore(model_name=model_name, url=settings.chroma_url, database=settings.chroma_database,
                             dedicated_at=settings.dedicated_at)
    else:
        lock = StoreLock(settings.home)
        acquired.callback(lock.release)
        changes = ChangeFeed(settings.home / "changes.sqlite3")
        acquired.callback(changes.close)
        opened = ChromaStore(model_name=model_name, path=settings.home / "chroma", changes=changes,
                             dedicated_at=settings.dedicated_at)
    acquired.callback(opened.close)
    return opened


def closing_last(release: ExitStack, store: MemoryStore) -> ExitStack:
    """``release``, then a store the caller gave and its change feed: closed after everything that uses them."""
    stack = ExitStack()
    if store.changes is not None:
        stack.callback(store.changes.close)
    stack.callback(store.close)
    stack.push(release)
    return stack

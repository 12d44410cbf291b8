"""``vecmem stats``: what a store holds, counted by type, scope and status (a full scan of the users asked for)."""

from __future__ import annotations

from vecmem.models import GLOBAL_SCOPE, MEMORY_TYPES, MemoryFilter, StoreStats
from vecmem.storage.base import MemoryStore

__all__ = ["store_stats"]


def store_stats(store: MemoryStore, user_id: str | None, configured_model: str) -> StoreStats:
    """Counts for one (validated) user, or for the whole store when ``user_id`` is None. A store never written
    reports the ``configured_model`` it will be built with, and dimension 0."""
    every_user = store.users()
    users = every_user if user_id is None else [user_id]
    by_type: dict[str, int] = dict.fromkeys(MEMORY_TYPES, 0)
    by_scope: dict[str, int] = {}
    count = superseded = archived = pending = live = 0
    every = MemoryFilter(all_sessions=True, include_superseded=True, statuses=None)
    for user in users:
        for record in store.scan(user, every):
            count += 1
            superseded += record.superseded
            archived += record.status == "archived"
            pending += record.status == "pending"
            live += record.retrievable
            by_type[record.type] += 1
            scope = GLOBAL_SCOPE if record.scope == GLOBAL_SCOPE else "session"
            by_scope[scope] = by_scope.get(scope, 0) + 1
    stored = store.stored_model()
    return StoreStats(
        user_id=user_id,
        count=count,
        live=live,
        superseded=superseded,
        by_type=by_type,
        by_scope=by_scope,
        users=tuple(every_user),
        embed_model=stored[0] if stored else configured_model,
        embed_dim=stored[1] if stored else 0,
        location=store.location,
        archived=archived,
        pending=pending,
    )

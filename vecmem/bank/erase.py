"""``MemoryBank.forget_all``: every memory of a user, or of one of the user's sessions, deleted for good.

What goes: each memory whatever its state (live, superseded, archived, pending review), the earlier versions
its edits kept (revisions live in the same scope as their memory), its access statistics and the retriever's
in-memory copies (every delete goes through the store, the access table and ``Retriever.on_forgotten``, as
``WritePath.delete`` does, a chunk at a time). For a whole user the store's raw rows are read rather than
parsed records, so a row too damaged to read is deleted too, and so are access statistics left from memories
already gone: nothing of the user is kept.

Per session, only memories whose scope is that session go, with their revisions wherever those are: a move of
scope (edits.py) takes them along, but a crash half-way through one can leave them in the other scope, and a
revision is never made live, as a memory outside the session would be. A memory outside it is never left
pointing at a deleted one: one replaced by a memory of the session (which the scope rule forbids for global
memories, but an old store may hold) is handed to the first successor that survives and may replace it, or is
live again; the links are rewritten before anything is deleted, so a crash half-way leaves a store whose links
hold, and erasing again finishes.

Callers hold the bank's write lock.
"""

from __future__ import annotations

from vecmem.bank import chains
from vecmem.bank.writes import WritePath
from vecmem.models import MemoryFilter, MemoryRecord

__all__ = ["CHUNK", "erase"]

CHUNK = 500  # ids per store call: well inside Chroma's batch limit and SQLite's variable limit

_EVERYTHING = MemoryFilter(all_sessions=True, include_superseded=True, statuses=None)


def erase(writes: WritePath, user: str, session: str | None = None) -> int:
    """Delete every memory of ``user`` (``session`` None) or of that session's scope; returns how many."""
    store = writes.store
    if session is None:
        ids = list(dict.fromkeys(row_id for _kind, row_id, _document, _metadata in store.raw_rows(user)))
        stored = set(ids)
        writes.access.forget(user, [memory_id for memory_id in writes.access.lookup_all(user)
                                    if memory_id not in stored])
    else:
        every = {record.id: record for record in store.scan(user, _EVERYTHING)}
        doomed = {memory_id for memory_id, record in every.items() if record.scope == session}
        ids = [memory_id for memory_id, record in every.items() if memory_id in doomed
               or (chains.revision_number(record) is not None and record.superseded_by in doomed)]
        writes.rewrite_fields(user, _relinked(every, set(ids)))
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        store.delete(user, chunk)
        writes.access.forget(user, chunk)
        writes.retriever.on_forgotten(user, chunk)
    return len(ids)


def _relinked(every: dict[str, MemoryRecord], doomed: set[str]) -> list[MemoryRecord]:
    """The memories that stay but point at one that goes, each pointing at its first surviving successor that is
    seen wherever it is (no cycle back to it), or live again."""
    changed = []
    for record in every.values():
        if record.id in doomed or record.superseded_by not in doomed:
            continue
        heir = next((every[later] for later in chains.successors(record, every.get)
                     if later not in doomed and later in every), None)
        if heir is not None and (not chains.seen_wherever(record, heir)
                                 or record.id in chains.successors(heir, every.get)):
            heir = None
        changed.append(record.with_changes(superseded_by=None if heir is None else heir.id))
    return changed

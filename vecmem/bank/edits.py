"""Edits that keep a memory's id and its past: ``update``, the review queue's correction, and what follows from
them for ``forget`` and ``restore``.

An id is fixed when a memory is created and never follows its content afterwards: the chat, the panel and other
programs hold on to it. So an edit rewrites the memory in place, and what it said before is kept as a
*revision* (chains.revision: ``<id>@v<n>``, superseded by the memory, created at the time of the edit), written
before the memory changes, so a crash between leaves a harmless duplicate in the history rather than a lost
version. ``history`` then shows every earlier version, each with when the edit replaced it; ``restore`` of a
revision makes the memory say that again (itself an edit, so undoable); ``forget`` deletes the memory's
revisions with it, since forgetting is for good. Revisions live in the scope of their memory: moving a memory
to another scope (an edit of ``scope``) moves them with it.

Callers hold the bank's write lock; every write goes through ``WritePath``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from vecmem.bank import chains
from vecmem.bank.writes import WritePath
from vecmem.errors import ConflictError
from vecmem.models import MemoryRecord

__all__ = ["EDITABLE", "at_version", "edit", "forget", "restore", "revert"]

# what a memory says: what a revision keeps and reverting to it brings back; update() may change its scope too
EDITABLE = ("content", "type", "importance", "tags", "confidence", "context")


def at_version(record: MemoryRecord, expected_version: int | None) -> MemoryRecord:
    """``record`` (as stored, read under the user's write lock), or ConflictError when the caller built its change
    on another version of it (``None``: the caller applies its fields to whatever is stored)."""
    if expected_version is not None and record.version != expected_version:
        raise ConflictError("version", f"memory {record.id} is at version {record.version}, not {expected_version}: "
                            "it changed since it was read; read it again and apply the change to what it says "
                            "now", current_version=record.version)
    return record


def edit(writes: WritePath, record: MemoryRecord, changes: Mapping[str, object], edited_at: datetime, *,
         keep_history: bool = True) -> MemoryRecord:
    """``record`` with ``changes`` applied and stored, keeping its id. When what it says changed (and
    ``keep_history``), what it said before is stored first as its next revision. A new ``scope`` moves it with its
    revisions (chains.moving, refused when a supersession link would break the scope rule); where a memory is
    seen is not what it says, so a move alone keeps no revision. The memory is written last: a crash half-way
    leaves it as it was, and the same edit again finishes. Returns the changed memory."""
    updated = record.with_changes(**changes)  # validated before anything is written
    if updated == record:
        return record
    moved: list[MemoryRecord] = []
    if updated.scope != record.scope:
        moved = chains.moving(record, updated.scope, writes.store.replaced_by(record.user_id, record.id),
                              chains.reader(writes.store, record.user_id))[1:]
    said = {name: value for name, value in changes.items() if name != "scope"}
    if keep_history and record.with_changes(**said) != record:
        earlier = chains.revision(record, _next_revision(writes, record), edited_at)
        writes.write([earlier.with_changes(scope=updated.scope)], new=True)
    if moved:
        writes.rewrite_fields(record.user_id, moved)
    return writes.update(record, changes)


def forget(writes: WritePath, record: MemoryRecord) -> None:
    """Delete ``record`` for good, with its revisions; what it had replaced is not left replaced by nothing
    (chains.unlinking). Revisions go first and the memory last, so a crash half-way leaves it stored, and
    forgetting it again finishes."""
    store = writes.store
    replaced = store.replaced_by(record.user_id, record.id)
    for earlier in replaced:
        if chains.revision_number(earlier) is not None and earlier.superseded_by == record.id:
            writes.delete(earlier)
    writes.rewrite_fields(record.user_id, chains.unlinking(record, replaced, chains.reader(store, record.user_id)))
    writes.delete(record)


def revert(writes: WritePath, revision: MemoryRecord, edited_at: datetime) -> MemoryRecord:
    """Make the memory ``revision`` is a version of say what the revision says (content, type, importance,
    tags, confidence, context): an edit like any other, so what it said until now becomes a revision in turn.
    Returns the memory, under its own id."""
    current = chains.reader(writes.store, revision.user_id)(revision.superseded_by or "")
    if current is None:  # a damaged store: the doctor clears such links
        raise ConflictError("id", f"{revision.id} is a version of {revision.superseded_by}, which is not stored")
    return edit(writes, current, {name: getattr(revision, name) for name in EDITABLE}, edited_at)


def restore(writes: WritePath, record: MemoryRecord, edited_at: datetime) -> MemoryRecord:
    """Undo ``record``'s supersession (chains.restoration) and return it live; a revision is restored by
    ``revert`` instead, and the memory it reverted is returned."""
    if chains.revision_number(record) is not None:
        return revert(writes, record, edited_at)
    changed = chains.restoration(record, chains.reader(writes.store, record.user_id))
    return writes.rewrite_fields(record.user_id, changed)[0]


def _next_revision(writes: WritePath, record: MemoryRecord) -> int:
    """One more than the highest revision number ``record`` has, skipping an id that is somehow taken."""
    numbers = [chains.revision_number(r) or 0 for r in writes.store.replaced_by(record.user_id, record.id)]
    number = max(numbers, default=0) + 1
    while writes.store.get(record.user_id, [chains.revision_id(record.id, number)]):
        number += 1
    return number

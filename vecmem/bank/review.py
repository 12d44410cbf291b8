"""A memory's status and the moves between them (the rules are hygiene.py's; this is the bookkeeping).

    pending --approve--> live <--unarchive-- archived <--prune (hygiene.plan)-- live
    pending --reject--> deleted

Only ``live`` memories are retrieved. A move is allowed from one status only: approving a memory that is not
pending, or unarchiving one that is not archived, is the caller's mistake and is refused, so a command run
twice (or on the wrong id) says so instead of quietly changing something else.
"""

from __future__ import annotations

from datetime import datetime

from vecmem.bank import edits
from vecmem.bank.writes import WritePath
from vecmem.errors import ConflictError
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.storage.base import MemoryStore
from vecmem.storage.state.access import AccessStats

__all__ = ["approve", "move", "moved", "pending", "reject", "require_status"]


def require_status(record: MemoryRecord, status: str) -> MemoryRecord:
    """``record`` itself when it has ``status``; ConflictError naming both statuses when not."""
    if record.status != status:
        raise ConflictError("id", f"{record.id} is {record.status}, not {status}")
    return record


def moved(record: MemoryRecord, *, frm: str, to: str) -> MemoryRecord:
    """``record`` moved from status ``frm`` to ``to`` (refused when it is not ``frm``); the caller writes it."""
    return require_status(record, frm).with_changes(status=to)


def move(writes: WritePath, record: MemoryRecord, *, frm: str, to: str) -> MemoryRecord:
    """Move ``record`` from status ``frm`` to ``to`` and store it through ``writes``; returns it moved."""
    changed = moved(record, frm=frm, to=to)
    return writes.rewrite_fields(changed.user_id, [changed])[0]


def approve(writes: WritePath, record: MemoryRecord, content: str | None, edited_at: datetime) -> MemoryRecord:
    """Let a pending memory into retrieval; ``content`` corrects it first, by an edit like update's, while it is
    still pending (so a refused correction leaves it in the queue). Returns it live."""
    require_status(record, "pending")
    if content is not None:
        record = edits.edit(writes, record, {"content": content}, edited_at)
    return move(writes, record, frm="pending", to="live")


def reject(writes: WritePath, record: MemoryRecord) -> MemoryRecord:
    """Delete a pending memory for good (refused for any other status); returns what was deleted."""
    writes.delete(require_status(record, "pending"))
    return record


def pending(store: MemoryStore, access: AccessStats, user_id: str) -> list[MemoryRecord]:
    """The user's memories waiting for approval, oldest first, with their access statistics."""
    records = store.scan(user_id, MemoryFilter(all_sessions=True, statuses=frozenset({"pending"})))
    return access.apply(sorted(records, key=lambda r: (r.created_at, r.id)))

"""The supersession graph: which memory replaced which, as pure functions over records.

A memory superseded by another (``superseded_by``) is kept for history and never retrieved again; following
the links from any memory ends at the live one that replaced them all. The bank's ``supersede``, ``history``
and ``restore`` and the doctor's cycle check all reason over these links; here they do so without writing
anything: each function says what to change, the caller writes it (so the bank keeps one write path).

A memory is replaced only by one that is seen wherever it is (``seen_wherever``): a global memory by a global
one, a session's memory by a global one or one of the same session. Anything else would hide the older memory
from places the newer one never reaches (a session's note replacing a global fact for every other session).

Links are read through ``Read`` (one user's memory by id, None when it is not stored), so a caller chooses
where records come from: the store (``reader``) or records already in hand (the doctor's ``dict.get``).

An edit keeps a memory's id and records what it said before as a *revision* (edits.py): a copy with the id
``<id>@v<n>``, superseded by the memory it is a version of, created when the edit replaced it. So the history
of a memory holds its earlier versions beside the memories it replaced, with the same links and tools; a
revision is never retrieved, is forgotten with its memory, and restoring one reverts the memory to it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from vecmem.errors import ConflictError
from vecmem.models import GLOBAL_SCOPE, MemoryRecord
from vecmem.validation import MAX_IDENTIFIER_CHARS

if TYPE_CHECKING:  # resolving.py's AddResult, which a command through an owner reads, needs no store (nor numpy)
    from vecmem.storage.base import MemoryStore

__all__ = ["Read", "history", "moving", "reader", "replaced_first", "restoration", "revision", "revision_id",
           "revision_number", "seen_wherever", "successors", "superseding", "unlinking", "version_dates"]

Read = Callable[[str], MemoryRecord | None]
_REVISION = re.compile(r"@v([1-9][0-9]{0,8})")  # the suffix of a revision's id (ASCII digits only)


def reader(store: MemoryStore, user_id: str) -> Read:
    """Read one of ``user_id``'s memories from the store by id."""

    def read(memory_id: str) -> MemoryRecord | None:
        return store.get(user_id, [memory_id]).get(memory_id)

    return read


def revision_id(memory_id: str, number: int) -> str:
    """The id of the ``number``-th earlier version of ``memory_id``: ``<id>@v<number>`` (``@`` is in every new
    id's alphabet, so routes can name it), or for an id too long to take the suffix a digest of it instead."""
    suffix = f"@v{number}"
    if len(memory_id) + len(suffix) <= MAX_IDENTIFIER_CHARS:
        return memory_id + suffix
    return "r-" + hashlib.sha256(memory_id.encode("utf-8", "surrogatepass")).hexdigest()[:20] + suffix


def revision_number(record: MemoryRecord) -> int | None:
    """Which earlier version of the memory that replaced it ``record`` is (1 the first), or None when it is not
    a revision. Decided by the id and the link together, so an unrelated memory is never taken for one."""
    if record.superseded_by is None:
        return None
    found = _REVISION.search(record.id)
    if found is None or found.end() != len(record.id):
        return None
    number = int(found.group(1))
    return number if revision_id(record.superseded_by, number) == record.id else None


def revision(previous: MemoryRecord, number: int, edited_at: datetime) -> MemoryRecord:
    """What ``previous`` said, kept as its ``number``-th revision by an edit at ``edited_at``: its created_at is
    when the edit replaced it (when it stopped being current), it starts unused, and it is superseded by the
    memory, so it is in the memory's history and never retrieved. Live, whatever status the memory had: a
    pending memory's revision must not wait in the review queue beside it."""
    return previous.with_changes(id=revision_id(previous.id, number), superseded_by=previous.id,
                                 created_at=edited_at, last_accessed=None, access_count=0, status="live")


def successors(record: MemoryRecord, read: Read) -> list[str]:
    """Ids along ``superseded_by`` links from ``record``, nearest first; stops at a dangling link or a loop
    (a damaged store can hold either; the doctor repairs them)."""
    chain: list[str] = []
    current: MemoryRecord | None = record
    while current is not None and current.superseded_by and current.superseded_by not in chain:
        chain.append(current.superseded_by)
        current = read(current.superseded_by)
    return chain


def seen_wherever(older: MemoryRecord, newer: MemoryRecord) -> bool:
    """Whether ``newer`` is visible everywhere ``older`` is, so it may replace it: global <- global,
    session S <- global and session S <- session S are; global <- session and S <- another session T are not."""
    return newer.scope in (GLOBAL_SCOPE, older.scope)


def _where(record: MemoryRecord) -> str:
    return "global" if record.session_id is None else f"of session {record.session_id!r}"


def superseding(old: MemoryRecord, newer: MemoryRecord, read: Read) -> MemoryRecord:
    """``old`` marked as replaced by ``newer``; refused when that would link a memory to itself, directly or
    around a cycle (``newer`` already leads back to ``old``), or when ``newer`` is not seen wherever ``old`` is."""
    if old.id == newer.id:
        raise ConflictError("superseded_by", "a memory cannot supersede itself")
    if not seen_wherever(old, newer):
        raise ConflictError(
            "superseded_by",
            f"{newer.id} ({_where(newer)}) cannot replace {old.id} ({_where(old)}): a memory is replaced only by a "
            "global one or one of its own session, which is seen everywhere it is",
        )
    if old.id in successors(newer, read):
        raise ConflictError("superseded_by", f"{newer.id} is already replaced by {old.id}; that would be a cycle")
    return old.with_changes(superseded_by=newer.id)


def moving(record: MemoryRecord, scope: str, replaced: Sequence[MemoryRecord], read: Read) -> list[MemoryRecord]:
    """What moving ``record`` to ``scope`` ("global" or a session) changes: the memory and its revisions, which
    live in the scope of their memory (erase.py), all in ``scope``; ``replaced``: the memories whose superseded_by
    is ``record``. Refused (ConflictError on ``scope``) when a supersession link would break the rule above: the
    memory that replaced ``record`` must still be seen wherever it is, and it must still be seen wherever each
    memory it replaced is. Undo the supersession first (restore), or move the other memory too."""
    moved = record.with_changes(scope=scope)
    successor = read(record.superseded_by) if record.superseded_by else None
    if successor is not None and not seen_wherever(moved, successor):
        raise ConflictError("scope", f"{record.id} cannot move to {_where(moved)}: {successor.id} ({_where(successor)}), "
                            "which replaced it, would not be seen wherever it is")
    revisions = [old for old in replaced if old.superseded_by == record.id and revision_number(old) is not None]
    for old in replaced:
        if old.superseded_by == record.id and revision_number(old) is None and not seen_wherever(old, moved):
            raise ConflictError("scope", f"{record.id} cannot move to {_where(moved)}: it replaced {old.id} "
                                f"({_where(old)}), which must be replaced by a memory seen wherever it is")
    return [moved, *(old.with_changes(scope=scope) for old in revisions if old.scope != scope)]


def restoration(record: MemoryRecord, read: Read) -> list[MemoryRecord]:
    """What undoing ``record``'s supersession changes, the restored memory first: it is live again, and the
    live memory at the end of its chain is now superseded by it, so one memory of the chain stays live. When
    ``record`` is not seen wherever that head is (a session's memory, a global head) the head stays live too:
    it still answers where ``record`` cannot be seen."""
    if not record.superseded:
        raise ConflictError("id", f"{record.id} is not superseded; there is nothing to restore")
    chain = successors(record, read)
    head = read(chain[-1]) if chain else None
    changed = [record.with_changes(superseded_by=None)]
    if head is not None and not head.superseded and head.id != record.id and seen_wherever(head, record):
        changed.append(head.with_changes(superseded_by=record.id))
    return changed


def unlinking(record: MemoryRecord, replaced: Sequence[MemoryRecord], read: Read) -> list[MemoryRecord]:
    """What forgetting ``record`` changes in the memories it replaced (``replaced``: those whose superseded_by
    is ``record``), so none is left pointing at a memory that no longer exists: each is now replaced by
    ``record``'s own successor when it has one that may replace it (stored, seen wherever it is, no cycle),
    or is live again. ``record``'s own revisions are left out: they are deleted with it (edits.forget), never
    made live."""
    successor = read(record.superseded_by) if record.superseded_by else None
    changed: list[MemoryRecord] = []
    for old in replaced:
        if old.id == record.id or old.superseded_by != record.id or revision_number(old) is not None:
            continue
        heir = successor
        if heir is not None and (heir.id == old.id or not seen_wherever(old, heir)
                                 or old.id in successors(heir, read)):
            heir = None
        changed.append(old.with_changes(superseded_by=None if heir is None else heir.id))
    return changed


def history(start: MemoryRecord, store: MemoryStore) -> list[MemoryRecord]:
    """Every memory linked to ``start`` by supersession, in either direction, ordered by ``replaced_first``."""
    seen: dict[str, MemoryRecord] = {start.id: start}
    frontier = [start]
    while frontier:
        record = frontier.pop()
        linked = store.replaced_by(record.user_id, record.id)
        if record.superseded_by:
            linked += list(store.get(record.user_id, [record.superseded_by]).values())
        for other in linked:
            if other.id not in seen:
                seen[other.id] = other
                frontier.append(other)
    return replaced_first(seen)


def version_dates(records: Iterable[MemoryRecord]) -> dict[str, datetime]:
    """When each memory of a history began to say what it says, by id. An edit keeps the memory's created_at and
    dates the revision it keeps at the edit, when that version stopped being current (``revision``); so a memory
    with no revisions began when it was created, its first version did too, and each later version (the memory
    itself last) began when the edit before it was made."""
    records = list(records)
    dates = {record.id: record.created_at for record in records}
    revisions: dict[str, list[tuple[int, MemoryRecord]]] = {}
    for record in records:
        number = revision_number(record)
        if number is not None and record.superseded_by is not None:
            revisions.setdefault(record.superseded_by, []).append((number, record))
    for memory_id, versions in revisions.items():
        versions.sort(key=lambda numbered: numbered[0])
        began = dates.get(memory_id, versions[0][1].created_at)
        for _number, version in versions:
            dates[version.id], began = began, version.created_at
        if memory_id in dates:
            dates[memory_id] = began
    return dates


def replaced_first(records: Mapping[str, MemoryRecord]) -> list[MemoryRecord]:
    """Order a supersession chain oldest first: each memory precedes the one that replaced it, and of those free
    to come next the version that began earliest (``version_dates``; an edit's earlier versions before the
    memory) comes first; the live memory, replaced by none, comes last."""
    dates = version_dates(records.values())

    def oldest_first(record: MemoryRecord) -> tuple[datetime, int, str]:
        return dates[record.id], revision_number(record) or 0, record.id

    waiting = dict.fromkeys(records, 0)
    for record in records.values():
        if record.superseded_by in waiting:
            waiting[record.superseded_by] += 1
    ready = sorted((r for r in records.values() if waiting[r.id] == 0), key=oldest_first)
    ordered: list[MemoryRecord] = []
    while ready:
        record = ready.pop(0)
        ordered.append(record)
        successor = record.superseded_by
        if successor is not None and successor in waiting:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                ready.append(records[successor])
                ready.sort(key=oldest_first)
    placed = {r.id for r in ordered}
    leftover = [r for r in records.values() if r.id not in placed]  # only a corrupt, cyclic chain leaves any
    return ordered + sorted(leftover, key=oldest_first)

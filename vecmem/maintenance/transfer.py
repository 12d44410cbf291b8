"""Memories in and out in bulk: the JSON Lines of ``vecmem export``/``import``, and the batched write pipeline
that imports (and ``MemoryBank.add_records``) go through.

The id of a memory given without one is derived from its content (``content_id``), so importing the same file
twice adds nothing the second time. The pipeline embeds the next batch while the current one is written:
embedding and Chroma's writes overlap on two cores.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import datetime

import numpy as np

from vecmem.bank.writes import WritePath
from vecmem.errors import InvalidInputError, VecmemError
from vecmem.models import GLOBAL_SCOPE, ImportReport, MemoryFilter, MemoryRecord, normalize_for_hash
from vecmem.storage.base import MemoryStore
from vecmem.storage.state.access import AccessStats
from vecmem.validation import check_unicode, validate_new_id

__all__ = ["WRITE_BATCH", "content_id", "export", "import_lines", "parse_line", "parse_lines", "text_for_id",
           "write_batched"]

WRITE_BATCH = 256  # memories embedded and written together by add_records and imports


def content_id(user_id: str, scope: str, content: str) -> str:
    """The id a memory gets when none is given: the same statement in the same scope is the same memory.
    Text that cannot be encoded (a lone surrogate) is refused here, the first place that encodes it."""
    for field_name, text in (("user_id", user_id), ("scope", scope), ("content", content)):
        check_unicode(field_name, text)
    digest = hashlib.sha256(f"{user_id}\x1f{scope}\x1f{normalize_for_hash(content)}".encode())
    return "m-" + digest.hexdigest()[:20]


def text_for_id(content: object) -> str:
    """The text to derive an id from; MemoryRecord validates the content itself (and refuses a non-string)."""
    return content if isinstance(content, str) else ""


def export(store: MemoryStore, access: AccessStats, users: Sequence[str]) -> Iterator[MemoryRecord]:
    """Every memory of these users (superseded, archived and pending ones included), oldest first per user,
    with their access statistics."""
    every = MemoryFilter(all_sessions=True, include_superseded=True, statuses=None)
    for user in users:
        yield from access.apply(sorted(store.scan(user, every), key=lambda r: (r.created_at, r.id)))


def parse_line(line: str, forced_user: str | None, default_user: str, now: datetime) -> MemoryRecord:
    """One exported line as a record: ``forced_user`` overrides the line's own user, ``default_user`` fills a
    line without one, and a line without an id gets its content-derived id. ``now`` is its creation time when
    the line has none."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInputError("line", f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInputError("line", "must be a JSON object")
    if forced_user is not None:
        data = {**data, "user_id": forced_user}
    data.setdefault("user_id", default_user)
    if "id" not in data or data["id"] in (None, ""):
        scope = data.get("session_id") or data.get("scope") or GLOBAL_SCOPE
        content = data.get("content")
        if not isinstance(content, str) or not isinstance(scope, str) or not isinstance(data["user_id"], str):
            raise InvalidInputError("content", "must be a string")
        data = {**data, "id": content_id(data["user_id"], scope, content)}
    else:  # an id the line gives is a new memory's id (NEW_ID_RULE), even when exported by an older version
        data = {**data, "id": validate_new_id(data["id"])}
    return MemoryRecord.from_dict(data, created_at=now)


def parse_lines(
    lines: Iterable[str],
    forced_user: str | None,
    default_user: str,
    clock: Callable[[], datetime],
    errors: list[tuple[int, str]],
) -> Iterator[MemoryRecord]:
    """The good lines as records, lazily (a large file is never all in memory); each bad line is appended to
    ``errors`` as (line number, why) and skipped. Blank lines are neither."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield parse_line(line, forced_user, default_user, clock())
        except (ValueError, VecmemError) as exc:  # ValueError too: one odd line must never stop the import
            errors.append((number, str(exc)))


def import_lines(
    lines: Iterable[str],
    forced_user: str | None,
    default_user: str,
    clock: Callable[[], datetime],
    add_records: Callable[[Iterable[MemoryRecord]], ImportReport],
) -> ImportReport:
    """Import exported lines through ``add_records`` (the bank's, which applies the caps after): what it added
    and skipped, and each bad line by number (see ``parse_line`` for the users and ids lines get)."""
    errors: list[tuple[int, str]] = []
    report = add_records(parse_lines(lines, forced_user, default_user, clock, errors))
    return ImportReport(added=report.added, skipped=report.skipped, errors=tuple(errors))


def write_batched(
    records: Iterable[MemoryRecord],
    writes: WritePath,
    locked: Callable[[Iterable[str]], AbstractContextManager[object]],
    *,
    overwrite: bool,
    progress: Callable[[int], None] | None,
) -> tuple[ImportReport, list[str]]:
    """Embed and write records in batches of WRITE_BATCH, the next batch embedded while this one is written
    through ``writes`` (holding ``locked(users)``, the bank's write locks of the batch's users, only while it
    writes).

    A record whose id is already stored, or came earlier in ``records``, is skipped unless ``overwrite`` (then
    the last of repeated ids wins); whether it is stored is asked again under the locks, so a record another
    process wrote while this batch was embedded is skipped too, not overwritten. An id outside NEW_ID_RULE raises InvalidInputError as its batch is gathered:
    that batch is never written, batches already written stay. ``progress`` is called with the number of
    records handled so far. Returns the report and the users written to (sorted), whose caps the caller applies.
    """
    added = skipped = handled = 0
    scheduled: set[tuple[str, str]] = set()
    waiting: tuple[list[MemoryRecord], Future[np.ndarray]] | None = None

    def finish(batch: list[MemoryRecord], vectors: Future[np.ndarray]) -> tuple[int, int]:
        """Write what is still unstored of the batch; (added, skipped)."""
        embedded = vectors.result()
        if not batch:
            return 0, 0
        with locked({record.user_id for record in batch}):
            keep = list(range(len(batch)))
            if not overwrite:
                stored = writes.store.stored_ids(_ids_by_user(batch))
                keep = [i for i, record in enumerate(batch) if record.id not in stored.get(record.user_id, ())]
            if keep:
                writes.write([batch[i] for i in keep], vectors=embedded[keep], new=not overwrite)
        return len(keep), len(batch) - len(keep)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vecmem-embed") as embedding:
        for batch in _batches(records, WRITE_BATCH):
            fresh = _unseen(writes.store, batch, overwrite, scheduled)
            skipped += len(batch) - len(fresh)
            handled += len(batch)
            future = embedding.submit(writes.embed_documents, [r.content for r in fresh])
            if waiting is not None:
                wrote, raced = finish(*waiting)
                added, skipped = added + wrote, skipped + raced
                if progress is not None:
                    progress(handled - len(batch))
            waiting = (fresh, future)
        if waiting is not None:
            wrote, raced = finish(*waiting)
            added, skipped = added + wrote, skipped + raced
    if progress is not None:
        progress(handled)
    return ImportReport(added=added, skipped=skipped), sorted({user for user, _ in scheduled})


def _ids_by_user(records: Iterable[MemoryRecord]) -> dict[str, list[str]]:
    by_user: dict[str, list[str]] = {}
    for record in records:
        by_user.setdefault(record.user_id, []).append(record.id)
    return by_user


def _unseen(
    store: MemoryStore, batch: list[MemoryRecord], overwrite: bool, scheduled: set[tuple[str, str]]
) -> list[MemoryRecord]:
    """The records of a batch to write: new ones (or all, with ``overwrite``), the last of repeated ids."""
    unique: dict[tuple[str, str], MemoryRecord] = {}
    for record in batch:
        unique[(record.user_id, record.id)] = record
    by_user: dict[str, list[MemoryRecord]] = {}
    for key, record in unique.items():
        if overwrite or key not in scheduled:
            by_user.setdefault(record.user_id, []).append(record)
    stored = {} if overwrite else store.stored_ids({user: [r.id for r in rs] for user, rs in by_user.items()})
    fresh = [r for user, candidates in by_user.items() for r in candidates if r.id not in stored.get(user, ())]
    scheduled.update((r.user_id, r.id) for r in fresh)
    return fresh


def _batches(items: Iterable[MemoryRecord], size: int) -> Iterator[list[MemoryRecord]]:
    """``items`` in batches of ``size``, each id checked against NEW_ID_RULE before its batch is written."""
    batch: list[MemoryRecord] = []
    for item in items:
        validate_new_id(item.id)
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch

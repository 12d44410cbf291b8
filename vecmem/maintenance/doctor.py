"""``vecmem doctor``: examine a store and repair what can be repaired without guessing.

Examined, per user: rows that cannot be read, a memory stored in two type collections or in the wrong one,
``superseded_by`` links to memories that do not exist, supersession cycles, keyword tokens missing or out of step
with the memory (the keyword index is rebuilt from them), collections recording another embedding model than the
store's or the configured one; and beside the store, access statistics of memories that no longer exist and
writes the change feed saw begin but never end (a process killed mid-write; the next process to open the store
settles those and runs these repairs for their users itself, recovery.py, so the doctor finds them only where
that could not run).

Repaired with ``repair=True``: a dangling ``superseded_by`` is cleared (the memory is live again, as ``restore``
would make it); a cycle is broken at its newest memory, which becomes live; of two copies of one memory the
newer is kept; a copy in the wrong collection is moved to its type's; keyword tokens are rewritten from the
memory; stale access statistics are deleted; unfinished writes are marked settled (what Chroma holds is what
there is). Not repaired: unreadable rows (nothing to rebuild them from: export what can be read) and a model
mismatch (``vecmem reindex`` re-embeds everything with the configured model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vecmem.errors import StoreError
from vecmem.models import MEMORY_TYPES, MemoryRecord
from vecmem.retrieval.index.keyword import memory_tokens
from vecmem.storage.base import MemoryStore
from vecmem.storage.chroma.rows import from_row
from vecmem.storage.state.access import AccessStats
from vecmem.storage.state.changes import ChangeFeed

__all__ = ["Finding", "DoctorReport", "examine", "examine_users"]


@dataclass(frozen=True)
class Finding:
    """One problem found: what it is, which memories, and whether it was repaired."""

    kind: str
    user_id: str | None
    memory_ids: tuple[str, ...]
    detail: str
    repairable: bool
    repaired: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "user_id": self.user_id, "memory_ids": list(self.memory_ids),
                "detail": self.detail, "repairable": self.repairable, "repaired": self.repaired}


@dataclass(frozen=True)
class DoctorReport:
    counts: dict[str, dict[str, int]]  # user -> type -> memories
    findings: tuple[Finding, ...] = field(default=())

    @property
    def healthy(self) -> bool:
        """Nothing found, or everything found was repaired."""
        return all(finding.repaired for finding in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "counts": self.counts,
                "findings": [finding.to_dict() for finding in self.findings]}


def examine(
    store: MemoryStore,
    access: AccessStats,
    changes: ChangeFeed | None,
    configured_model: str,
    *,
    repair: bool,
    rewrite: Callable[[str, list[MemoryRecord]], object],
) -> DoctorReport:
    """Examine every user; with ``repair``, mend what can be mended. ``rewrite(user, records)`` stores records
    with fresh vectors and keyword tokens (the bank's own write path)."""
    findings: list[Finding] = []
    stored = store.stored_model()
    if stored is not None and stored[0] != configured_model:
        findings.append(Finding("model-mismatch", None, (), f"the store was built with '{stored[0]}', the "
                                f"configured model is '{configured_model}': run `vecmem reindex`", False))
    report = examine_users(store, access, changes, store.users(), repair=repair, rewrite=rewrite)
    return DoctorReport(counts=report.counts, findings=tuple(findings) + report.findings)


def examine_users(
    store: MemoryStore,
    access: AccessStats,
    changes: ChangeFeed | None,
    users: Iterable[str],
    *,
    repair: bool,
    rewrite: Callable[[str, list[MemoryRecord]], object],
) -> DoctorReport:
    """``examine`` for these users only, leaving out the store-wide check of the model (what the recovery on
    open runs on the users a killed writer left writes of: recovery.py)."""
    findings: list[Finding] = []
    counts: dict[str, dict[str, int]] = {}
    stored = store.stored_model()
    for user in users:
        counts[user] = dict.fromkeys(MEMORY_TYPES, 0)
        findings.extend(_examine_user(store, access, changes, user, stored, counts[user], repair, rewrite))
    return DoctorReport(counts=counts, findings=tuple(findings))


def _examine_user(
    store: MemoryStore,
    access: AccessStats,
    changes: ChangeFeed | None,
    user: str,
    stored_model: tuple[str, int] | None,
    counts: dict[str, int],
    repair: bool,
    rewrite: Callable[[str, list[MemoryRecord]], object],
) -> list[Finding]:
    exam = _UserExam(store, user, repair, rewrite)
    if stored_model is not None:
        exam.models(stored_model[0])
    copies = exam.read_copies()
    records = exam.keep_one_copy(copies)
    for record in records.values():
        counts[record.type] += 1
    exam.dangling_supersessions(records)
    exam.supersession_cycles(records)
    exam.keyword_tokens(copies, records)
    exam.access_statistics(access, records)
    if changes is not None:
        exam.unfinished_writes(changes)
    return exam.found


_Copies = dict[str, list[tuple[str, MemoryRecord, list[str] | None]]]  # id -> (collection, record, its tokens)


class _UserExam:
    """The doctor's checks of one user, each reporting what it finds (and mending it when asked to)."""

    def __init__(self, store: MemoryStore, user: str, repair: bool,
                 rewrite: Callable[[str, list[MemoryRecord]], object]) -> None:
        self.store, self.user, self.repair, self._rewrite = store, user, repair, rewrite
        self.found: list[Finding] = []

    def rewrite(self, records: list[MemoryRecord]) -> object:
        """Store records with fresh vectors and keyword tokens (the bank's write path)."""
        return self._rewrite(self.user, records)

    def report(self, kind: str, ids: Iterable[str], detail: str, mend: Callable[[], object] | None) -> None:
        """One finding; ``mend`` is its repair (None: not repairable), run when the doctor repairs."""
        repaired = False
        if self.repair and mend is not None:
            mend()
            repaired = True
        self.found.append(Finding(kind, self.user, tuple(sorted(ids)), detail, mend is not None, repaired))

    def models(self, stored_model: str) -> None:
        for memory_type, model in self.store.collection_models(self.user).items():
            if model[0] != stored_model:
                self.report("model-mismatch", [], f"the {memory_type} collection records '{model[0]}', the store "
                            f"'{stored_model}': run `vecmem reindex`", None)

    def read_copies(self) -> _Copies:
        """Every stored row of the user by memory id; rows that cannot be read are reported."""
        copies: _Copies = {}
        unreadable: list[str] = []
        for collection_type, memory_id, document, metadata in self.store.raw_rows(self.user):
            try:
                record = from_row(memory_id, document, metadata)
            except StoreError:
                unreadable.append(memory_id)
                continue
            keywords = (metadata or {}).get("keywords")
            copies.setdefault(memory_id, []).append((collection_type, record,
                                                     None if keywords is None else keywords.split()))
        if unreadable:
            self.report("unreadable-rows", unreadable, f"{len(unreadable)} rows cannot be read; export what can be "
                        "read and import it into a fresh store", None)
        return copies

    def keep_one_copy(self, copies: _Copies) -> dict[str, MemoryRecord]:
        """Each memory's copy to keep; memories stored twice or outside their type's collection are reported."""
        records: dict[str, MemoryRecord] = {}
        misplaced: set[str] = set()
        for memory_id, placed in copies.items():
            # every write raises a memory's version, so the copy a half-done type change or edit left behind is
            # the lower one; created_at (equal across an edit) and the copy's own collection only break ties
            newest = max(placed, key=lambda item: (item[1].version, item[1].created_at, item[0] == item[1].type))
            records[memory_id] = newest[1]
            if len(placed) > 1 or newest[0] != newest[1].type:
                misplaced.add(memory_id)
        if misplaced:
            # the write path puts a memory in its type's collection and deletes it from every other one
            self.report("misplaced-copies", misplaced, f"{len(misplaced)} memories are stored twice or outside "
                        "their type's collection (the newest copy is kept, in its type's collection)",
                        lambda: self.rewrite([records[memory_id] for memory_id in sorted(misplaced)]))
        return records

    def dangling_supersessions(self, records: dict[str, MemoryRecord]) -> None:
        dangling = [r.id for r in records.values() if r.superseded_by and r.superseded_by not in records]
        if dangling:
            self.report("dangling-superseded-by", dangling, f"{len(dangling)} memories are superseded by memories "
                        "that no longer exist (they become live again, as `restore` would make them)",
                        lambda: self.store.update_metadata(
                            self.user, [records[i].with_changes(superseded_by=None) for i in dangling]))

    def supersession_cycles(self, records: dict[str, MemoryRecord]) -> None:
        cycles = supersession_cycles(records)
        if cycles:
            heads = [max(cycle, key=lambda i: (records[i].created_at, i)) for cycle in cycles]
            self.report("supersession-cycle", [i for cycle in cycles for i in cycle], f"{len(cycles)} supersession "
                        "cycles (each broken at its newest memory, which becomes live)",
                        lambda: self.store.update_metadata(
                            self.user, [records[i].with_changes(superseded_by=None) for i in heads]))

    def keyword_tokens(self, copies: _Copies, records: dict[str, MemoryRecord]) -> None:
        stale = [memory_id for memory_id, placed in copies.items()
                 if _tokens_of(placed, records[memory_id]) != memory_tokens(records[memory_id])]
        if stale:
            self.report("keyword-index-out-of-step", stale, f"{len(stale)} memories have keyword tokens missing or "
                        "not matching their text (rewritten from the memory)",
                        lambda: self.rewrite([records[i] for i in stale]))

    def access_statistics(self, access: AccessStats, records: dict[str, MemoryRecord]) -> None:
        gone = sorted(set(access.lookup_all(self.user)) - set(records))
        if gone:
            self.report("stale-access-statistics", gone, f"access statistics of {len(gone)} memories that no "
                        "longer exist (deleted)", lambda: access.forget(self.user, gone))

    def unfinished_writes(self, changes: ChangeFeed) -> None:
        unsettled = changes.unsettled(self.user, changes.head(), others_only=True)  # this process's are in flight
        if unsettled:
            self.report("unfinished-writes", unsettled, f"{sum(unsettled.values())} writes began and never ended "
                        "(a process killed mid-write); what the store holds is kept and marked settled",
                        lambda: changes.settle(self.user, unsettled))


def _tokens_of(placed: list[tuple[str, MemoryRecord, list[str] | None]], record: MemoryRecord) -> list[str] | None:
    for _, candidate, tokens in placed:
        if candidate is record:
            return tokens
    return None


def supersession_cycles(records: Mapping[str, MemoryRecord]) -> list[list[str]]:
    """Each supersession cycle among ``records`` once, as the ids on it (what the doctor breaks)."""
    found: list[list[str]] = []
    done: set[str] = set()
    for start in records:
        path: list[str] = []
        on_path: set[str] = set()
        current: str | None = start
        while current is not None and current in records and current not in done and current not in on_path:
            path.append(current)
            on_path.add(current)
            current = records[current].superseded_by
        if current is not None and current in on_path:
            found.append(path[path.index(current):])
        done.update(path)
    return found

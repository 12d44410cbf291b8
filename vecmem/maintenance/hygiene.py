"""Memory hygiene: the forgetting policy (which memories to archive, and why) and the review queue's rules.

More memories are not better: old, low-value ones crowd retrieval and cost tokens. A memory's **retention** is
the reranker's own valuation without the query: ``importance × confidence × exp(-λ·days since last use)``, so
a memory that keeps being recalled stays fresh (recall-reinforced, as in the reranker) and an unused one fades.

The policy (``Settings``; every part is off until configured, so nothing is archived by surprise):

* **threshold** (``VECMEM_PRUNE_THRESHOLD``): a live memory whose retention is below it is archived;
* **cap per user** (``VECMEM_CAP_PER_USER``) and **per session** (``VECMEM_CAP_PER_SESSION``, each session's
  own memories): past the cap, the lowest-retention memories are archived first, the least recently used
  first among equals.

Archived memories leave retrieval but stay listed (``list --archived``), exported and restorable
(``unarchive``); nothing is destroyed except by an explicit ``forget``. Never archived automatically: a
preference or an instruction with importance 1.0, which the user stated explicitly. Superseded memories are
out of retrieval already and are not counted.

The **review queue**: an extracted memory whose confidence is below ``VECMEM_REVIEW_CONFIDENCE`` is stored as
``pending`` and stays out of retrieval until a person approves it (``vecmem review``, ``approve``, ``reject``).
With ``VECMEM_REVIEW_QUEUE=off`` (unattended agents) it is stored live and its low confidence only lowers its
importance weight in the reranker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from vecmem.config import Settings
from vecmem.models import GLOBAL_SCOPE, MemoryFilter, MemoryRecord
from vecmem.retrieval.rank import freshness, weight
from vecmem.storage.base import MemoryStore
from vecmem.storage.state.access import AccessStats

__all__ = ["PruneCandidate", "active", "archive_by_policy", "needs_review", "over_cap", "plan", "protected",
           "retention"]


@dataclass(frozen=True)
class PruneCandidate:
    record: MemoryRecord
    retention: float
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"id": self.record.id, "content": self.record.content, "type": self.record.type,
                "scope": self.record.scope, "retention": round(self.retention, 4), "reason": self.reason}


def retention(record: MemoryRecord, now: datetime, decay_per_day: float) -> float:
    return weight(record) * freshness((now - record.last_used).total_seconds(), decay_per_day)


def protected(record: MemoryRecord) -> bool:
    """An explicit preference or instruction (importance 1.0) is never archived automatically."""
    return record.importance >= 1.0 and record.type in ("preference", "instruction")


def active(settings: Settings) -> bool:
    """Whether any part of the forgetting policy is configured."""
    return settings.prune_threshold > 0 or settings.cap_per_user > 0 or settings.cap_per_session > 0


def needs_review(confidence: float, settings: Settings) -> bool:
    return settings.review_queue and confidence < settings.review_confidence


def plan(records: Iterable[MemoryRecord], now: datetime, settings: Settings) -> list[PruneCandidate]:
    """What the policy would archive among these memories (one user's, access statistics applied), and why."""
    live = [r for r in records if r.retrievable]
    scored = {r.id: retention(r, now, settings.recency_decay_per_day) for r in live}
    chosen: dict[str, PruneCandidate] = {}
    if settings.prune_threshold > 0:
        for record in live:
            if not protected(record) and scored[record.id] < settings.prune_threshold:
                chosen[record.id] = PruneCandidate(record, scored[record.id], (
                    f"retention {scored[record.id]:.3f} is below the threshold {settings.prune_threshold:g}"))
    if settings.cap_per_session > 0:
        by_session: dict[str, list[MemoryRecord]] = {}
        for record in live:
            if record.scope != GLOBAL_SCOPE:
                by_session.setdefault(record.scope, []).append(record)
        for session, members in sorted(by_session.items()):
            _over_cap(members, settings.cap_per_session, f"session {session!r}", scored, chosen)
    if settings.cap_per_user > 0:
        _over_cap(live, settings.cap_per_user, "the user", scored, chosen)
    return sorted(chosen.values(), key=lambda c: (c.retention, c.record.last_used, c.record.id))


def _over_cap(members: Sequence[MemoryRecord], cap: int, whose: str, scored: dict[str, float],
              chosen: dict[str, PruneCandidate]) -> None:
    remaining = [r for r in members if r.id not in chosen]
    excess = len(remaining) - cap
    if excess <= 0:
        return
    candidates = sorted((r for r in remaining if not protected(r)),
                        key=lambda r: (scored[r.id], r.last_used, r.id))
    for record in candidates[:excess]:
        chosen[record.id] = PruneCandidate(record, scored[record.id], (
            f"{whose} is over the cap of {cap} live memories; retention {scored[record.id]:.3f}, among the lowest"))


def archive_by_policy(
    store: MemoryStore,
    access: AccessStats,
    users: Iterable[str],
    clock: Callable[[], datetime],
    settings: Settings,
    archive: Callable[[str, list[MemoryRecord]], object],
    locked: Callable[[Iterable[str]], AbstractContextManager[object]],
    *,
    dry_run: bool,
) -> list[PruneCandidate]:
    """Plan each user's archiving (access statistics applied, so recall keeps memories fresh) and, unless
    ``dry_run``, hand the archived records to ``archive(user, records)``, the caller's write path, each user
    holding ``locked([user])`` (the bank's write lock: one user at a time, never a whole store). Returns every
    candidate, per user in ``plan``'s order."""
    chosen: list[PruneCandidate] = []
    for user in users:
        with locked([user]):
            records = access.apply(list(store.scan(user, MemoryFilter(all_sessions=True))))
            picked = plan(records, clock(), settings)
            if picked and not dry_run:
                archive(user, [candidate.record.with_changes(status="archived") for candidate in picked])
        chosen.extend(picked)
    return chosen


def over_cap(settings: Settings, users: Iterable[str], live_count: Callable[[str], int]) -> list[str]:
    """The users, among those just written to, whose memories the policy must look at again: every one when a
    per-session cap is set (sessions are not counted ahead), else those past the per-user cap. ``live_count``
    should be cheap (the bank counts its in-memory catalogue), so a write under the cap costs nothing."""
    if not (settings.cap_per_user or settings.cap_per_session):
        return []
    return [user for user in users if settings.cap_per_session or live_count(user) > settings.cap_per_user]

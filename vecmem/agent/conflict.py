"""Supersession: a new memory that updates or contradicts an older one of the same type replaces it.

The older memory is kept with ``superseded_by`` pointing at the newer one (history, `vecmem history`,
`vecmem restore`), and retrieval never returns it again.

* When a model extracted the candidate, its own decision (ADD / UPDATE alias / NONE alias) is applied.
* Without a model the rules decide, among live memories of the same type that the session can see:
  - NONE when one already says the same (same normalised text, or similarity >= 0.97);
  - UPDATE (newer wins) when one is at least ``threshold`` similar (``VECMEM_SUPERSEDE_THRESHOLD``, 0.9);
  - UPDATE when the new statement carries a change cue ("以后都用", "改用", "from now on", "switch to",
    "no longer") and names a value of the same topic slot (language, editor, shell, ...) as an older one:
    "以后都用 JavaScript 吧" replaces "我喜欢用 TypeScript". Embedding similarity alone cannot tell this
    (with all-MiniLM-L6-v2 two unrelated Chinese preferences score 0.77, the TypeScript/JavaScript pair 0.53);
  - ADD otherwise.
  A memory scoped to a session only ever replaces memories of that same session, never a global one.
"""

from __future__ import annotations

from dataclasses import dataclass

from vecmem.agent import rules
from vecmem.agent.extract import Candidate
from vecmem.bank import MemoryBank
from vecmem.maintenance import chains
from vecmem.maintenance.hygiene import needs_review
from vecmem.models import GLOBAL_SCOPE, MemoryRecord, normalize_for_hash

__all__ = ["Resolution", "ConflictResolver", "Written"]

DUPLICATE_SIMILARITY = 0.97
CANDIDATES = 20


@dataclass(frozen=True)
class Resolution:
    action: str  # "ADD", "UPDATE" or "NONE"
    target: MemoryRecord | None
    reason: str


@dataclass(frozen=True)
class Written:
    """What became of one candidate: the stored memory (None for NONE), what it replaced, and why."""

    action: str
    record: MemoryRecord | None
    replaced: MemoryRecord | None
    reason: str


class ConflictResolver:
    def __init__(self, bank: MemoryBank, *, threshold: float) -> None:
        self.bank = bank
        self.threshold = threshold

    def resolve(self, candidate: Candidate, *, user_id: str, session_id: str | None) -> Resolution:
        if candidate.action is not None:
            target = None
            if candidate.target_id is not None:
                target = self.bank.get(candidate.target_id, user_id=user_id)
            return Resolution(candidate.action, target, "decided by the model")
        return self._by_rules(candidate, user_id=user_id, session_id=session_id)

    def _by_rules(self, candidate: Candidate, *, user_id: str, session_id: str | None) -> Resolution:
        hits = self.bank.search(
            candidate.content,
            CANDIDATES,
            user_id=user_id,
            session_id=session_id,
            types=[candidate.memory_type],
            record_access=False,
        )
        if candidate.session_scoped:
            hits = [hit for hit in hits if hit.record.scope != GLOBAL_SCOPE]
        text = normalize_for_hash(candidate.content)
        for hit in hits:
            if normalize_for_hash(hit.content) == text or hit.similarity >= DUPLICATE_SIMILARITY:
                return Resolution("NONE", hit.record, f"already remembered as {hit.id}")
        for hit in hits:
            if hit.similarity >= self.threshold:
                return Resolution(
                    "UPDATE", hit.record, f"same type, similarity {hit.similarity:.2f} >= {self.threshold:g}"
                )
        if rules.has_change_cue(candidate.content):
            slots = rules.topic_slots(candidate.content)
            for hit in hits:  # best-ranked first
                shared = slots & rules.topic_slots(hit.content)
                if shared:
                    return Resolution("UPDATE", hit.record, f"revises the {sorted(shared)[0]} with a change cue")
        return Resolution("ADD", None, "new information")

    def apply(
        self, candidate: Candidate, resolution: Resolution, *, user_id: str, session_id: str | None
    ) -> Written:
        """Store the candidate as resolved. Re-stating a superseded memory restores it."""
        if resolution.action == "NONE":
            return Written("NONE", None, None, resolution.reason)
        pending = needs_review(candidate.confidence, self.bank.settings)
        record = self.bank.add(
            candidate.content,
            user_id=user_id,
            memory_type=candidate.memory_type,
            importance=candidate.importance,
            tags=candidate.tags,
            session_id=session_id if candidate.session_scoped else None,
            source="extracted",
            confidence=candidate.confidence,
            context=candidate.context,
            status="pending" if pending else "live",
        )
        if pending:  # it waits for a person; replacing what it contradicts waits with it
            return Written("ADD", record, None, resolution.reason + "; below the review confidence: pending")
        if record.superseded:  # the user says again what a newer memory had replaced: it is current again
            record = self.bank.restore(record.id, user_id=user_id)
        replaced = resolution.target if resolution.action == "UPDATE" else None
        if replaced is not None and replaced.id != record.id:
            current = self.bank.get(replaced.id, user_id=user_id)
            if not chains.seen_wherever(current, record):  # the bank would refuse it: keep both, finish the turn
                return Written("ADD", record, None, f"{resolution.reason}; {current.id} is seen where the new "
                               "memory is not, so it is kept")
            if not current.superseded:
                self.bank.supersede(replaced.id, record.id, user_id=user_id)
        return Written(resolution.action, record, replaced, resolution.reason)

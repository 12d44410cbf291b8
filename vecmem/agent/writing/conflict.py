"""Supersession: a new memory that updates or contradicts older ones replaces them, newer wins.

The older memories are kept with ``superseded_by`` pointing at the newer one (history, `vecmem history`,
`vecmem restore`), and retrieval never returns them again.

* When a model extracted the candidate, its own decision (ADD / UPDATE alias / NONE alias) is applied.
* Without a model the rules decide, over the live memories the session can see:
  - **NONE** when one of the same type already says the same (same normalised text, or closeness >= 0.97:
    ``Hit.closeness`` is the cosine on the model's calibrated scale, retrieval/embedding/calibration.py, where a typical
    paraphrase sits at 0.8 and the same statement at 1);
  - **UPDATE by topic**, whatever the two types (a preference and an instruction about the same slot do
    conflict), when the slot model of ``topics.py`` says the newer statement revises an older one: it has a
    change cue and names a new value of the slot ("以后都用 JavaScript 吧" replaces "我喜欢用 TypeScript 写前端";
    "switched to bun, no longer pnpm" replaces "From now on, use pnpm"), or the slot holds one value and the
    value differs ("I moved to Shanghai" replaces "The user lives in Hangzhou"), or it negates what the older
    one affirms -- provided it speaks of every slot the older one does (replacing "平时用 Neovim 写 Python" with
    "switched to Cursor" would lose the Python). **Every** live memory of the slot that it revises is replaced,
    not only the best-ranked one.
    Memories that merely share a word, or name two values of a slot that holds several without a change
    cue ("I like Python", "I like Rust"), are not revisions. Conclusions (and summaries) are never replaced
    by topic: they record what was established at the time;
  - **UPDATE by closeness** when one of the same type is at least ``threshold`` close on that scale
    (``VECMEM_SUPERSEDE_THRESHOLD``, 0.9: halfway from a paraphrase to the same statement) and the two do not
    name different values of a shared slot. Where the model cannot tell paraphrases from unrelated statements
    (all-MiniLM-L6-v2 on Chinese) closeness is unknown and only the slot model decides; embedding similarity
    alone cannot tell a revision from a neighbour anyway, hence the slot model;
  - **ADD** otherwise.
  Scope: a memory of a session only ever replaces memories of that same session, never a global one (a
  session's "这次改用 JavaScript" must not hide the user's lasting preference elsewhere); a global memory may
  replace a global one or one of the current session.
"""

from __future__ import annotations

from dataclasses import dataclass

from vecmem.agent.writing import topics
from vecmem.agent.writing.extract import Candidate
from vecmem.bank import chains
from vecmem.bank.api import MemoryApi
from vecmem.maintenance.hygiene import needs_review
from vecmem.models import GLOBAL_SCOPE, MemoryRecord, Provenance, normalize_for_hash

__all__ = ["Resolution", "ConflictResolver", "Written"]

DUPLICATE_SIMILARITY = 0.97
CANDIDATES = 20
TOPIC_TYPES = ("fact", "preference", "instruction")  # what a statement about a slot can be


@dataclass(frozen=True)
class Resolution:
    action: str  # "ADD", "UPDATE" or "NONE"
    target: MemoryRecord | None
    reason: str
    others: tuple[MemoryRecord, ...] = ()  # further memories an UPDATE replaces (the rest of the slot)


@dataclass(frozen=True)
class Written:
    """What became of one candidate: the stored memory (None for NONE), what it replaced, and why.
    ``replaced`` is the first memory replaced; ``also_replaced`` the others (an update of a whole slot)."""

    action: str
    record: MemoryRecord | None
    replaced: MemoryRecord | None
    reason: str
    also_replaced: tuple[MemoryRecord, ...] = ()


def _visible_to_replace(candidate: Candidate, record: MemoryRecord, session_id: str | None) -> bool:
    """Scope rule: a session's memory replaces only memories of its session; a global one, global ones and
    those of the current session."""
    if candidate.session_scoped:
        return session_id is not None and record.scope == session_id
    return record.scope in (GLOBAL_SCOPE, session_id)


def _different_values(newer: str, older: str) -> bool:
    """The two name different values of a slot they share: distinct statements, however similar."""
    old = {(f.slot, f.holder): f.value for f in topics.facets(older)}
    return any((f.slot, f.holder) in old and old[(f.slot, f.holder)] != f.value for f in topics.facets(newer))


class ConflictResolver:
    def __init__(self, bank: MemoryApi, *, threshold: float) -> None:
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
        hits = self.bank.search(candidate.content, CANDIDATES, user_id=user_id, session_id=session_id,
                                types=[candidate.memory_type], record_access=False)
        hits = [hit for hit in hits if _visible_to_replace(candidate, hit.record, session_id)]
        text = normalize_for_hash(candidate.content)
        for hit in hits:
            if normalize_for_hash(hit.content) == text or (hit.closeness or 0.0) >= DUPLICATE_SIMILARITY:
                return Resolution("NONE", hit.record, f"already remembered as {hit.id}")
        revised = self._revised_by_topic(candidate, user_id=user_id, session_id=session_id)
        if revised:
            (first, reason), *rest = revised
            also = f" (and {len(rest)} more of the slot)" if rest else ""
            return Resolution("UPDATE", first, reason + also, tuple(record for record, _ in rest))
        for hit in hits:
            close = hit.closeness
            if close is not None and close >= self.threshold and not _different_values(candidate.content, hit.content):
                return Resolution("UPDATE", hit.record, f"same type, closeness {close:.2f} >= {self.threshold:g}")
        return Resolution("ADD", None, "new information")

    def _revised_by_topic(
        self, candidate: Candidate, *, user_id: str, session_id: str | None
    ) -> list[tuple[MemoryRecord, str]]:
        """Every live memory of the candidate's slots that it revises, newest first, with the reason."""
        if candidate.memory_type not in TOPIC_TYPES or not topics.facets(candidate.content):
            return []
        # the user's own words may hold the cue the third-person content has smoothed away ("其实", "actually")
        cue = topics.has_change_cue(candidate.content) or topics.has_change_cue(candidate.context)
        live = self.bank.list_memories(user_id=user_id, session_id=session_id, types=TOPIC_TYPES)
        found = []
        for record in live:
            if not _visible_to_replace(candidate, record, session_id):
                continue
            reason = topics.revises(candidate.content, record.content, change=cue)
            if reason is not None:
                found.append((record, f"revises {record.id}: {reason}"))
        return found

    def apply(
        self, candidate: Candidate, resolution: Resolution, *, user_id: str, session_id: str | None,
        provenance: Provenance | None = None,
    ) -> Written:
        """Store the candidate as resolved, with where it came from (``provenance``). Re-stating a superseded
        memory restores it (a statement already stored keeps the provenance it was stored with)."""
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
            provenance=provenance,
            resolve=False,  # decided here already
        )
        return self.settle(record, resolution, user_id=user_id,
                           held="below the review confidence" if pending else "held for review by the bank's screening")

    def settle(self, record: MemoryRecord, resolution: Resolution, *, user_id: str,
               held: str = "held for review by the bank's screening") -> Written:
        """What storing ``record`` under ``resolution`` (ADD or UPDATE) implies, done: a superseded memory stated
        again is restored, and an UPDATE's targets are superseded by it. A pending record (``held``: why) replaces
        nothing until a person approves it."""
        if record.status == "pending":  # it waits for a person (the bank's screening may decide so too, for a
            # planted instruction); replacing what it contradicts waits with it
            return Written("ADD", record, None, f"{resolution.reason}; {held}: pending")
        if record.superseded:  # the user says again what a newer memory had replaced: it is current again
            record = self.bank.restore(record.id, user_id=user_id)
        targets = [resolution.target, *resolution.others] if resolution.action == "UPDATE" else []
        replaced: list[MemoryRecord] = []
        reason = resolution.reason
        for target in targets:
            if target is None or target.id == record.id:
                continue
            current = self.bank.get(target.id, user_id=user_id)
            if current.superseded:  # replaced meanwhile (a restore just now, another writer)
                continue
            if not chains.seen_wherever(current, record):  # the bank would refuse it: keep both, finish the turn
                reason += f"; {current.id} is seen where the new memory is not, so it is kept"
                continue
            self.bank.supersede(current.id, record.id, user_id=user_id)
            replaced.append(target)
        if not replaced:
            return Written("ADD" if resolution.action == "UPDATE" else resolution.action, record, None, reason)
        return Written("UPDATE", record, replaced[0], reason, tuple(replaced[1:]))

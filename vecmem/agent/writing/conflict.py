"""Supersession of what extraction proposes: a new memory that contradicts older ones replaces them, newer wins.

The older memories are kept with ``superseded_by`` pointing at the newer one (history, `vecmem history`,
`vecmem restore`), and retrieval never returns them again.

* Without a model, a candidate is stored through ``MemoryBank.remember``: the bank gathers the candidates under
  the user's write lock and ``decide.py`` decides, the same decision a direct ``add`` gets (the chat, ``add``,
  ``add_messages``, the CLI, HTTP and MCP reach the same plan for the same statements).
* With a model, its own decision (ADD / UPDATE alias / NONE alias) is applied, checked first: a NONE whose
  target does not say what the new statement says (another number, name, identifier or polarity:
  ``decide.same_statement``) would drop the new value, so it is added instead; an UPDATE of a memory that is
  no longer live is an ADD.
"""

from __future__ import annotations

from dataclasses import dataclass

from vecmem.agent.writing.claims import value_tokens
from vecmem.agent.writing.extract import Candidate
from vecmem.bank import chains
from vecmem.bank.api import MemoryApi
from vecmem.bank.resolving import AddResult
from vecmem.errors import NotFoundError
from vecmem.maintenance.hygiene import needs_review
from vecmem.models import MemoryRecord, Provenance

__all__ = ["Resolution", "ConflictResolver", "Written"]


@dataclass(frozen=True)
class Resolution:
    action: str  # "ADD", "UPDATE" or "NONE"
    target: MemoryRecord | None
    reason: str
    others: tuple[MemoryRecord, ...] = ()  # further memories an UPDATE replaces


@dataclass(frozen=True)
class Written:
    """What became of one candidate: the stored memory (None for NONE), what it replaced, and why.
    ``replaced`` is the first memory replaced; ``also_replaced`` the others; ``revised`` the memories of several
    facts it rewrote to keep the facts it does not change."""

    action: str
    record: MemoryRecord | None
    replaced: MemoryRecord | None
    reason: str
    also_replaced: tuple[MemoryRecord, ...] = ()
    revised: tuple[MemoryRecord, ...] = ()


def _written(result: AddResult) -> tuple[Resolution, Written]:
    if result.action == "unchanged":
        return Resolution("NONE", result.record, result.reason), Written("NONE", None, None, result.reason)
    if result.action == "replaced":
        first = result.replaced[0] if result.replaced else None
        rest = result.replaced[1:]
        return (Resolution("UPDATE", first or result.revised[0], result.reason, rest),
                Written("UPDATE", result.record, first, result.reason, rest, result.revised))
    return Resolution("ADD", None, result.reason), Written("ADD", result.record, None, result.reason)


class ConflictResolver:
    def __init__(self, bank: MemoryApi) -> None:
        self.bank = bank

    def write(self, candidate: Candidate, *, user_id: str, session_id: str | None,
              provenance: Provenance | None = None) -> tuple[Resolution, Written]:
        """Store the candidate as decided (the module docstring), with where it came from (``provenance``)."""
        pending = needs_review(candidate.confidence, self.bank.settings)
        common = dict(user_id=user_id, memory_type=candidate.memory_type, importance=candidate.importance,
                      tags=candidate.tags, session_id=session_id if candidate.session_scoped else None,
                      source="extracted", confidence=candidate.confidence, context=candidate.context,
                      status="pending" if pending else "live", provenance=provenance)
        if candidate.action is None:
            return _written(self.bank.remember(candidate.content, resolve=True, **common))  # type: ignore[arg-type]
        target = self._target(candidate, user_id)
        if candidate.action == "NONE" and target is not None and value_tokens(candidate.content) <= value_tokens(
                target.content):
            reason = f"already remembered as {target.id} (decided by the model)"
            return Resolution("NONE", target, reason), Written("NONE", None, None, reason)
        record = self.bank.add(candidate.content, resolve=False, **common)  # type: ignore[arg-type]
        if candidate.action != "UPDATE" or target is None or target.superseded or target.id == record.id:
            why = ("the model called it a repeat of a memory that does not say the same"
                   if candidate.action == "NONE" else "decided by the model")
            return Resolution("ADD", None, why), Written("ADD", record, None, why)
        reason = f"revises {target.id} (decided by the model)"
        if record.status == "pending":
            reason += "; held for review: pending"
            return Resolution("UPDATE", target, reason), Written("ADD", record, None, reason)
        if not chains.seen_wherever(target, record):
            reason += f"; {target.id} is seen where the new memory is not, so it is kept"
            return Resolution("UPDATE", target, reason), Written("ADD", record, None, reason)
        self.bank.supersede(target.id, record.id, user_id=user_id)
        return Resolution("UPDATE", target, reason), Written("UPDATE", record, target, reason)

    def _target(self, candidate: Candidate, user_id: str) -> MemoryRecord | None:
        if candidate.target_id is None:
            return None
        try:
            return self.bank.get(candidate.target_id, user_id=user_id)
        except NotFoundError:  # forgotten since the model saw it
            return None

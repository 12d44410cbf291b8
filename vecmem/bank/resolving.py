"""``MemoryBank.add`` / ``remember``: what a direct add reports, and how the bank decides whether the new statement
is new, already remembered, or an update of what is stored.

**Why a protocol.** Deciding that "我住在上海" revises "我住在杭州" is the memory agent's statement model
(vecmem/agent/writing/claims.py and decide.py), and typing "I prefer concise code" as a preference is the agent's
classification (rules.py). The agent layer sits *above* the bank and may not be imported by it (the import-linter
contract in pyproject.toml), so the bank asks for an ``AddResolver``, this module's protocol, exactly as it asks
for the ``MessageLearner`` of ``add_messages`` (learning.py):

given through its constructor, ``MemoryBank(..., resolver=...)`` (tests pass fakes this way), or by the
assembled bank (vecmem/assembly.py), which gives the agent's ``AddResolution`` (agent/writing/adding.py).

**What the bank does with it.** The bank validates and screens the memory as always, then under the user's write
lock gathers the candidates (``gather``: the memories most similar to it and, when the resolver reads a slot in
it, every live memory it could revise, within scope), asks the resolver's pure ``decide(record, candidates)`` for
a ``Plan`` and carries the plan out itself (``carry_out``): the decision, the write and the supersessions and
rewrites it implies are one step no other writer of the user can interleave with, and the resolver never calls
back into the bank. ``resolve=False`` skips the resolver: the memory is stored as given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from vecmem.bank import chains
from vecmem.models import GLOBAL_SCOPE, MemoryRecord
from vecmem.retrieval.query.parsed import searchable

__all__ = ["ACTIONS", "AddAction", "AddResolver", "AddResult", "Known", "Plan", "PlanAction", "TypeGuess", "Write",
           "carry_out", "gather"]

AddAction = Literal["added", "replaced", "unchanged"]
ACTIONS: tuple[AddAction, ...] = ("added", "replaced", "unchanged")
PlanAction = Literal["add", "unchanged", "replace", "timeline"]
CANDIDATES = 20  # the most similar memories a decision weighs (beside every live one of a slot it reads)
SLOT_TYPES = ("fact", "preference", "instruction")  # what a statement about a slot can be


@dataclass(frozen=True)
class TypeGuess:
    """The type the rules give a statement stated without one, and why ("preference cue 'I prefer'")."""

    type: str
    reason: str


@dataclass(frozen=True)
class AddResult:
    """What ``MemoryBank.remember`` did with one statement.

    ``action``: ``"added"`` (a new memory), ``"replaced"`` (a new memory that supersedes ``replaced``, kept for
    history and undo with ``superseded_by`` set, or revises ``revised``) or ``"unchanged"`` (``record`` already
    said it: nothing was written). ``record``: the memory as stored, or for ``unchanged`` the one that already
    says it. ``replaced``: the memories it superseded, as they are now. ``revised``: memories of several facts of
    which it changed one, rewritten to keep the others (what they said before is a revision in ``history``).
    ``reason``: why, in words ("revises m-…: residence is now 上海 (was 杭州)", "already remembered as m-…").
    ``type_inferred``: the type the rules gave a statement added without one (None when the caller chose it),
    and ``type_reason`` why.
    """

    action: AddAction
    record: MemoryRecord
    replaced: tuple[MemoryRecord, ...] = ()
    reason: str = ""
    type_inferred: str | None = None
    type_reason: str = ""
    revised: tuple[MemoryRecord, ...] = ()

    @property
    def replaced_ids(self) -> tuple[str, ...]:
        return tuple(record.id for record in self.replaced)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the HTTP API, the MCP tool and `vecmem add --json` show it: the memory's own fields (so
        a caller that read the stored memory from ``add`` reads it the same way) and what the add did."""
        return {**self.record.to_dict(), "action": self.action,
                "replaced": [{"id": old.id, "content": old.content} for old in self.replaced],
                "revised": [{"id": old.id, "content": old.content} for old in self.revised],
                "reason": self.reason, "type_inferred": self.type_inferred, "type_reason": self.type_reason}


@dataclass(frozen=True)
class Known:
    """A live memory a decision weighs: the record, and how close it is to the new statement on the model's
    calibrated scale (None: gathered by slot, not by similarity, or a model that cannot tell)."""

    record: MemoryRecord
    closeness: float | None = None


@dataclass(frozen=True)
class Plan:
    """What to do with a new statement. ``add``: store it. ``unchanged``: ``same_as`` already says it.
    ``replace``: store it and supersede ``replace``, which it contradicts. ``timeline``: the same for a statement
    that tells a change over time ("used to X, now Y"): what it moves into the past is superseded, and the new
    memory keeps the past value as history. ``rewrite``: (id, text) for memories of several facts of which it
    revises one: each keeps the rest. ``reason`` says why, in words."""

    action: PlanAction
    reason: str
    same_as: str | None = None
    replace: tuple[str, ...] = ()
    rewrite: tuple[tuple[str, str], ...] = ()


# stores a record as given: (it, True), or (the memory already stored under its id, saying the same, False)
Write = Callable[[MemoryRecord], tuple[MemoryRecord, bool]]


@runtime_checkable
class AddResolver(Protocol):
    """Types a statement stated without a type, and decides what a new memory does to the stored ones (the agent
    layer's ``AddResolution``)."""

    def infer_type(self, content: str) -> TypeGuess:
        """The type of ``content`` by the agent's rules (fact when no cue says otherwise)."""

    def reads_slots(self, content: str) -> bool:
        """Whether ``content`` says something of a slot (where one lives, a tool, a time...): then every live
        memory it could revise is a candidate, not only the most similar ones."""

    def decide(self, record: MemoryRecord, candidates: Sequence[Known]) -> Plan:
        """The plan for ``record`` (validated and screened, not yet stored) against ``candidates``: pure."""


def _may_replace(record: MemoryRecord, other: MemoryRecord) -> bool:
    """Scope: a session's memory replaces only memories of its session (a session's "这次改用 JavaScript" must not
    hide the user's lasting preference elsewhere); a global one, global ones and those of the session it was
    said in (its provenance)."""
    said_in = record.provenance.session_id if record.provenance is not None else None
    return other.scope == record.scope or (record.scope == GLOBAL_SCOPE and other.scope == said_in)


# ``bank`` is the MemoryBank deciding, under the user's write lock: typed Any because it is a layer above
def gather(bank: Any, record: MemoryRecord, resolver: AddResolver) -> list[Known]:
    """The live memories a decision for ``record`` weighs: the most similar ones, of any type, and every live one
    of the slot types when the resolver reads a slot in it; only those of its own scope."""
    said_in = record.provenance.session_id if record.provenance is not None else None
    session = said_in if record.scope == GLOBAL_SCOPE else record.scope
    hits = bank.search(searchable(record.content), CANDIDATES, user_id=record.user_id, session_id=session, record_access=False)
    found = {hit.id: Known(hit.record, hit.closeness) for hit in hits}
    if resolver.reads_slots(record.content):
        for other in bank.list_memories(user_id=record.user_id, session_id=session, types=SLOT_TYPES):
            found.setdefault(other.id, Known(other))
    return [known for known in found.values() if _may_replace(record, known.record)]


def carry_out(bank: Any, record: MemoryRecord, plan: Plan, write: Write) -> AddResult:
    """Do what ``plan`` says for ``record``, under the caller's write lock, and report it. A statement stored
    before and superseded since is current again; a pending one (it waits for a person) replaces nothing yet; a
    memory replaced or rewritten meanwhile by another writer, or seen where the new one is not, is left alone."""
    user = record.user_id
    if plan.action == "unchanged" and plan.same_as is not None:
        return AddResult("unchanged", bank.get(plan.same_as, user_id=user), reason=plan.reason)
    stored, new = write(record)
    if stored.status == "pending":
        return AddResult("added" if new else "unchanged", stored,
                         reason=f"{plan.reason}; held for review: pending, it replaces nothing until approved")
    reason = plan.reason
    replaced_ids: list[str] = []
    if stored.superseded_by is not None:  # stated again after a newer memory replaced it: it is current again
        successor = stored.superseded_by
        stored = bank.restore(stored.id, user_id=user)
        if not stored.superseded:
            replaced_ids.append(successor)
            reason = f"stated again: {stored.id} is current again and replaces {successor}"
    for old_id in plan.replace:
        current = bank.get(old_id, user_id=user)
        if current.id == stored.id or current.superseded:
            continue
        if not chains.seen_wherever(current, stored):
            reason += f"; {current.id} is seen where the new memory is not, so it is kept"
            continue
        bank.supersede(current.id, stored.id, user_id=user)
        replaced_ids.append(current.id)
    revised = []
    for old_id, text in plan.rewrite:
        current = bank.get(old_id, user_id=user)
        if current.id != stored.id and not current.superseded and current.content != text:
            revised.append(bank.update(current.id, user_id=user, content=text))
    replaced = tuple(old for old in (bank.get(old_id, user_id=user) for old_id in dict.fromkeys(replaced_ids))
                     if old.superseded_by == stored.id)
    if replaced or revised:
        return AddResult("replaced", stored, replaced, reason, revised=tuple(revised))
    if new:
        return AddResult("added", stored, reason=reason)
    return AddResult("unchanged", stored, reason=f"already stored as {stored.id}")

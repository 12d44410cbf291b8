"""``MemoryBank.add`` / ``remember``: what a direct add reports, and how the bank finds the code that decides
whether the new statement is new, already remembered, or an update of what is stored.

**Why a registered resolver.** Deciding that "我住在上海" revises "我住在杭州" is the memory agent's supersession
rule (vecmem/agent/writing/conflict.py and its slot model, topics.py), and typing "I prefer concise code" as a
preference is the agent's classification (rules.py). The agent layer sits *above* the bank and may not be
imported by it (the import-linter contract in pyproject.toml), so the bank asks for an ``AddResolver``, this
module's protocol, exactly as it asks for the ``MessageLearner`` of ``add_messages`` (learning.py):

* given through its constructor, ``MemoryBank(..., resolver=...)`` (tests pass fakes this way);
* otherwise the factory registered here: ``vecmem/__init__.py`` registers one that loads the agent's
  ``AddResolution`` (agent/writing/adding.py) when a bank first adds (any ``import vecmem...`` runs it, before a bank
  can exist, without loading the agent layer); ``default_resolver`` says so plainly if nothing was registered.

**What the bank does with it.** The bank validates and screens the memory as always, then under the user's write
lock hands the resolver the record and a ``write`` callable that stores a record as given (the plain add, its
content-id dedupe included, saying whether it stored anything): the decision, the write and the supersessions it implies are one step no other
writer of the user can interleave with. ``resolve=False`` skips the resolver: the memory is stored as given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from vecmem.errors import ConfigError
from vecmem.models import MemoryRecord

__all__ = ["ACTIONS", "AddAction", "AddResolver", "AddResult", "TypeGuess", "Write", "default_resolver", "register_resolver"]

AddAction = Literal["added", "replaced", "unchanged"]
ACTIONS: tuple[AddAction, ...] = ("added", "replaced", "unchanged")


@dataclass(frozen=True)
class TypeGuess:
    """The type the rules give a statement stated without one, and why ("preference cue 'I prefer'")."""

    type: str
    reason: str


@dataclass(frozen=True)
class AddResult:
    """What ``MemoryBank.remember`` did with one statement.

    ``action``: ``"added"`` (a new memory), ``"replaced"`` (a new memory that supersedes ``replaced``, kept for
    history and undo with ``superseded_by`` set) or ``"unchanged"`` (``record`` already said it: nothing was
    written). ``record``: the memory as stored, or for ``unchanged`` the one that already says it.
    ``replaced``: the memories it superseded, as they are now. ``reason``: why, in words ("revises m-…:
    residence is now 上海 (was 杭州)", "already remembered as m-…"). ``type_inferred``: the type the rules gave a
    statement added without one (None when the caller chose it), and ``type_reason`` why.
    """

    action: AddAction
    record: MemoryRecord
    replaced: tuple[MemoryRecord, ...] = ()
    reason: str = ""
    type_inferred: str | None = None
    type_reason: str = ""

    @property
    def replaced_ids(self) -> tuple[str, ...]:
        return tuple(record.id for record in self.replaced)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the HTTP API, the MCP tool and `vecmem add --json` show it: the memory's own fields (so
        a caller that read the stored memory from ``add`` reads it the same way) and what the add did."""
        return {**self.record.to_dict(), "action": self.action,
                "replaced": [{"id": old.id, "content": old.content} for old in self.replaced],
                "reason": self.reason, "type_inferred": self.type_inferred, "type_reason": self.type_reason}


# stores a record as given: (it, True), or (the memory already stored under its id, saying the same, False)
Write = Callable[[MemoryRecord], tuple[MemoryRecord, bool]]


@runtime_checkable
class AddResolver(Protocol):
    """Types a statement stated without a type, and decides what a new memory does to the stored ones (the agent
    layer's ``AddResolution``)."""

    def infer_type(self, content: str) -> TypeGuess:
        """The type of ``content`` by the agent's rules (fact when no cue says otherwise)."""

    # ``bank`` is the MemoryBank calling: typed Any because the bank is a layer above this module
    def resolve(self, bank: Any, record: MemoryRecord, write: Write) -> AddResult:
        """Decide for ``record`` (validated and screened, not yet stored) against the live memories of its user:
        the same statement again returns ``unchanged`` without calling ``write``; otherwise ``write(record)``
        stores it and the memories it revises are superseded by it."""


_registered: list[Callable[[], AddResolver]] = []  # the factory the agent layer registered (the last one)


def register_resolver(factory: Callable[[], AddResolver]) -> None:
    """Make ``factory`` what a bank without a resolver of its own uses (called once per bank)."""
    _registered[:] = [factory]


def default_resolver() -> AddResolver:
    """A new resolver from the registered factory."""
    if not _registered:
        raise ConfigError("no add resolver is registered (import vecmem, which registers the memory agent's), "
                          "or pass MemoryBank(resolver=...), or add with resolve=False")
    return _registered[0]()

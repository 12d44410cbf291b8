"""``MemoryBank.add_messages``: what learning from a list of chat messages takes and returns, and how the bank
finds the code that does it.

**Why a registered learner.** Learning from messages is the memory agent's write side (the write gate,
extraction, supersession: vecmem/agent/), and the agent layer sits *above* the bank: it wraps a ``MemoryBank``,
so the bank may not import it (the import-linter contract in pyproject.toml). The bank therefore asks for a
``MessageLearner``, this module's protocol, in one of two ways:

* given through its constructor, ``MemoryBank(..., learner=Learner(model=...))`` (tests pass fakes this way);
* otherwise the one registered here: ``vecmem/__init__.py`` registers a factory that loads the agent's
  ``Learner`` when a bank first learns (so any ``import vecmem...`` registers it before a bank can exist, without
  loading the agent layer), and ``vecmem/agent/__init__.py`` registers ``Learner`` itself when it is imported;
  ``default_learner`` says so plainly if neither ever happened.

**What is accepted** (``chat_messages``): a plain string (one user message), or a non-empty list of messages,
each a ``Turn`` or a mapping with ``role`` ("user", "assistant" or "system") and ``content`` (text, not blank,
no control characters, up to ``MAX_MESSAGE_CHARS``) and optionally ``id`` (an identifier or a non-negative
integer: what a memory learnt from the message records as its provenance; without it, the message's position
in the list), ``speaker`` (who said it, in a conversation between people: what is learnt from it names them
instead of "the user") and ``time`` (when it was said: an ISO 8601 string, epoch seconds or a datetime; its
"yesterday" and "last week" are read from it; without it, from the time it is learnt); other keys of a mapping (an OpenAI message's ``name``, ``refusal``, ...) are ignored, so a
chat-completions history can be passed as it is. At most ``MAX_MESSAGES``.
Anything else is an ``InvalidInputError`` naming the message (``messages[2].role``), before anything is written.

**What comes back** (``AddMessagesResult``): the memories written (as stored once the whole list was learnt, so
one replaced by a later message of the same list shows its ``superseded_by``), the (old id, new id) pairs of
every supersession, the user messages the write gate skipped with its stage and reason, and the stored memories
that already said what a message said.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from vecmem.errors import ConfigError, InvalidInputError
from vecmem.models import MemoryRecord, Turn
from vecmem.validation import check_choice, check_message_id, check_speaker, check_text, check_time

__all__ = ["MAX_MESSAGES", "MAX_MESSAGE_CHARS", "ROLES", "AddMessagesResult", "MessageLearner", "SkippedMessage",
           "chat_messages", "default_learner", "register_learner"]

MAX_MESSAGES = 500  # a long conversation; more is a transcript to feed in parts (each part is its own call)
MAX_MESSAGE_CHARS = 32_000  # the bank's query limit: a message is retrieved against, and shown to a model
ROLES = ("user", "assistant", "system")


@dataclass(frozen=True)
class SkippedMessage:
    """A user message the write gate did not keep: where it was in the list, what it said, and why."""

    index: int  # its position in the messages given (0-based, assistant and system messages counted)
    content: str
    stage: str  # "rules", "lexicon" or "model" (agent/writing/gate.py)
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "content": self.content, "stage": self.stage, "reason": self.reason}


@dataclass(frozen=True)
class AddMessagesResult:
    """What ``MemoryBank.add_messages`` did.

    ``written``: the memories it stored (new, or a superseded one a message stated again and so restored), as
    stored at the end; some may be ``pending`` review. ``replaced``: (old id, new id) for each memory a newer
    statement replaced. ``skipped``: the user messages the write gate dropped, and why. ``unchanged``: ids of
    stored memories that already said what a message said (nothing was written for it).
    """

    written: tuple[MemoryRecord, ...] = ()
    replaced: tuple[tuple[str, str], ...] = ()
    skipped: tuple[SkippedMessage, ...] = ()
    unchanged: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the HTTP API and the MCP tool return it."""
        return {"written": [record.to_dict() for record in self.written],
                "replaced": [{"old_id": old, "new_id": new} for old, new in self.replaced],
                "skipped": [skipped.to_dict() for skipped in self.skipped],
                "unchanged": list(self.unchanged)}


@runtime_checkable
class MessageLearner(Protocol):
    """Writes what a list of chat messages says about the user into a bank (the agent layer's ``Learner``)."""

    # ``bank`` is the MemoryBank calling: typed Any because the bank is a layer above this module
    def learn(self, bank: Any, messages: Sequence[Turn], *, user_id: str,
              session_id: str | None) -> AddMessagesResult: ...


_registered: list[Callable[[], MessageLearner]] = []  # the factory the agent layer registered (the last one)


def register_learner(factory: Callable[[], MessageLearner]) -> None:
    """Make ``factory`` what a bank without a learner of its own uses (called once per bank)."""
    _registered[:] = [factory]


def default_learner() -> MessageLearner:
    """A new learner from the registered factory."""
    if not _registered:
        raise ConfigError("no message learner is registered (import vecmem, which registers the memory agent's), "
                          "or pass MemoryBank(learner=...)")
    return _registered[0]()


def chat_messages(messages: object, *, field: str = "messages", empty_ok: bool = False) -> tuple[Turn, ...]:
    """The messages as ``Turn``s (content stripped), or ``InvalidInputError`` naming the first bad one
    (``field``: what the caller calls the list; ``empty_ok``: an empty list is no mistake, as recent turns)."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if isinstance(messages, (Mapping, Turn)) or not isinstance(messages, Sequence):
        raise InvalidInputError(field, "must be a list of messages ({'role': ..., 'content': ...}) or one "
                                f"string, got {type(messages).__name__}")
    if not messages and not empty_ok:
        raise InvalidInputError(field, "must hold at least one message")
    if len(messages) > MAX_MESSAGES:
        raise InvalidInputError(field, f"holds {len(messages):,} messages; the limit is {MAX_MESSAGES:,} "
                                "(send a longer conversation in parts)")
    return tuple(_message(f"{field}[{index}]", message) for index, message in enumerate(messages))


def _message(where: str, message: object) -> Turn:
    speaker: object = None
    time: object = None
    if isinstance(message, Turn):
        role, content, message_id = message.role, message.content, message.id
        speaker, time = message.speaker, message.time
    elif isinstance(message, Mapping):
        for key in ("role", "content"):
            if key not in message:
                raise InvalidInputError(f"{where}.{key}", "is missing")
        role, content, message_id = message["role"], message["content"], message.get("id")
        speaker, time = message.get("speaker"), message.get("time")
    else:
        raise InvalidInputError(where, "must be an object with 'role' and 'content', got "
                                f"{type(message).__name__}")
    if not isinstance(role, str):
        raise InvalidInputError(f"{where}.role", f"must be a string, got {type(role).__name__}")
    check_choice(f"{where}.role", role, ROLES)
    return Turn(role, check_text(f"{where}.content", content, max_chars=MAX_MESSAGE_CHARS),
                None if message_id is None else check_message_id(f"{where}.id", message_id),
                None if speaker is None else check_speaker(f"{where}.speaker", speaker),
                None if time is None else check_time(f"{where}.time", time))

"""Learning from a list of chat messages without an answering turn (``MemoryBank.add_messages``, mem0's ``add``).

The same write side as a chat turn of ``MemoryAgent``: each user message goes through the write gate, what it
keeps through extraction, and each extracted memory through conflict resolution (supersession, newer wins),
with the parts the chat uses (``WriteGate``, ``Extractor``, ``ConflictResolver``) wired as it wires them. The
model decides as it does for the chat: by default the chat model the bank's settings configure
(``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``), else the offline rules; ``Learner(model=...)`` chooses one,
``Learner(offline=True)`` the rules whatever is configured.

Assistant messages are context only: the reply that follows a user message is shown to a model's extraction
beside it, as the answer is in the chat, and is never a memory itself; system messages are the operator's, not
the user's, and are left out. What a model relays is untrusted: extracted memories are stored with
``source="extracted"``, so the bank's intake (bank/intake.py) screens them as it screens every path.

A message may say who said it (``speaker``: what is learnt is about them by name, "Caroline went to a support
group on 7 May 2023", not about "the user") and when (``time``: the day its "yesterday" is read from; without it,
the time it is learnt).

Each memory written records its provenance: the session given (None without one) and the message's id (the
``id`` the caller gave it, else its position in the list).

A failure (the model down, a reply that fails its schema) stops at the message it happened on and is raised;
the messages before it are written. Sending the same messages again is safe: what is already remembered
resolves to NONE (``unchanged``), never to a duplicate.

This module is registered with the bank by ``vecmem/agent/__init__.py`` (bank/learning.py says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from vecmem.agent.llm import ChatModel, chat_model_from_settings
from vecmem.agent.writing.conflict import ConflictResolver, Resolution, Written
from vecmem.agent.writing.extract import Extractor
from vecmem.agent.writing.gate import GateDecision, WriteGate
from vecmem.bank.api import MemoryApi
from vecmem.bank.learning import AddMessagesResult, SkippedMessage
from vecmem.config import Settings
from vecmem.errors import InvalidInputError, NotFoundError
from vecmem.models import MemoryRecord, Provenance, Turn
from vecmem.retrieval.query.parsed import searchable

__all__ = ["Learner", "MessageWrite", "write_message"]

RELATED = 10  # existing memories a model's extraction sees, under aliases (as the chat's)


@dataclass(frozen=True)
class MessageWrite:
    """The write step for one user message: the gate's decision, and each extracted memory's resolution and what
    became of it."""

    decision: GateDecision
    steps: tuple[tuple[Resolution, Written], ...] = ()


def write_message(bank: MemoryApi, gate: WriteGate, extractor: Extractor, resolver: ConflictResolver,
                  message: str, reply: str | None, *, user_id: str, session_id: str | None,
                  provenance: Provenance | None = None, speaker: str | None = None,
                  now: datetime | None = None) -> MessageWrite:
    """Gate, extract and resolve one user message: the chat turn's write step, without its session log; what it
    writes records ``provenance`` (the conversation and the message). With a model, one call decides and
    extracts (``Extractor.decide``) for what passes the gate's rules. ``speaker``: who said it (None: the user);
    ``now``: when (None: now), what its "yesterday" is read against."""
    if extractor.model is None:
        decision = gate.judge(message, speaker=speaker, now=now)
        if not decision.keep:
            return MessageWrite(decision)
        related = bank.search(searchable(message), RELATED, user_id=user_id, session_id=session_id, record_access=False)
        candidates = extractor.extract(message, reply, decision, [hit.record for hit in related], speaker=speaker,
                                       now=now)
    else:
        screened = gate.screen(message)
        if screened is not None:
            return MessageWrite(screened)
        related = bank.search(searchable(message), RELATED, user_id=user_id, session_id=session_id, record_access=False)
        shown = sorted((hit.record for hit in related), key=lambda record: record.created_at)  # as they were said
        decision, candidates = extractor.decide(message, reply, shown, speaker=speaker, now=now)
        if not decision.keep:
            return MessageWrite(decision)
    steps = [resolver.write(candidate, user_id=user_id, session_id=session_id, provenance=provenance)
             for candidate in candidates]
    return MessageWrite(decision, tuple(steps))


class Learner:
    """The agent layer's ``MessageLearner`` (bank/learning.py): what ``MemoryBank.add_messages`` runs."""

    def __init__(self, model: ChatModel | None = None, *, offline: bool = False) -> None:
        """``model``: the chat model that decides; None: the one the bank's settings configure, if any.
        ``offline``: the rules, whatever is configured."""
        if offline and model is not None:
            raise InvalidInputError("offline", "an offline learner takes no model")
        self._model, self._offline = model, offline
        self._resolved: tuple[Settings, ChatModel | None] | None = None

    def model_for(self, settings: Settings) -> ChatModel | None:
        """The model that decides for a bank with these settings (None: the offline rules)."""
        if self._offline or self._model is not None:
            return self._model
        if self._resolved is None or self._resolved[0] is not settings:  # made once per bank, not per call
            self._resolved = (settings, chat_model_from_settings(settings))
        return self._resolved[1]

    def learn(self, bank: MemoryApi, messages: Sequence[Turn], *, user_id: str,
              session_id: str | None) -> AddMessagesResult:
        settings = bank.settings
        model = self.model_for(settings)
        gate = WriteGate(model, min_chars=settings.gate_min_chars)
        extractor = Extractor(model)
        resolver = ConflictResolver(bank)
        written: dict[str, None] = {}  # ids in the order they were written, once each
        replaced: list[tuple[str, str]] = []
        skipped: list[SkippedMessage] = []
        unchanged: dict[str, None] = {}
        for index, message in enumerate(messages):
            if message.role != "user":
                continue
            source = Provenance(session_id, (message.id if message.id is not None else str(index),), message.speaker)
            write = write_message(bank, gate, extractor, resolver, message.content, _reply_to(messages, index),
                                  user_id=user_id, session_id=session_id, provenance=source,
                                  speaker=message.speaker, now=message.time)
            decision = write.decision
            if not decision.keep:
                skipped.append(SkippedMessage(index, message.content, decision.stage, decision.reason))
                continue
            if not write.steps:  # kept by the gate, yet nothing to store (a model's empty extraction)
                skipped.append(SkippedMessage(index, message.content, "extraction",
                                              f"{decision.reason}; but extraction found no statement to store"))
            for resolution, outcome in write.steps:
                if outcome.record is None:
                    if resolution.target is not None:
                        unchanged[resolution.target.id] = None
                    continue
                written[outcome.record.id] = None
                replaced.extend((old.id, outcome.record.id) for old in (outcome.replaced, *outcome.also_replaced)
                                if old is not None)
        return AddMessagesResult(written=tuple(_as_stored(bank, list(written), user_id)), replaced=tuple(replaced),
                                 skipped=tuple(skipped), unchanged=tuple(unchanged))


def _reply_to(messages: Sequence[Turn], index: int) -> str | None:
    """The assistant's reply to the user message at ``index``: the assistant messages after it, up to the next
    user message (None when there are none), as the chat shows a model's extraction the answer to the turn."""
    reply = []
    for later in messages[index + 1:]:
        if later.role == "user":
            break
        if later.role == "assistant":
            reply.append(later.content)
    return "\n".join(reply) or None


def _as_stored(bank: MemoryApi, ids: list[str], user_id: str) -> list[MemoryRecord]:
    """The written memories as they are now: one replaced by a later message of the same list says so."""
    found = []
    for memory_id in ids:
        try:
            found.append(bank.get(memory_id, user_id=user_id))
        except NotFoundError:  # forgotten meanwhile by another caller: it is no longer there to report
            continue
    return found

"""One chat turn of the memory agent: retrieve -> assemble -> answer -> write -> maybe summarise.

Three tiers: short-term (the last ``VECMEM_SHORT_TERM_TURNS`` exchanges of the session, verbatim), working
memory (the task in progress, verbatim until marked done) and long-term (the MemoryBank).

* Retrieval happens before the new message is written, so a message never retrieves itself.
* Type routing (``DEFAULT_ROUTES``; ``VECMEM_TYPE_ROUTING=off`` or ``routes=`` to change it) prefers types and
  hides none: a coding request retrieves preferences and instructions first (and those about coding whatever
  its words), small talk facts, anything else every type; a memory of another type the message is strongly
  about comes in too. Proactive recall: when the user points at the past ("上次那个方案", "as I said before",
  "what did we discuss last time?"), a second, wider retrieval of every type runs, and the most recent summaries
  come first: this session's, then those of the sessions talked in last before it (a new session too) with the
  memories learnt there, then global ones (recall.py, earlier.py).
* What goes into the prompt: the memories at or above the relevance floor (``VECMEM_RELEVANCE_FLOOR``), best
  first, as many as the long-term share holds (retrieval/budget.py); "thanks" brings none.
* Writing: every pending user turn goes through the write gate (decision logged), extraction and conflict
  resolution; with a model, the gate's judgement and the extraction are one call (learn.write_message). If that
  fails (the model, or the store refusing a write), the turn stays in short-term memory and is retried with the
  next message, once: a second failure parks it (``WRITE_ATTEMPTS``), reported in the turn's result and logged,
  so one bad turn never fails every later message, and the messages after it are written as usual. A turn
  written on a later turn than its own says so (``TurnWrite.late``). The answer is never lost to it. When the model failed to
  answer, the write step does not ask it again in the same turn: a model that is down costs one call (at most
  ``VECMEM_LLM_TIMEOUT``) and one error line a turn, and the turns wait, pending, for the next answered one.
* Model cost: every call is counted (``MeteredModel``: calls, and tokens as the budgeter counts them), per turn
  in the result and per session in the session store (``/stats``). The answer is streamed to ``on_answer`` when
  the chat asks for it.
* Every ``VECMEM_SUMMARY_EVERY`` kept turns a local summary (a session ``conclusion``), every
  ``VECMEM_GLOBAL_SUMMARY_EVERY`` local summaries a global one.
* Cold start: a user with no memories and no history gets ``TEMPLATES`` (source ``template``), whose
  importance halves with every ``TEMPLATE_HALF_LIFE`` real memories the user accumulates.
* Memory hit rate (hits.py): the share of injected memories the answers used, per session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from vecmem.agent.compress import Summarizer
from vecmem.agent.hits import HitReport, measure_hits, memory_used
from vecmem.agent.llm import ChatModel, MeteredModel, ModelUsage
from vecmem.agent.recall import recall
from vecmem.agent.writing.conflict import ConflictResolver, Written
from vecmem.agent.writing.extract import LEXICON_CONFIDENCE, Extractor
from vecmem.agent.writing.gate import GateDecision, WriteGate
from vecmem.agent.writing.learn import write_message
from vecmem.bank.api import MemoryApi
from vecmem.errors import InvalidInputError, LLMError, NotFoundError, VecmemError
from vecmem.models import Hit, MemoryRecord, PromptPack, Provenance, Turn, validate_session_id
from vecmem.retrieval.budget import DEFAULT_SYSTEM_PROMPT, TiktokenCounter
from vecmem.storage.state.sessions import SessionCounters, SessionStore, StoredTurn

__all__ = ["MemoryAgent", "TurnResult", "TurnWrite", "HitReport", "DEFAULT_ROUTES", "TEMPLATES", "memory_used"]

DEFAULT_ROUTES: Mapping[str, tuple[str, ...] | None] = {
    "coding": ("preference", "instruction"),
    "small_talk": ("fact",),
    "general": None,
}
TEMPLATES: tuple[tuple[str, str, str, float], ...] = (  # id, content, type, starting importance
    ("template-concise", "Answer concisely and lead with the conclusion. (回答简洁，先给结论)", "instruction", 0.6),
    ("template-examples", "When explaining code, include a short runnable example. (讲解代码时附上可运行的简短示例)",
     "preference", 0.5),
    ("template-clarify", "Ask one clarifying question when a request is ambiguous. (需求不明确时先问一个澄清问题)",
     "instruction", 0.4),
)
TEMPLATE_HALF_LIFE = 10
SUMMARY_IMPORTANCE = {"local": 0.5, "global": 0.6}
# A user turn's status in the session store: "pending" until its write step ran, "kept" or "dropped" after it;
# RETRY once that step failed, PARKED when it failed WRITE_ATTEMPTS times: never tried again.
WRITE_ATTEMPTS = 2
RETRY, PARKED = "retry", "parked"

logger = logging.getLogger(__name__)
# What is logged here is also in the turn's result (``TurnResult.parked``, ``notices``), which the chat prints.
# Without a handler of the application's, Python's last-resort handler would print it a second time, on stderr
# in the middle of the streamed answer: the application's own logging configuration decides where it goes.
logger.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class TurnWrite:
    """The write step for one user turn: the gate's decision and what became of each extracted memory."""

    turn_id: int
    decision: GateDecision
    written: tuple[Written, ...] = ()
    late: bool = False  # written on a later turn than its own: its write step failed once, or waited for an answer


@dataclass(frozen=True)
class TurnResult:
    message: str
    pack: PromptPack
    intent: str
    types: tuple[str, ...] | None
    proactive: bool
    answer: str | None = None  # None when no model is configured or the model failed
    answer_error: str | None = None
    writes: tuple[TurnWrite, ...] = ()
    write_error: str | None = None  # the write step stopped here; the turn stays pending, retried next turn
    parked: tuple[str, ...] = ()  # why each earlier turn given up after WRITE_ATTEMPTS failed writes was
    summaries: tuple[MemoryRecord, ...] = ()
    notices: tuple[str, ...] = field(default_factory=tuple)
    hits: HitReport | None = None
    usage: ModelUsage = field(default_factory=ModelUsage)  # this turn's model calls and tokens (all its calls)
    streamed: bool = False  # the answer went to ``on_answer`` as it was written


class MemoryAgent:
    """Memory around a chat: call ``turn(message)`` for each user message. ``sessions``: where the conversation is
    kept (turns, tasks, decisions); the bank's settings' session store (``SessionStore.open``) when not given."""

    def __init__(
        self,
        bank: MemoryApi,
        sessions: SessionStore | None = None,
        *,
        model: ChatModel | None,
        session_id: str,
        user_id: str | None = None,
        routes: Mapping[str, tuple[str, ...] | None] | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        k: int = 8,
    ) -> None:
        settings = bank.settings
        self.bank = bank
        self.sessions = sessions if sessions is not None else SessionStore.open(settings)  # the chat's own store
        self.model = None if model is None else MeteredModel(model, TiktokenCounter(settings.tokenizer).count)
        model = self.model
        self.user_id = user_id or settings.default_user
        self.session_id = validate_session_id(session_id)
        self.routes = dict(routes if routes is not None else DEFAULT_ROUTES if settings.type_routing else {})
        self.system_prompt = system_prompt
        self.k = k
        self.gate = WriteGate(model, min_chars=settings.gate_min_chars)
        self.extractor = Extractor(model)
        self.resolver = ConflictResolver(bank)
        self.summarizer = Summarizer(model)
        self.last_pack: PromptPack | None = None
        if settings.cold_start:
            self.seed_templates()

    # ------------------------------------------------------------------------------------------ the turn

    def turn(self, message: str, *, on_answer: Callable[[str], None] | None = None) -> TurnResult:
        """One turn; ``on_answer`` gets the answer in pieces as the model writes it (the chat prints them)."""
        if not isinstance(message, str) or not message.strip():
            raise InvalidInputError("message", "must not be empty")
        message = message.strip()
        intent, types, proactive, hits = self.retrieve(message)
        task = self.sessions.task(self.user_id, self.session_id)
        recent = self.sessions.recent_turns(self.user_id, self.session_id, self.bank.settings.short_term_turns)
        pack = self.bank.build_context(
            message,
            user_id=self.user_id,
            session_id=self.session_id,
            hits=hits,
            short_term=[Turn(t.role, t.content) for t in recent],
            working_memory=task.render() if task else "",
            system_prompt=self.system_prompt,
        )
        self.last_pack = pack
        turn_id = self.sessions.add_turn(self.user_id, self.session_id, "user", message)
        answer = answer_error = None
        before = self.model.usage if self.model is not None else ModelUsage()
        if self.model is not None:
            try:
                answer = self._answer(pack, on_answer)
                self.sessions.add_turn(self.user_id, self.session_id, "assistant", answer, status="done")
            except LLMError as exc:
                answer_error = str(exc)
        writes: list[TurnWrite] = []
        summaries: list[MemoryRecord] = []
        notices: list[str] = []
        parked: list[str] = []
        write_error: str | None = None
        if answer_error is None:  # a model that did not answer is not asked again this turn (module docstring)
            writes, write_error, summaries, notices, parked = self._write_pending(turn_id, answer)
        usage = self.model.usage - before if self.model is not None else ModelUsage()
        if usage.calls:
            self.sessions.record_usage(self.user_id, self.session_id, turn_id, calls=usage.calls,
                                       prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)
        hits_report = (measure_hits(self.sessions, self.user_id, self.session_id, pack, answer)
                       if answer is not None else None)
        if hits_report is not None and hits_report.notice:
            notices.append(hits_report.notice)
        return TurnResult(
            message=message,
            pack=pack,
            intent=intent,
            types=types,
            proactive=proactive,
            answer=answer,
            answer_error=answer_error,
            writes=tuple(writes),
            write_error=write_error,
            parked=tuple(parked),
            summaries=tuple(summaries),
            notices=tuple(notices),
            hits=hits_report,
            usage=usage,
            streamed=answer is not None and on_answer is not None,
        )

    def _answer(self, pack: PromptPack, on_answer: Callable[[str], None] | None) -> str:
        """The model's answer, streamed to ``on_answer`` piece by piece when given."""
        assert self.model is not None, "called only with a model"
        if on_answer is None:
            return self.model.complete(pack.messages)
        pieces = []
        for piece in self.model.stream(pack.messages):
            pieces.append(piece)
            on_answer(piece)
        answer = "".join(pieces)
        if not answer.strip():
            raise LLMError(f"the model {self.model.name} returned an empty answer")
        return answer

    def retrieve(self, message: str) -> tuple[str, tuple[str, ...] | None, bool, list[Hit]]:
        """What the message recalls (recall.py: routing that prefers types, proactive recall). Touches nothing."""
        found = recall(self.bank, message, user_id=self.user_id, session_id=self.session_id, k=self.k,
                       routes=self.routes, sessions=self.sessions)
        return found.intent, found.types, found.proactive, found.hits

    # ------------------------------------------------------------------------------------------ writing

    def _unwritten(self) -> list[StoredTurn]:
        """The user turns whose write step is still to run, oldest first: the pending ones and the one (if any)
        that failed once. The write step stops at its first failure, so that one is older than every pending
        turn and no turn is finished between them: it is among the last ``len(pending) + 1`` user turns."""
        pending = self.sessions.pending_turns(self.user_id, self.session_id)
        recent = self.sessions.recent_turns(self.user_id, self.session_id, len(pending) + 1)
        failed_once = [t for t in recent if t.role == "user" and t.status == RETRY]
        return sorted([*failed_once, *pending], key=lambda t: t.id)

    def _write_pending(
        self, current_turn: int, answer: str | None
    ) -> tuple[list[TurnWrite], str | None, list[MemoryRecord], list[str], list[str]]:
        writes: list[TurnWrite] = []
        summaries: list[MemoryRecord] = []
        notices: list[str] = []
        parked: list[str] = []
        for pending in self._unwritten():
            reply = answer if pending.id == current_turn else self.sessions.reply_to(pending.id)
            try:
                write = self._write_turn(pending.id, pending.content, reply, late=pending.id != current_turn)
            except VecmemError as exc:  # the model failed, or the store refused a write: nothing half-done is lost
                # One failure is retried with the next message, and the write step stops here, so a model that
                # is down costs one failed call a turn. A second failure parks the turn, so a turn that cannot be
                # written (a refusal that will not change) is not retried on every message for good, nor holds
                # back the messages after it: they still get their write step, each at most WRITE_ATTEMPTS calls.
                if pending.status != RETRY:
                    self.sessions.set_status(pending.id, RETRY)
                    return writes, str(exc), summaries, notices, parked
                self.sessions.set_status(pending.id, PARKED)
                excerpt = pending.content if len(pending.content) <= 60 else pending.content[:59] + "…"
                line = (f"gave up writing memories from the message \"{excerpt}\" after {WRITE_ATTEMPTS} failed "
                        f"attempts ({exc}); it stays in short-term memory but is not retried")
                logger.warning("session %s: %s", self.session_id, line)
                parked.append(line)
                notices.append(line)
                continue
            writes.append(write)
            if write.decision.keep:
                memory_ids = [w.record.id for w in write.written if w.record is not None]
                kept = self.sessions.note_kept_turn(self.user_id, self.session_id, memory_ids)
                made, notice = self._maybe_summarize(kept)
                summaries.extend(made)
                if notice:
                    notices.append(notice)
        if any(w.written for w in writes):
            self.decay_templates()
        return writes, None, summaries, notices, parked

    def _write_turn(self, turn_id: int, message: str, reply: str | None, *, late: bool = False) -> TurnWrite:
        """The write step of one user turn (learn.write_message: with a model, one call), logged."""
        write = write_message(self.bank, self.gate, self.extractor, self.resolver, message, reply,
                              user_id=self.user_id, session_id=self.session_id,
                              provenance=Provenance(self.session_id, (str(turn_id),)))  # the turn in the SessionStore
        decision = write.decision
        self.sessions.log_decision(
            self.user_id, self.session_id, text=message, kept=decision.keep, stage=decision.stage,
            memory_type=decision.memory_type, reason=decision.reason,
        )
        self.sessions.set_status(turn_id, "kept" if decision.keep else "dropped")
        return TurnWrite(turn_id, decision, tuple(written for _, written in write.steps), late)

    # ------------------------------------------------------------------------------------------ summaries

    def _maybe_summarize(self, kept_turns: int) -> tuple[list[MemoryRecord], str | None]:
        settings = self.bank.settings
        if kept_turns % settings.summary_every:
            return [], None
        notice = None
        memories = []
        for memory_id in self.sessions.window_memories(self.user_id, self.session_id):
            try:
                memories.append(self.bank.get(memory_id, user_id=self.user_id))
            except NotFoundError:  # forgotten since: it does not belong in the summary
                continue
        task = self.sessions.task(self.user_id, self.session_id)
        turns = [Turn(t.role, t.content) for t in self.sessions.recent_turns(
            self.user_id, self.session_id, settings.summary_every)]
        try:
            text = self.summarizer.local(memories, turns, task.progress() if task else None)
        except LLMError as exc:
            notice = f"the model could not summarise ({exc}); an extractive summary was stored instead"
            text = Summarizer(None).local(memories, turns, task.progress() if task else None)
        made = []
        if text:
            local = self._store_summary(text, "local")
            made.append(local)
            count = self.sessions.note_local_summary(self.user_id, self.session_id, local.id)
            if count % settings.global_summary_every == 0:
                made.extend(self._global_summary(self.sessions.counters(self.user_id, self.session_id)))
        return made, notice

    def _global_summary(self, counters: SessionCounters) -> list[MemoryRecord]:
        ids = counters.local_summaries[-self.bank.settings.global_summary_every :]
        texts = []
        for memory_id in ids:
            try:
                texts.append(self.bank.get(memory_id, user_id=self.user_id).content)
            except NotFoundError:
                continue
        try:
            text = self.summarizer.global_summary(texts)
        except LLMError:
            text = Summarizer(None).global_summary(texts)
        return [self._store_summary(text, "global")] if text else []

    def _store_summary(self, text: str, level: str) -> MemoryRecord:
        return self.bank.add(
            text,
            user_id=self.user_id,
            memory_type="conclusion",
            importance=SUMMARY_IMPORTANCE[level],
            tags=["summary", level],
            session_id=self.session_id if level == "local" else None,
            source="extracted",
            confidence=0.9 if self.model is not None else LEXICON_CONFIDENCE,
            provenance=Provenance(self.session_id),  # the session it summarises
            resolve=False,  # a summary records what was established then: it replaces nothing
        )

    # ------------------------------------------------------------------------------------------ hit rate

    # ------------------------------------------------------------------------------------------ cold start

    def seed_templates(self) -> list[MemoryRecord]:
        """Template memories for a user who has none and no conversation history."""
        if self.bank.count(user_id=self.user_id) or self.sessions.has_history(self.user_id):
            return []
        return [
            self.bank.add(content, user_id=self.user_id, memory_type=kind, importance=importance,
                          source="template", memory_id=memory_id, tags=["template"], resolve=False)
            for memory_id, content, kind, importance in TEMPLATES
        ]

    def decay_templates(self) -> None:
        """Templates fade as real memories accumulate: importance halves every TEMPLATE_HALF_LIFE of them."""
        present = {}
        for memory_id, _content, _kind, base in TEMPLATES:
            try:
                present[memory_id] = (self.bank.get(memory_id, user_id=self.user_id), base)
            except NotFoundError:
                continue
        if not present:
            return
        real = self.bank.count(user_id=self.user_id) - len(present)
        for record, base in present.values():
            target = round(max(0.05, base * 0.5 ** (real / TEMPLATE_HALF_LIFE)), 3)
            if abs(record.importance - target) >= 0.005:
                # not an edit anyone made: no revision in the template's history for every step of the decay
                self.bank.update(record.id, user_id=self.user_id, importance=target, keep_history=False)

    # ------------------------------------------------------------------------------------------ working memory

    def switch_session(self, session_id: str) -> None:
        self.session_id = validate_session_id(session_id)

    def recent(self) -> Sequence[Turn]:
        turns = self.sessions.recent_turns(self.user_id, self.session_id, self.bank.settings.short_term_turns)
        return [Turn(t.role, t.content) for t in turns]

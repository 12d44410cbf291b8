"""Extraction: the memories worth keeping from one exchange, as structured candidates.

Importance follows one rubric, model or not: explicit emphasis ("一定", "务必", "always", "remember") 1.0;
a preference or an instruction 0.7; a plain fact or a conclusion 0.5. Scope is global for lasting facts and
preferences about the user, the session for the context of the task at hand ("这次", "today", "this session").

* With a model: it sees the exchange and the user's most related existing memories under integer aliases
  ([0], [1], ...; never raw ids), and answers JSON that must pass ``schemas.WriteReply``: whether the message
  holds anything worth keeping at all (the write gate's judgement, made in the same call: one model call for
  the write side of a turn, ``decide``) and the memories, each with its own decision (ADD / UPDATE alias /
  NONE alias), which this module maps back to memory ids. A reply that fails validation raises
  ``ExtractionError``.
* Without: ``statements.py`` takes each clause (an event someone narrates among them, its date resolved:
  events.py) of the user's message that states something (never a question
  or a one-off request), rewrites it whole in the third person ("我住在杭州" -> "用户住在杭州", "I work at
  Alibaba Cloud" -> "The user works at Alibaba Cloud."), one memory per fact, tagged with the topic it names
  (``topics.keyword_tags``: "typescript", "前端", "hangzhou"), and leaves the decision to ``conflict.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from vecmem.agent import rules
from vecmem.agent.llm import ChatModel, parse_json_object
from vecmem.agent.schemas import WriteReply, validate_reply
from vecmem.agent.writing.gate import GateDecision
from vecmem.agent.writing.person import named, third_person
from vecmem.agent.writing.statements import Statement, statements
from vecmem.bank.intake import INJECTION_CONFIDENCE, INJECTION_IMPORTANCE, defused_text
from vecmem.errors import ExtractionError, LLMError
from vecmem.models import MemoryRecord
from vecmem.validation import MAX_CONTENT_CHARS, MAX_CONTEXT_CHARS

__all__ = ["Candidate", "Extractor", "rubric_importance", "LEXICON_CONFIDENCE"]

EMPHASIS_IMPORTANCE = 1.0
PREFERENCE_IMPORTANCE = 0.7
FACT_IMPORTANCE = 0.5
LEXICON_CONFIDENCE = 0.8  # cue lexicons are right most of the time, not always

EXTRACT_PROMPT = """You maintain an assistant's long-term memory about one user.
From the exchange below, extract the statements worth remembering beyond this conversation, each as one short,
self-contained sentence about the user written in the third person, in the language the user used.
Types: fact | preference | instruction (how the assistant should behave) | conclusion (something established).
Importance: 1.0 when the user stresses it (always, never, must, remember, 一定, 务必); 0.7 for a preference or an
instruction; 0.5 for a plain fact or conclusion.
Scope: "global" for lasting facts and preferences about the user; "session" for context of the current task only.
Confidence: how sure you are that the user really means it (0 to 1).
For each item decide against the existing memories (shown as [alias] (type, the day it was said) text), oldest
first, by contradiction, never by similarity:
- "UPDATE": it contradicts existing memory "target": the same person or thing and the same attribute with
  another value where one holds one value at a time (where one lives or works, an age, a time, the language of
  replies), a negation ("no longer", "不再", "not ... anymore"), or a stated change ("switched to", "改用",
  "used to X, now Y": keep the past value in the new memory's text). The newer statement wins.
- "NONE": existing memory "target" states the same claim with the same values: every number, name, identifier,
  version, command and date equal. Two commands, hosts, accounts, queries or versions that differ in one token
  are two memories, not the same one.
- "ADD" otherwise, "target": null: new information, something about another person or thing, another value of
  what holds several (likes, pets, languages, tools for different jobs), or a memory merely on the same topic.
  When unsure, ADD: a wrongly replaced memory loses what the user said.
Events are facts: what the speaker did or what happened to them (went to a support group, adopted a puppy,
我昨天去了医院), each as one short sentence naming the speaker (the "Speaker" line: "the user" in a normal chat,
else their name) and the day it happened, resolved from the "Said on" date ("yesterday" said on 2023-05-08 is
"on 7 May 2023"; 上周 is the week before that date): never "yesterday" or "last week" in a memory.
Questions, requests for help, small talk, greetings and acknowledgements are not memories: then "keep" is false,
"memories" is [] and "reason" says why in a few words; otherwise "keep" is true and "reason" says what it holds.
Reply with one JSON object only, matching this schema:
"""


@dataclass(frozen=True)
class Candidate:
    """A memory proposed by extraction. ``action`` and ``target_id`` are set only when a model decided."""

    content: str
    memory_type: str
    importance: float
    tags: tuple[str, ...]
    session_scoped: bool
    confidence: float
    action: str | None = None
    target_id: str | None = None
    context: str = ""  # the user's own words, kept so keyword search finds the memory by them


def rubric_importance(text: str, memory_type: str) -> float:
    if rules.is_emphatic(text):
        return EMPHASIS_IMPORTANCE
    return PREFERENCE_IMPORTANCE if memory_type in ("preference", "instruction") else FACT_IMPORTANCE


class Extractor:
    def __init__(self, model: ChatModel | None = None) -> None:
        self.model = model

    def extract(
        self,
        user_message: str,
        assistant_reply: str | None,
        decision: GateDecision,
        existing: Sequence[MemoryRecord],
        *,
        speaker: str | None = None,
        now: datetime | None = None,
    ) -> list[Candidate]:
        """Candidates from one exchange whose user message passed the gate (``decision.keep``), said by
        ``speaker`` (None: the user) at ``now`` (None: now)."""
        if self.model is None:
            found = self._by_rules(user_message, decision, speaker, now)
        else:
            found = self._by_model(user_message, assistant_reply, existing, speaker, now)
        if rules.looks_like_injection(user_message):
            return [_defused(candidate) for candidate in found]
        return found

    # ------------------------------------------------------------------------------------------ rules

    @staticmethod
    def _by_rules(message: str, decision: GateDecision, speaker: str | None = None,
                  now: datetime | None = None) -> list[Candidate]:
        found = [_rule_candidate(statement) for statement in statements(message, speaker=speaker, now=now)]
        if not found and decision.memory_type is not None:  # kept by a judge other than these rules
            content = third_person(message, decision.memory_type)
            content = content if speaker is None else named(content, speaker)
            found.append(_rule_candidate(Statement(content, decision.memory_type, rules.is_emphatic(message),
                                                   rules.is_task_context(message), message, decision.reason)))
        return found

    # ------------------------------------------------------------------------------------------ model

    def decide(self, message: str, reply: str | None, existing: Sequence[MemoryRecord], *,
               speaker: str | None = None, now: datetime | None = None) -> tuple[GateDecision, list[Candidate]]:
        """With a model: the gate's judgement and the extraction of a message that passed the gate's rules, in
        one call. A message it does not keep has no candidates."""
        reply_data = self._ask(message, reply, existing, speaker, now)
        kept = bool(reply_data.memories) if reply_data.keep is None else reply_data.keep and bool(reply_data.memories)
        count = len(reply_data.memories)
        reason = reply_data.reason or (f"the model extracted {count} statement{'s' if count != 1 else ''}" if kept
                                       else "the model found nothing worth remembering")
        decision = GateDecision(message, kept, "model", reason, reply_data.memories[0].type if kept else None)
        if not kept:
            return decision, []
        found = self._candidates(reply_data, message, existing)
        return decision, [_defused(c) for c in found] if rules.looks_like_injection(message) else found

    def _ask(self, message: str, reply: str | None, existing: Sequence[MemoryRecord], speaker: str | None = None,
             now: datetime | None = None) -> WriteReply:
        if self.model is None:  # callers take this path only with a model; say so plainly if one ever does not
            raise LLMError("extraction by a model was asked for, but no chat model is configured")
        shown = "\n".join(f"[{alias}] ({record.type}, {record.created_at:%Y-%m-%d}) {record.content}"
                          for alias, record in enumerate(existing))
        said = now or datetime.now(UTC)
        # the model resolves "yesterday" against this day and names the speaker: neither is in the message itself
        header = f"Said on: {said:%A, %Y-%m-%d}\nSpeaker: {speaker or 'the user'}\n"
        exchange = f"{speaker or 'User'}: {message}" + (f"\nAssistant: {reply}" if reply else "")
        prompt = [
            {"role": "system", "content": EXTRACT_PROMPT + json.dumps(WriteReply.model_json_schema())},
            {"role": "user", "content": f"Existing memories:\n{shown or '(none)'}\n\n{header}Exchange:\n"
                                        f"{exchange}"},
        ]
        answer = self.model.complete(prompt, max_tokens=800)
        return validate_reply(WriteReply, parse_json_object(answer, what="extraction"), what="extraction")

    def _by_model(
        self, message: str, reply: str | None, existing: Sequence[MemoryRecord], speaker: str | None = None,
        now: datetime | None = None,
    ) -> list[Candidate]:
        return self._candidates(self._ask(message, reply, existing, speaker, now), message, existing)

    @staticmethod
    def _candidates(parsed: WriteReply, message: str, existing: Sequence[MemoryRecord]) -> list[Candidate]:
        candidates = []
        for index, item in enumerate(parsed.memories):
            target_id = None
            if item.target is not None and item.action != "ADD":
                if not 0 <= item.target < len(existing):
                    raise ExtractionError(
                        f"the model's extraction failed validation at 'memories.{index}.target': alias "
                        f"{item.target} is not one of the {len(existing)} memories shown"
                    )
                target_id = existing[item.target].id
            candidates.append(
                Candidate(
                    content=item.content,
                    memory_type=item.type,
                    importance=item.importance,
                    tags=tuple(dict.fromkeys(tag.strip() for tag in item.tags if tag.strip()))[:8],
                    session_scoped=item.scope == "session",
                    confidence=item.confidence,
                    action=item.action,
                    target_id=target_id,
                    context=message,
                )
            )
        return candidates


def _defused(candidate: Candidate) -> Candidate:
    """A candidate from a message that tries to override the assistant's instructions: at most a low-importance,
    low-confidence fact of this session recording what the user said, whatever a model made of it."""
    return replace(candidate, content=defused_text(candidate.content), memory_type="fact", importance=min(candidate.importance,
                   INJECTION_IMPORTANCE), session_scoped=True, confidence=min(candidate.confidence, INJECTION_CONFIDENCE),
                   # it may add what the user said, never replace a memory it did not write
                   action="ADD" if candidate.action == "UPDATE" else candidate.action,
                   target_id=None if candidate.action == "UPDATE" else candidate.target_id)


def _rule_candidate(statement: Statement) -> Candidate:
    importance = EMPHASIS_IMPORTANCE if statement.emphatic else rubric_importance("", statement.memory_type)
    content = statement.content
    if len(content) > MAX_CONTENT_CHARS:  # one endless clause: a memory is a statement, the bank refuses more
        content = content[: MAX_CONTENT_CHARS - 1] + "…"
    return Candidate(
        content=content,
        memory_type=statement.memory_type,
        importance=importance,
        tags=tuple(rules.keyword_tags(statement.content)),
        session_scoped=statement.session_scoped,
        confidence=LEXICON_CONFIDENCE,
        context=statement.said[:MAX_CONTEXT_CHARS] if statement.said != content else "",
    )

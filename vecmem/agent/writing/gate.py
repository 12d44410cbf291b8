"""The write gate: what is worth remembering at all.

Stage 1, rules (always): pure filler (你好, 谢谢, 嗯嗯, 好的, ok, thanks, lol, ...), only punctuation and emoji,
or fewer than ``min_chars`` characters without a statement holding information (length counts information:
"我住在杭州" is five characters and kept, "我是猫" is not; ``rules.content_problem``): dropped. Stage 2,
judgement of what passes: does it hold a fact (an event someone narrates among them: "I went to a support group
yesterday", events.py), a preference, an instruction or a conclusion? The chat model
decides when one is configured, in the same call as the extraction (``Extractor.decide``: one model call for
the write side of a turn); otherwise the clauses that ``statements.py`` would extract do (questions and one-off
requests are never kept), with the Chinese and English cue lexicons of ``vecmem.rules``. Every decision carries
its stage and reason; the agent logs them so they can be inspected (``/log`` in the chat, ``vecmem decisions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from vecmem.agent import rules
from vecmem.agent.llm import ChatModel, parse_json_object
from vecmem.agent.schemas import GateReply, validate_reply
from vecmem.agent.writing.statements import statements, why_not

__all__ = ["GateDecision", "WriteGate"]

GATE_PROMPT = """You are the write gate of an assistant's long-term memory.
Decide whether the user's message holds something worth remembering beyond this conversation:
- fact: about the user, their work, projects, environment or situation, and events they tell (what they did,
  went to, bought, adopted; yesterday, last week, in 2021);
- preference: what the user likes, dislikes or chooses (tools, languages, styles);
- instruction: how the assistant should behave from now on;
- conclusion: something the user and assistant established or decided.
Questions, requests for help, small talk, greetings and acknowledgements are NOT memories.
Reply with one JSON object and nothing else: {"keep": true|false, "type": "fact"|"preference"|"instruction"|"conclusion"|null, "reason": "<a few words>"}"""


@dataclass(frozen=True)
class GateDecision:
    """Whether a message passes the gate, at which stage it was decided, and why."""

    text: str
    keep: bool
    stage: str  # "rules", "lexicon" or "model"
    reason: str
    memory_type: str | None = None


def _states_something(text: str) -> bool:
    return bool(statements(text))


class WriteGate:
    def __init__(self, model: ChatModel | None = None, *, min_chars: int = 6) -> None:
        self.model = model
        self.min_chars = min_chars

    def screen(self, text: str) -> GateDecision | None:
        """Stage 1 alone, the rules: a decision to drop the message, or None when it goes on to be judged."""
        problem = rules.content_problem(text, min_chars=self.min_chars, is_statement=_states_something)
        return None if problem is None else GateDecision(text, False, "rules", problem)

    def judge(self, text: str, *, speaker: str | None = None, now: datetime | None = None) -> GateDecision:
        """Rules first, then the model or the lexicons. Model failures raise LLMError/ExtractionError. (The
        memory agent asks a model for the decision and the extraction in one call instead: extract.py.)
        ``speaker`` and ``now``: who said the message and when, as extraction is told (statements.py), so the two
        never disagree."""
        screened = self.screen(text)
        if screened is not None:
            return screened
        if self.model is None:  # the clauses extraction would keep: the gate and extraction never disagree
            found = statements(text, speaker=speaker, now=now)
            if not found:
                return GateDecision(text, False, "lexicon", why_not(text, now))
            more = f" (+{len(found) - 1} more statement{'s' if len(found) > 2 else ''})" if len(found) > 1 else ""
            return GateDecision(text, True, "lexicon", found[0].reason + more, found[0].memory_type)
        reply = self.model.complete(
            [{"role": "system", "content": GATE_PROMPT}, {"role": "user", "content": text}], max_tokens=200
        )
        verdict = validate_reply(GateReply, parse_json_object(reply, what="gate decision"), what="gate decision")
        return GateDecision(text, verdict.keep, "model", verdict.reason, verdict.type if verdict.keep else None)

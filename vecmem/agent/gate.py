"""The write gate: what is worth remembering at all.

Stage 1, rules (always): fewer than ``min_chars`` characters, pure filler (你好, 谢谢, 嗯嗯, 好的, ok, thanks,
lol, ...), or only punctuation and emoji: dropped. Stage 2, judgement of what passes: does it hold a fact,
a preference, an instruction or a conclusion? The chat model decides when one is configured; otherwise the
Chinese and English cue lexicons of ``vecmem.rules`` do. Every decision carries its stage and reason; the
agent logs them so they can be inspected (``/log`` in the chat, ``vecmem decisions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from vecmem.agent import rules
from vecmem.agent.llm import ChatModel, parse_json_object
from vecmem.agent.schemas import GateReply, validate_reply

__all__ = ["GateDecision", "WriteGate"]

GATE_PROMPT = """You are the write gate of an assistant's long-term memory.
Decide whether the user's message holds something worth remembering beyond this conversation:
- fact: about the user, their work, projects, environment or situation;
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


class WriteGate:
    def __init__(self, model: ChatModel | None = None, *, min_chars: int = 6) -> None:
        self.model = model
        self.min_chars = min_chars

    def judge(self, text: str) -> GateDecision:
        """Rules first, then the model or the lexicons. Model failures raise LLMError/ExtractionError."""
        problem = rules.content_problem(text, min_chars=self.min_chars)
        if problem is not None:
            return GateDecision(text, False, "rules", problem)
        if self.model is None:
            found = rules.classify(text)
            return GateDecision(text, found.memory_type is not None, "lexicon", found.reason, found.memory_type)
        reply = self.model.complete(
            [{"role": "system", "content": GATE_PROMPT}, {"role": "user", "content": text}], max_tokens=200
        )
        verdict = validate_reply(GateReply, parse_json_object(reply, what="gate decision"), what="gate decision")
        return GateDecision(text, verdict.keep, "model", verdict.reason, verdict.type if verdict.keep else None)

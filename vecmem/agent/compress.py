"""Hierarchical summaries: local summaries of a session, and global summaries of local ones.

A local summary (every ``VECMEM_SUMMARY_EVERY`` kept turns) is at most 100 units long, a unit being a Chinese
character or another word (``rules.text_units``). It keeps stated preferences and constraints, confirmed
facts, and the unfinished task with its progress; it drops greetings and acknowledgements (the gate never
kept them), repeated confirmations (duplicates) and overturned conclusions (superseded memories).

* With a model: it writes the summary from the turns and memories of the window (JSON ``{"summary": ...}``).
* Without: an extractive summary of the statements the gate kept in the window, constraints first.

The task in progress is never compressed away: it stays verbatim in working memory, and the summary names it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vecmem.agent import rules
from vecmem.agent.llm import ChatModel, parse_json_object
from vecmem.agent.schemas import SummaryReply, validate_reply
from vecmem.errors import LLMError
from vecmem.models import MemoryRecord, Turn
from vecmem.text import CJK_RUN

__all__ = ["Summarizer", "MAX_SUMMARY_UNITS"]

MAX_SUMMARY_UNITS = 100
_TYPE_ORDER = {"instruction": 0, "preference": 1, "fact": 2, "conclusion": 3}
_CJK = CJK_RUN  # vecmem/text.py's one definition of Chinese text: a search finds any Han character

LOCAL_PROMPT = """Summarise this stretch of a conversation for the assistant's long-term memory in at most
100 words (or 100 Chinese characters), in the language the user mostly used.
Keep: the user's stated preferences and constraints, confirmed facts, unfinished tasks and their progress.
Drop: greetings, thanks, repeated confirmations, and intermediate conclusions that were later overturned.
Reply with one JSON object only: {"summary": "<the summary>"}"""

GLOBAL_PROMPT = """Merge these session summaries into one summary of what matters about the user, in at most
100 words (or 100 Chinese characters). Keep lasting preferences, constraints and facts, and unfinished work;
where summaries disagree the later one wins. Reply with one JSON object only: {"summary": "<the summary>"}"""


def _join(parts: Sequence[str]) -> str:
    chinese = sum(bool(_CJK.search(part)) for part in parts) * 2 >= len(parts)
    separator = "；" if chinese else "; "
    return separator.join(part.strip().rstrip("。.;；") for part in parts if part.strip())


def _fit(text: str) -> str:
    if rules.text_units(text) <= MAX_SUMMARY_UNITS:
        return text
    return rules.cut_to_units(text, MAX_SUMMARY_UNITS - 1) + "…"


class Summarizer:
    def __init__(self, model: ChatModel | None = None) -> None:
        self.model = model

    def local(self, memories: Sequence[MemoryRecord], turns: Sequence[Turn], task: str | None) -> str:
        """One session window: the memories the gate kept in it (superseded ones left out), and the turns."""
        live = [m for m in memories if not m.superseded]
        if self.model is not None:
            shown = "\n".join(f"{turn.role}: {turn.content}" for turn in turns)
            kept = "\n".join(f"- ({m.type}) {m.content}" for m in live)
            task_line = f"\nUnfinished task: {task}" if task else ""
            return self._ask(LOCAL_PROMPT, f"Conversation:\n{shown}\n\nKept memories:\n{kept or '-'}{task_line}")
        ordered = sorted(live, key=lambda m: (_TYPE_ORDER[m.type], m.created_at))
        unique = list(dict.fromkeys(m.content for m in ordered))
        if task:
            unique.append(("未完成任务：" if _CJK.search(task) else "Unfinished task: ") + task)
        return _fit(_join(unique))

    def global_summary(self, summaries: Sequence[str]) -> str:
        """Several local summaries, older first, as one."""
        if self.model is not None:
            numbered = "\n".join(f"{index}. {text}" for index, text in enumerate(summaries, start=1))
            return self._ask(GLOBAL_PROMPT, numbered)
        clauses: list[str] = []
        for text in reversed(summaries):  # newest first, so the later statement survives the cut
            for clause in re.split(r"[；;]\s*", text):
                clause = clause.strip().rstrip("…")
                if clause and clause not in clauses:
                    clauses.append(clause)
        return _fit(_join(clauses))

    def _ask(self, instructions: str, material: str) -> str:
        if self.model is None:  # callers take this path only with a model; say so plainly if one ever does not
            raise LLMError("a summary by a model was asked for, but no chat model is configured")
        reply = self.model.complete(
            [{"role": "system", "content": instructions}, {"role": "user", "content": material}], max_tokens=400
        )
        summary = validate_reply(SummaryReply, parse_json_object(reply, what="summary"), what="summary").summary
        return _fit(summary)

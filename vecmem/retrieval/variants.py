"""Spelling variants on the keyword side: a Latin-script query word that none of the user's memories holds
(a name spelled another way, "Muhammad" for "Mohammed", or a typo, "restarant") is also looked for as the
index's words spelled nearly like it, at a lower weight than the word itself.

Which words: a query word of ASCII letters only (never digits, never Chinese: jieba words and bigrams are left
as they are), at least ``MIN_LETTERS`` long, whose token no memory holds (document frequency 0 in the BM25 model
and absent from the delta). A word the index holds is never widened: the user wrote it that way somewhere, and
the memories that hold it are what the query asks about.

Which variants: index tokens (ASCII letters, at least ``MIN_LETTERS``) within a restricted Damerau-Levenshtein
distance (substitutions, insertions, deletions, adjacent transpositions) of 1, or of 2 for words of 8 letters and
more. The index holds Snowball stems, not words as written, and the stemmer cuts names unevenly: "mohammed" ->
"moham" but "muhammad" -> "muhammad", "restaurant" -> "restaur". So a stem is compared three ways: with the query
word's stem, with the query word as written, and (a stem cut by the stemmer) with the query word's first letters
of the stem's length, when the word is 1 to 3 letters longer and the stem at least 5: "muhammad" reaches "moham"
through "muham". What no edit-distance rule joins: Aqib / Akim (2 edits in 4 letters), Sean / Shaun, Steven /
Stephen (2 in 6 or 7), Jeffrey / Geoffrey (3): transliterations a rule this strict cannot tell from other
names. The third comparison also joins a word to a stem it merely begins with ("planet" -> "plane"): the price of
reaching stems the stemmer cut; such a join weighs half and only for a word no memory holds.

How they count: each variant is scored by BM25 with its own statistics in a part of its own, weighted
``VARIANT_WEIGHT`` times its query part, and added to the query's scores without counting in the parts' weight
sum (keyword.py), so a variant never dilutes the exact matches and a memory holding the word as asked outranks
one holding only a variant (other things equal). At most ``MAX_VARIANTS`` per word, nearest first.

Finding them: the vocabulary is keyed by the first ``KEY_LETTERS`` letters of each token and every string one
deletion from them (SymSpell's deletion neighbourhood): two words within one edit in their first letters share a
key, and only the few tokens sharing a key are compared in full. The keys are built lazily, once per index
generation (the BM25 model's vocabulary, on the first query with a word the index lacks) and extended with the
delta's tokens as memories are added; a query whose words the index all holds costs a few dictionary lookups.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vecmem.retrieval.keyword import IndexSnapshot

__all__ = ["MAX_VARIANTS", "MIN_LETTERS", "NO_VARIANTS", "VARIANT_WEIGHT", "Variants", "edit_distance",
           "spelling_variants", "variants_of"]

VARIANT_WEIGHT = 0.5  # a variant counts half as much as the word itself: an exact match always weighs more
MIN_LETTERS = 4  # shorter words have too many neighbours one edit away (cat, car, cap, can) to guess among
MAX_VARIANTS = 5
KEY_LETTERS = 5
LONG_WORD = 8  # from this length on, two edits (Mohammed / Muhammad)
MAX_CUT = 3  # how many letters longer than a stem a query word may be for the third comparison
_LETTERS = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Variants:
    """The keyword side's extra parts for one query, and the (word as written, variant token) pairs that say
    why a memory was found (a hit's matched terms show "Muhammad" for a memory that says "Mohammed")."""

    parts: tuple[tuple[tuple[str, ...], float], ...] = ()
    terms: tuple[tuple[str, str], ...] = ()


NO_VARIANTS = Variants()


def edit_distance(a: str, b: str, bound: int) -> int:
    """Restricted Damerau-Levenshtein distance (optimal string alignment) of ``a`` and ``b``, or ``bound + 1``
    as soon as it is known to exceed ``bound``."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    before: list[int] | None = None
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if before is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                value = min(value, before[j - 2] + 1)
            current[j] = value
        if min(current) > bound:
            return bound + 1
        before, previous = previous, current
    return previous[-1] if previous[-1] <= bound else bound + 1


def _allowed(length: int) -> int:
    return 2 if length >= LONG_WORD else 1


def _keys(word: str) -> set[str]:
    head = word[:KEY_LETTERS]
    return {head, *(head[:i] + head[i + 1:] for i in range(len(head)))}


def _eligible(word: str) -> bool:
    return len(word) >= MIN_LETTERS and _LETTERS.fullmatch(word) is not None


def distance(written: str, stem: str, token: str) -> int | None:
    """How far an index token is from a query word (``written`` lowercased, and its ``stem``) by the three
    comparisons of the module docstring, or None when none of them reaches it."""
    pairs = [(stem, token), (written, token)]
    if len(token) >= KEY_LETTERS and 0 < len(written) - len(token) <= MAX_CUT:
        pairs.append((written[: len(token)], token))
    found = None
    for a, b in pairs:
        limit = _allowed(min(len(a), len(b)))
        if (d := edit_distance(a, b, limit)) <= limit and (found is None or d < found):
            found = d
    return found


class _Vocabulary:
    """One index generation's tokens that variants may be (ASCII letters, at least MIN_LETTERS), keyed for
    lookup; the keys are made on the first lookup, and extended by the delta's tokens as they come."""

    def __init__(self, generation: int, main: Iterable[str]) -> None:
        self.generation = generation
        self.lock = threading.Lock()
        self._main = main
        self.delta: set[str] = set()  # tokens of the delta's memories that the main model does not hold
        self.counted = 0  # the delta slots read so far
        self._keys: dict[str, list[str]] | None = None

    def extend(self, snapshot: IndexSnapshot) -> None:
        """Read the delta slots this vocabulary has not seen yet (caller holds the lock). Slots are only appended
        to within a generation, so a later snapshot's delta begins with an earlier one's."""
        df, tokens = snapshot._df, snapshot._tokens  # the snapshot's own statistics (keyword.py)
        for slot in range(max(self.counted, snapshot.main_size), snapshot.count):
            for token in tokens[slot]:
                if token not in df and token not in self.delta:
                    self.delta.add(token)
                    if self._keys is not None and _eligible(token):
                        self._add(token)
        self.counted = max(self.counted, snapshot.count)

    def candidates(self, word: str) -> set[str]:
        """The tokens sharing a key with ``word`` (caller holds the lock)."""
        if self._keys is None:
            self._keys = {}
            for token in [*self._main, *self.delta]:
                if _eligible(token):
                    self._add(token)
        return {token for key in _keys(word) for token in self._keys.get(key, ())}

    def _add(self, token: str) -> None:
        assert self._keys is not None
        for key in _keys(token):
            self._keys.setdefault(key, []).append(token)


_vocabularies: weakref.WeakKeyDictionary[object, _Vocabulary] = weakref.WeakKeyDictionary()
_vocabularies_lock = threading.Lock()


def _vocabulary(snapshot: IndexSnapshot) -> _Vocabulary:
    """The vocabulary of the snapshot's index and generation, made or brought up to the snapshot's slots. A
    snapshot older than the vocabulary sees a delta a little larger than its own: a token it does not hold may
    then be a candidate (it scores 0) or keep a word from being widened; neither changes what it holds."""
    with _vocabularies_lock:
        vocabulary = _vocabularies.get(snapshot._index)
        if vocabulary is None or vocabulary.generation != snapshot.generation:
            vocabulary = _Vocabulary(snapshot.generation, snapshot._df.keys())
            _vocabularies[snapshot._index] = vocabulary
    with vocabulary.lock:
        vocabulary.extend(snapshot)
    return vocabulary


def variants_of(snapshot: IndexSnapshot, written: str, stem: str) -> list[str]:
    """The index tokens spelled nearly like a query word the index does not hold, nearest first (at most
    MAX_VARIANTS); none for a word it holds or one that is not eligible (module docstring)."""
    written = written.lower()
    if not (_eligible(written) and _LETTERS.fullmatch(stem)) or snapshot._df.get(stem, 0) > 0:
        return []
    vocabulary = _vocabulary(snapshot)
    with vocabulary.lock:
        if stem in vocabulary.delta:
            return []
        candidates = vocabulary.candidates(written) | vocabulary.candidates(stem)
    ranked = sorted((d, token) for token in candidates if (d := distance(written, stem, token)) is not None)
    return [token for _, token in ranked[:MAX_VARIANTS]]


def spelling_variants(snapshot: IndexSnapshot, worded: Sequence[Sequence[tuple[str, str]]],
                      parts: Sequence[tuple[Sequence[str], float]]) -> Variants:
    """The variant parts of a query: for each query part (``worded``: its (written, token) terms, ``parts``: the
    keyword side's (tokens, weight) of the same parts), the variants of its words the index lacks, in one part
    weighing VARIANT_WEIGHT times the part's weight."""
    found_parts: list[tuple[tuple[str, ...], float]] = []
    terms: list[tuple[str, str]] = []
    for words, (_, weight) in zip(worded, parts, strict=True):
        tokens: list[str] = []
        for written, stem in words:
            for variant in variants_of(snapshot, written, stem):
                tokens.append(variant)
                terms.append((written, variant))
        if tokens and weight > 0:
            found_parts.append((tuple(tokens), VARIANT_WEIGHT * weight))
    return Variants(tuple(found_parts), tuple(terms))

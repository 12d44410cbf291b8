"""Spelling variants of names on the keyword side: a name in a query that none of the user's memories holds
("Muhammad" where the memories say "Mohammed") is also looked for as the index's words spelled nearly like it,
at a lower weight than the name itself.

Which words: a query word written as a name (a capital letter, not the query's first word), of ASCII letters
only (never digits, never Chinese: jieba words and bigrams are left as they are), at least ``MIN_LETTERS`` long,
whose token no memory holds (document frequency 0 in the BM25 model and absent from the delta). A word the index
holds is never widened: the user wrote it that way somewhere. Lower-case words (typos of common words) are left
alone: tried on MADial-Bench en (83 memories, so most query words are absent), one-edit neighbours of absent
common words were nearly all other words (wonder -> wander, attention -> attend, protect -> project, particularly
-> parti; none a typo), where the name rule joins very few (the counts: docs/benchmarks.md, *Why retrieval is
built as it is*).

Which variants, against the index's Snowball stems (which cut names unevenly: "mohammed" -> "moham", "muhammad"
-> "muhammad"): tokens of ASCII letters beginning with the same letter, and either within one restricted
Damerau-Levenshtein edit (substitution, insertion, deletion, adjacent transposition; two from ``LONG_WORD``
letters) of the word or its stem, both at least ``EDIT_LETTERS`` long; or equal to it but for up to
``MAX_VOWEL_CHANGES`` vowels, where either side may be cut by the stemmer (up to ``MAX_CUT`` letters):
"muhammad" reaches "moham" through "muham", "Mohammed" reaches "muhammad". Transliterations mostly differ in
vowels; a consonant changed in a short name is another name. What these rules cannot join: Aqib / Akim (two
consonants of four letters), Sean / Shaun, Steven / Stephen, Jeffrey / Geoffrey, Katherine / Catherine (the
first letter), and any name written in lower case.

How they count: the variants of a query part are scored by BM25, each with its own statistics, in a part of
their own weighing ``VARIANT_WEIGHT`` times the query part, added to the query's scores without counting in the
parts' weight sum or the keyword scale (keyword.py): a variant never dilutes the exact matches, and a memory
holding the name as asked outranks one holding only a variant (other things equal). At most ``MAX_VARIANTS``
per word, nearest first.

Finding them: the vocabulary is keyed by the first ``KEY_LETTERS`` letters of each token and every string one
deletion from them (SymSpell's deletion neighbourhood): two words within one edit in their first letters share a
key, and only the few tokens sharing a key are compared in full. The keys are built lazily, once per index
generation (the BM25 model's vocabulary, on the first query with a name the index lacks; tens of milliseconds
for a few thousand memories) and extended with the delta's tokens as memories are added; a query whose names
the index all holds costs a few dictionary lookups.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vecmem.retrieval.index.keyword import IndexSnapshot
    from vecmem.retrieval.query.parsed import ParsedQuery

__all__ = ["MAX_VARIANTS", "MIN_LETTERS", "NO_VARIANTS", "VARIANT_WEIGHT", "Variants", "edit_distance",
           "spelling_variants", "variants_of"]

VARIANT_WEIGHT = 0.5  # a variant counts half as much as the word itself: an exact match always weighs more
MIN_LETTERS = 5  # shorter words have too many neighbours one edit away (want, went; hole, home, hope)
MAX_VARIANTS = 5
KEY_LETTERS = 5
LONG_WORD = 9  # from this length on, two edits
EDIT_LETTERS = 6  # words this long or longer may differ by an edit; shorter ones only as names, by vowels
MAX_VOWEL_CHANGES = 2  # Mohammed / Muhammad
_VOWELS = frozenset("aeiouy")
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
    """The word's first letters, each string one deletion from them, and (for vowel changes anywhere in them)
    the first letters with every vowel as "*"."""
    head = word[:KEY_LETTERS]
    return {head, *(head[:i] + head[i + 1:] for i in range(len(head))),
            "".join("*" if letter in _VOWELS else letter for letter in head)}


def _eligible(word: str) -> bool:
    return len(word) >= MIN_LETTERS and _LETTERS.fullmatch(word) is not None


def _vowel_changes(a: str, b: str) -> int | None:
    """How many letters of two strings of one length differ, when each difference is one vowel for another;
    else None."""
    if len(a) != len(b):
        return None
    changed = 0
    for x, y in zip(a, b, strict=True):
        if x != y:
            if x not in _VOWELS or y not in _VOWELS:
                return None
            changed += 1
    return changed


def distance(written: str, stem: str, token: str, *, named: bool) -> int | None:
    """How far an index token is from a query word (``written`` lowercased, and its ``stem``) by the comparisons
    of the module docstring (``named``: the query writes the word as a name), or None when none reaches it."""
    if token[0] != written[0]:
        return None
    found: list[int] = []
    for a in {stem, written}:  # the words whole: one edit (two from LONG_WORD letters)
        limit = _allowed(min(len(a), len(token)))
        if min(len(a), len(token)) >= EDIT_LETTERS and (d := edit_distance(a, token, limit)) <= limit:
            found.append(d)
    cuts = [(written, token), (stem, token), (token, stem)]  # either side cut by the stemmer ("moham")
    for longer, shorter in [(a, b) for a, b in cuts if 0 < len(a) - len(b) <= MAX_CUT] + [(written, token), (stem, token)]:
        if len(shorter) < MIN_LETTERS:
            continue
        head = longer[: len(shorter)]
        changes = _vowel_changes(head, shorter) if named else (0 if head == shorter else None)
        if changes is not None and changes <= MAX_VOWEL_CHANGES:
            found.append(changes)
    return min(found, default=None)


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


def variants_of(snapshot: IndexSnapshot, written: str, stem: str, *, named: bool = True) -> list[str]:
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
    ranked = sorted((d, token) for token in candidates if (d := distance(written, stem, token, named=named)) is not None)
    return [token for _, token in ranked[:MAX_VARIANTS]]


def spelling_variants(snapshot: IndexSnapshot, query: ParsedQuery) -> Variants:
    """The variant parts of a query: for each of its parts, the variants of the words it writes as names
    (``ParsedQuery.names``) that the index lacks, in one part weighing VARIANT_WEIGHT times the part's weight on
    the keyword side."""
    found_parts: list[tuple[tuple[str, ...], float]] = []
    terms: list[tuple[str, str]] = []
    for names, (_, weight) in zip(query.names, query.keyword_parts, strict=True):
        tokens: list[str] = []
        for written, stem in names:
            for variant in variants_of(snapshot, written, stem):
                tokens.append(variant)
                terms.append((written, variant))
        if tokens and weight > 0:
            found_parts.append((tuple(tokens), VARIANT_WEIGHT * weight))
    return Variants(tuple(found_parts), tuple(terms))

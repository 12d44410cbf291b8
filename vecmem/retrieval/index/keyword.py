"""The keyword side of hybrid retrieval: BM25 (the ``bm25s`` library) over one user's memories, and the
catalogue every search filters and pre-ranks by.

Scores are BM25 (k1 = 1.2, b = 0.5) of the tokens ``tokenize.py`` makes. The index keeps a little metadata per
memory (scope, type, superseded, the reranker's fields) so keyword candidates pass exactly the same isolation
filter as the dense side, and candidates are ranked before any record is fetched.

Threads: a search reads one ``IndexSnapshot``, never the index itself. Writers edit the index under its lock;
the first edit after a snapshot was taken copies the slot map and the per-slot arrays (a few ms at 100,000
memories, once per edit call, so once per batch), so a snapshot never changes under a search in progress. The
slot -> id and slot -> tokens lists are only appended to between rebuilds, and a snapshot reads only the slots
it counted; a rebuild makes new ones.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.retrieval.index.columns import TYPE_NAMES as _TYPE_NAMES
from vecmem.retrieval.index.columns import TokenTable
from vecmem.retrieval.index.views import FilterView, KeywordResult
from vecmem.retrieval.query.tokenize import memory_tokens, recency_weights, tokenize, warm_up
from vecmem.retrieval.relevance import idf, keyword_scale

# the tokenizer's and the views' names stay importable from here, where they lived before
__all__ = ["FilterView", "IndexSnapshot", "IndexState", "IndexedMemory", "KeywordIndex", "KeywordResult",
           "memory_tokens", "recency_weights", "tokenize", "warm_up"]

K1 = 1.2
B = 0.5
_SLOT_ARRAYS = ("_alive", "_superseded", "_type", "_scope", "_importance", "_created", "_last")
_TYPE_CODES = {name: code for code, name in enumerate(_TYPE_NAMES)}


@dataclass(frozen=True)
class IndexedMemory:
    """What the index keeps per memory: its tokens, what the isolation filter looks at, and what the reranker
    needs, so a search can rank candidates before fetching any of them."""

    tokens: tuple[str, ...]
    scope: str
    type: str
    superseded: bool  # not retrievable: superseded, archived or pending
    importance: float = 0.5  # as the reranker weighs it: importance × confidence (rank.py)
    created: float = 0.0  # epoch seconds
    last_accessed: float = 0.0  # as stored in Chroma (0: never); access.py holds the running value

    @classmethod
    def of(cls, record: MemoryRecord, tokens: Sequence[str]) -> IndexedMemory:
        last = record.last_accessed.timestamp() if record.last_accessed is not None else 0.0
        # "superseded" here means "not retrievable": archived and pending memories are left out the same way
        return cls(tuple(tokens), record.scope, record.type, not record.retrievable,
                   record.importance * record.confidence, record.created_at.timestamp(), last)


@dataclass(frozen=True)
class IndexState:
    """Everything an index holds at one moment as plain values, for persisted.py to save and load. Dead slots
    are kept: the BM25 model still scores them (masked out) until the next merge, so keeping them keeps every
    score exactly as it was."""

    ids: list[str]  # slot -> memory id
    tokens: list[tuple[str, ...]] | TokenTable  # slot -> tokens: at least len(ids) of them
    arrays: dict[str, np.ndarray]  # each of _SLOT_ARRAYS, len(ids) long
    scopes: list[str]  # scope code -> scope ("global" is 0)
    main_size: int  # the first main_size slots are the BM25 model's documents, the rest the delta
    model: Any  # the bm25s model, or a LoadedBM25 (columns.py); None when main is empty
    df: Mapping[str, int]  # main's document frequencies, which the delta is scored with (never edited)
    avgdl: float
    k1: float = K1
    b: float = B


class IndexSnapshot:
    """The index as it stood at one moment: nothing here is changed afterwards (see the module docstring)."""

    def __init__(self, index: KeywordIndex) -> None:  # built under the index's lock, which then marks it shared
        self.generation = index._generation
        self.count = len(index._ids)  # slots in use; only these of the shared lists belong to the snapshot
        self._ids = index._ids
        self._tokens = index._tokens
        self.slots: Mapping[str, int] = index._slot  # live memory id -> slot (every slot below count)
        self.alive, self.superseded, self.types, self.scopes, self.importance, self.created, self.last = (
            getattr(index, name) for name in _SLOT_ARRAYS
        )
        self._scope_codes: Mapping[str, int] = index._scope_codes
        self._index = index
        self._id_array: np.ndarray | None = None
        self.main_size = index._main_size
        self._model = index._model
        self._df = index._df
        self._avgdl = index._avgdl
        self.k1, self.b = index.k1, index.b

    def state(self) -> IndexState:
        """This moment of the index as plain values (nothing is copied that a later edit could change)."""
        count, codes = self.count, self._scope_codes
        return IndexState(self._ids[:count], self._tokens, {name: array[:count] for name, array in zip(
            _SLOT_ARRAYS, (self.alive, self.superseded, self.types, self.scopes, self.importance, self.created,
                           self.last), strict=True)}, sorted(codes, key=codes.__getitem__), self.main_size,
            self._model, self._df, self._avgdl, self.k1, self.b)

    @property
    def id_array(self) -> np.ndarray:
        """Slot -> id as a numpy object array, to pick visible ids by mask: made only when a search asks (some
        ms at 100,000 memories), and shared with later snapshots until memories are added."""
        if self._id_array is None:
            self._id_array = self._index._id_array_of(self.generation, self._ids, self.count)
        return self._id_array

    def view(self, memory_filter: MemoryFilter) -> FilterView:
        """Which memories of this snapshot the filter lets through, for one search."""
        count = self.count
        mask = self.alive[:count].copy()
        sizes = np.bincount(self.types[:count][mask], minlength=len(_TYPE_NAMES))
        if not memory_filter.include_superseded:
            mask &= ~self.superseded[:count]
        if memory_filter.types is not None:
            allowed = np.zeros(len(_TYPE_NAMES), dtype=bool)
            allowed[[_TYPE_CODES[t] for t in (memory_filter.types or _TYPE_NAMES)]] = True
            mask &= allowed[self.types[:count]]
        if memory_filter.scopes is not None:
            in_scope = np.zeros(count, dtype=bool)
            for scope in memory_filter.scopes:
                code = self._scope_codes.get(scope)
                if code is not None:
                    in_scope |= self.scopes[:count] == code
            mask &= in_scope
        return FilterView(self, mask, memory_filter, {name: int(sizes[code]) for code, name in enumerate(_TYPE_NAMES)})

    def search(self, query_parts: Sequence[tuple[Sequence[str], float]], view: FilterView, top_n: int,
               variants: Sequence[tuple[Sequence[str], float]] = ()) -> KeywordResult:
        """BM25 of the memories the view lets through; ``query_parts`` are (tokens, weight) pairs whose scores
        are averaged by weight: one part for a plain query, one per utterance for a dialogue. ``variants``:
        parts added at their weight outside that average (spelling variants, variants.py)."""
        count = self.count
        total = np.zeros(count, dtype=np.float64)
        weight_sum = sum(weight for _, weight in query_parts)
        for tokens, weight in [*query_parts, *variants]:
            if not tokens or weight <= 0:
                continue
            if self._model is not None and self.main_size:
                total[: self.main_size] += weight * self._model.get_scores(list(tokens))
            if count > self.main_size:
                total[self.main_size :] += weight * self.delta_scores(tokens, range(self.main_size, count))
        if weight_sum > 0:
            total /= weight_sum
        total[~view.mask] = 0.0
        positive = np.flatnonzero(total > 0)
        if positive.size > top_n:
            positive = positive[np.argpartition(-total[positive], top_n - 1)[:top_n]]
        ordered = positive[np.argsort(-total[positive], kind="stable")]
        top = [(self._ids[slot], float(total[slot])) for slot in ordered]
        # each query term, as often as the query has it: its document frequency and its utterance's share
        terms = [(token, self._df.get(token, 0), weight / weight_sum) for tokens, weight in query_parts
                 if weight > 0 for token in tokens] if weight_sum > 0 else []
        scale = keyword_scale([(df, share) for _, df, share in terms], self.main_size, self.k1)
        documents = max(1, self.main_size)
        mass: dict[str, float] = {}  # each query term's weight in the query: coverage (views.KeywordResult)
        for token, df, share in terms:
            mass[token] = mass.get(token, 0.0) + share * idf(df, documents)
        return KeywordResult(top, top[0][1] if top else 0.0, self.slots, total, scale, mass, self.tokens_of)

    def tokens_of(self, memory_id: str) -> tuple[str, ...] | None:
        """The keyword tokens this snapshot holds for a memory, or None when it holds none for it."""
        slot = self.slots.get(memory_id)
        return None if slot is None or slot >= self.count else tuple(self._tokens[slot])

    def delta_scores(self, tokens: Sequence[str], slots: range) -> np.ndarray:
        """Lucene BM25 of the delta memories, with the main model's document frequencies and average length."""
        n = max(1, self.main_size)
        weight: dict[str, float] = {}  # idf times how often the query repeats the token, as bm25s counts it
        for token in tokens:
            df = self._df.get(token, 0)
            weight[token] = weight.get(token, 0.0) + float(np.log(1 + (n - df + 0.5) / (df + 0.5)))
        scores = np.zeros(len(slots), dtype=np.float64)
        for position, slot in enumerate(slots):
            doc = self._tokens[slot]
            if not doc:
                continue
            norm = self.k1 * (1 - self.b + self.b * len(doc) / self._avgdl)
            counts: dict[str, int] = {}
            for token in doc:
                if token in weight:
                    counts[token] = counts.get(token, 0) + 1
            scores[position] = sum(weight[t] * c / (c + norm) for t, c in counts.items())
        return scores


class KeywordIndex:
    """BM25 over one user's memories, filtered with numpy masks.

    A bm25s model covers the memories present at the last build ("main"); memories added or changed since
    live in a small delta scored with the same Lucene BM25 formula and the main model's statistics (document
    frequencies, average length), so a write never forces a rebuild. When the delta passes 10% of main (at
    least 512 memories), the next snapshot rebuilds main from everything alive.
    """

    def __init__(self, k1: float = K1, b: float = B, *, merge_fraction: float = 0.1, min_merge: int = 512) -> None:
        self.k1 = k1
        self.b = b
        self.merge_fraction = merge_fraction
        self.min_merge = min_merge
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._ids: list[str] = []  # slot -> memory id
        self._ids_array: np.ndarray | None = None
        self._tokens: list[tuple[str, ...]] | TokenTable = []
        self._slot: dict[str, int] = {}  # live memory id -> slot
        self._alive = np.zeros(0, dtype=bool)
        self._superseded = np.zeros(0, dtype=bool)
        self._type = np.zeros(0, dtype=np.int8)
        self._scope = np.zeros(0, dtype=np.int32)
        self._importance = np.zeros(0, dtype=np.float32)
        self._created = np.zeros(0, dtype=np.float64)
        self._last = np.zeros(0, dtype=np.float64)
        self._scope_codes: dict[str, int] = {"global": 0}
        self._shared = False  # a snapshot holds the slot map, the scope codes and the arrays above
        self._main_size = 0
        self._generation = getattr(self, "_generation", 0) + 1
        self._model: Any = None
        self._df: Mapping[str, int] = {}
        self._avgdl = 1.0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._slot

    @classmethod
    def restored(cls, state: IndexState) -> KeywordIndex:
        """An index holding exactly ``state`` (checked by the caller, persisted.py), which it takes over."""
        index = cls(state.k1, state.b)
        index._ids, index._tokens = state.ids, state.tokens
        for name in _SLOT_ARRAYS:
            setattr(index, name, state.arrays[name])
        index._slot = {state.ids[slot]: slot for slot in np.flatnonzero(state.arrays["_alive"]).tolist()}
        index._scope_codes = {scope: code for code, scope in enumerate(state.scopes)}
        index._main_size, index._model, index._df, index._avgdl = state.main_size, state.model, state.df, state.avgdl
        return index

    # ------------------------------------------------------------------------------------------ reading

    def snapshot(self, *, merge: bool = True) -> IndexSnapshot:
        """The index as it stands, for one search to read while writers go on (merges a large delta first,
        unless ``merge`` is False: a save, which must not make a writer wait for a merge)."""
        with self._lock:
            pending = len(self._ids) - self._main_size
            if merge and pending > max(self.min_merge, self.merge_fraction * self._main_size):
                self._rebuild()
            self._shared = True
            return IndexSnapshot(self)

    def view(self, memory_filter: MemoryFilter) -> FilterView:
        """The filter's mask over a fresh snapshot of the index, for one search."""
        return self.snapshot().view(memory_filter)

    def search(self, query_parts: Sequence[tuple[Sequence[str], float]], view: FilterView | MemoryFilter,
               top_n: int, variants: Sequence[tuple[Sequence[str], float]] = ()) -> KeywordResult:
        """BM25 of the memories the view (or filter) lets through, over the view's own snapshot."""
        if isinstance(view, MemoryFilter):
            view = self.view(view)
        return view.snapshot.search(query_parts, view, top_n, variants)

    # ------------------------------------------------------------------------------------------ edits

    def replace_all(self, items: Iterable[tuple[str, IndexedMemory]]) -> None:
        with self._lock:
            self._reset()
            for memory_id, item in items:
                self._append(memory_id, item)
            self._rebuild()

    def put(self, memory_id: str, item: IndexedMemory) -> None:
        self.put_many([(memory_id, item)])

    def put_many(self, items: Iterable[tuple[str, IndexedMemory]]) -> None:
        """Index these memories (new, or replacing their earlier entry) as one edit: one copy at most."""
        with self._lock:
            self._own()
            for memory_id, item in items:
                slot = self._slot.get(memory_id)
                if slot is not None and self._tokens[slot] == item.tokens:
                    self._set_fields(slot, item)
                    continue
                if slot is not None:
                    self._alive[slot] = False
                self._append(memory_id, item)

    def refresh_filters(self, records: Iterable[MemoryRecord]) -> None:
        """New fields (scope, state, importance, ...) for memories whose words did not change."""
        with self._lock:
            self._own()
            for record in records:
                slot = self._slot.get(record.id)
                if slot is not None:
                    self._set_fields(slot, IndexedMemory.of(record, self._tokens[slot]))

    def remove(self, memory_ids: Iterable[str]) -> None:
        with self._lock:
            self._own()
            for memory_id in memory_ids:
                slot = self._slot.pop(memory_id, None)
                if slot is not None:
                    self._alive[slot] = False

    def _own(self) -> None:
        """Before an edit (caller holds the lock): copy what a snapshot shares, so the snapshot stays as it was."""
        if self._shared:
            self._slot = dict(self._slot)
            self._scope_codes = dict(self._scope_codes)
            for name in _SLOT_ARRAYS:
                setattr(self, name, getattr(self, name).copy())
            self._shared = False

    def _append(self, memory_id: str, item: IndexedMemory) -> None:
        slot = len(self._ids)
        if slot >= len(self._alive):  # grow the per-slot arrays by doubling (new arrays: no snapshot holds them)
            size = max(64, 2 * len(self._alive))
            self._alive = np.resize(self._alive, size)
            self._alive[slot:] = False
            for name in _SLOT_ARRAYS[1:]:
                setattr(self, name, np.resize(getattr(self, name), size))
        self._ids.append(memory_id)
        self._tokens.append(item.tokens)
        self._slot[memory_id] = slot
        self._alive[slot] = True
        self._set_fields(slot, item)

    def _set_fields(self, slot: int, item: IndexedMemory) -> None:
        self._scope[slot] = self._scope_codes.setdefault(item.scope, len(self._scope_codes))
        self._type[slot] = _TYPE_CODES[item.type]
        self._superseded[slot] = item.superseded
        self._importance[slot] = item.importance
        self._created[slot] = item.created
        self._last[slot] = item.last_accessed

    def _rebuild(self) -> None:
        """Compact to the live memories and build the bm25s model over all of them (caller holds the lock).
        Everything is made anew, so snapshots taken before keep what they hold."""
        live = [slot for slot in range(len(self._ids)) if self._alive[slot]]
        ids = [self._ids[slot] for slot in live]
        tokens = [self._tokens[slot] for slot in live]
        size = max(64, len(live))
        for name in _SLOT_ARRAYS[1:]:
            setattr(self, name, np.resize(getattr(self, name)[live], size))
        self._ids, self._tokens = ids, tokens
        self._ids_array = None
        self._slot = {memory_id: slot for slot, memory_id in enumerate(ids)}
        self._scope_codes = dict(self._scope_codes)
        self._alive = np.zeros(size, dtype=bool)
        self._alive[: len(live)] = True
        self._shared = False
        self._main_size = len(live)
        self._generation += 1
        self._model = None
        df: dict[str, int] = {}
        self._df = df
        if any(tokens):  # bm25s cannot index a corpus without one token (memories of symbols only): no model
            import bm25s

            # bm25s sets its own logger to DEBUG when imported, so every index build printed a line wherever the
            # application's handlers let records through (the MCP server's stderr): only warnings, as libraries do
            logging.getLogger("bm25s").setLevel(logging.WARNING)

            model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
            model.index([list(t) for t in tokens], show_progress=False)
            self._model = model
            for doc in tokens:
                for token in set(doc):
                    df[token] = df.get(token, 0) + 1
            self._avgdl = max(1.0, sum(len(doc) for doc in tokens) / len(tokens))
        else:
            self._avgdl = 1.0

    def _id_array_of(self, generation: int, ids: list[str], count: int) -> np.ndarray:
        """The first ``count`` ids of a snapshot's slot list as an array, cached while no memory is added."""
        with self._lock:
            cached = self._ids_array
            if cached is not None and self._generation == generation and len(cached) == count:
                return cached
        array = np.array(ids[:count], dtype=object)  # outside the lock: writers need not wait for it
        with self._lock:
            if self._generation == generation and len(self._ids) == count:
                self._ids_array = array
        return array

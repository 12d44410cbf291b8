"""The keyword side of hybrid retrieval: Chinese-aware tokenization and BM25 (the ``bm25s`` library).

Tokenization
------------
* Latin text: lowercase words, a possessive 's dropped, English stopwords removed, Snowball-stemmed
  (PyStemmer), so "Caroline's paintings" and "Caroline painted" share "carolin" and "paint".
* Chinese: jieba words (stopwords and particles removed) plus every character bigram of each run of Chinese
  characters. Bigrams catch the words jieba segments differently in the query and in the memory; on
  MADial-Bench zh they lift R@5 from 0.43 (jieba words) to 0.53.

Each memory is indexed over its content, tags and ``context`` (text kept only for retrieval: the turns around
it, the message it was extracted from). Tokens are computed once at write time and stored with the memory,
so an index is rebuilt from the store without re-tokenizing.

Scores are BM25 (k1 = 1.2, b = 0.5). The index keeps a little metadata per memory (scope, type, superseded)
so keyword candidates pass exactly the same isolation filter as the dense side.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from vecmem.models import MemoryFilter, MemoryRecord

__all__ = ["warm_up", "tokenize", "memory_tokens", "KeywordIndex", "KeywordResult", "FilterView", "IndexedMemory", "split_dialogue"]

K1 = 1.2
B = 0.5
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_ZH_STOPWORDS = frozenset(
    "的 了 是 我 你 他 她 它 在 和 与 也 都 就 有 吗 呢 吧 啊 呀 哦 嗯 这 那 个 一 不 很 会 要 说 对 好 没 着 过 给 让 还 把 被 "
    "到 去 来 上 下 们 自己 什么 怎么 可以 我们 你们 他们 一个 一下 真的 感觉 觉得 非常 真是 哈哈 吗 嘛 啦 而且 但是 因为 所以".split()
)
_lock = threading.Lock()
_tools: dict[str, object] = {}


def _stemmer() -> object | None:
    with _lock:
        if "stemmer" not in _tools:
            try:
                import Stemmer

                _tools["stemmer"] = Stemmer.Stemmer("english")
            except ImportError:  # stemming is an improvement, not a requirement
                _tools["stemmer"] = None
        return _tools["stemmer"]


def _stopwords() -> frozenset[str]:
    with _lock:
        if "stopwords" not in _tools:
            from bm25s.stopwords import STOPWORDS_EN

            _tools["stopwords"] = frozenset(STOPWORDS_EN)
        return _tools["stopwords"]  # type: ignore[return-value]


def _jieba() -> object:
    with _lock:
        if "jieba" not in _tools:
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            _tools["jieba"] = jieba
        return _tools["jieba"]


def warm_up() -> None:
    """Load what tokenizing needs (jieba's dictionary takes about 0.7 s) before the first query needs it."""
    _stemmer()
    _stopwords()
    _jieba().lcut("预热")  # type: ignore[attr-defined]


def tokenize(text: str) -> list[str]:
    """Keyword tokens of any mix of Chinese and Latin text (see the module docstring)."""
    lowered = text.lower()
    tokens: list[str] = []
    latin = _CJK_RUN.sub(" ", lowered)
    stop = _stopwords()
    words = [w[:-2] if w.endswith("'s") else w for w in _WORD.findall(latin)]
    words = [w for w in words if w and w not in stop]
    stemmer = _stemmer()
    tokens.extend(stemmer.stemWords(words) if stemmer is not None else words)  # type: ignore[attr-defined]
    runs = _CJK_RUN.findall(lowered)
    if runs:
        jieba = _jieba()
        for run in runs:
            tokens.extend(w for w in jieba.lcut(run) if w not in _ZH_STOPWORDS)  # type: ignore[attr-defined]
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))  # none for a single character
    return tokens


def memory_tokens(record: MemoryRecord) -> list[str]:
    """What a memory is found by: its content, tags and retrieval context."""
    return tokenize(" ".join([record.content, *record.tags, record.context]))


_SPEAKER = re.compile(r"^\s*(?:<[^<>\n]{1,40}>|[\w .'-]{1,30})\s*[:：]\s*")


def split_dialogue(query: str) -> list[str] | None:
    """The utterances of a query shaped like a conversation (two or more non-empty lines), else None.

    Speaker tags ("<Bart>:", "User:") and surrounding quotes are stripped; "<BOD>"-style markers dropped.
    """
    lines = []
    for line in query.splitlines():
        text = line.strip()
        if not text or re.fullmatch(r"<[A-Z]{2,5}>", text):
            continue
        text = _SPEAKER.sub("", text, count=1).strip().strip("\"'“”")
        if text:
            lines.append(text)
    return lines if len(lines) >= 2 else None


def recency_weights(count: int, decay: float) -> np.ndarray:
    """Weights of ``count`` utterances, the last weighing 1 and each earlier one ``decay`` times less."""
    return np.array([decay ** (count - 1 - i) for i in range(count)], dtype=np.float64)


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
    def of(cls, record: MemoryRecord, tokens: Sequence[str]) -> "IndexedMemory":
        last = record.last_accessed.timestamp() if record.last_accessed is not None else 0.0
        # "superseded" here means "not retrievable": archived and pending memories are left out the same way
        return cls(tuple(tokens), record.scope, record.type, not record.retrievable,
                   record.importance * record.confidence, record.created_at.timestamp(), last)


_TYPE_NAMES = ("fact", "preference", "instruction", "conclusion")
_SLOT_ARRAYS = ("_alive", "_superseded", "_type", "_scope", "_importance", "_created", "_last")
_TYPE_CODES = {name: code for code, name in enumerate(_TYPE_NAMES)}


class FilterView:
    """One search's view of the index: which memories a filter lets through (computed once per search)."""

    def __init__(
        self,
        mask: np.ndarray,
        slots: dict[str, int],
        memory_filter: MemoryFilter,
        generation: int,
        ids: np.ndarray,
        types: np.ndarray,
        type_sizes: dict[str, int],
        ranking: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        self.mask = mask
        self._ids = ids  # slot -> id, as a numpy object array
        self._types = types  # slot -> type code
        self.type_sizes = type_sizes  # memories of each type (superseded included): each type's collection size
        wanted = memory_filter.types if memory_filter.types is not None else type_sizes
        self._in_types = sum(type_sizes.get(t, 0) for t in wanted)  # what the dense side searches
        self._importance, self._created, self._last = ranking
        self._slots = slots  # the index's live id -> slot map, not a copy (a copy costs ms at 100,000)
        self.memory_filter = memory_filter
        self.generation = generation  # slots are renumbered by a rebuild; a view from before it is redone

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    @property
    def fraction(self) -> float:
        """Share of the memories of the filter's types that the rest of the filter (scope, state) lets through."""
        return self.count / self._in_types if self._in_types else 1.0

    def visible_ids(self) -> dict[str, list[str]]:
        """Every memory the filter lets through, by type (to restrict a vector search to them)."""
        ids = self._ids[: self.mask.size][self.mask]
        codes = self._types[: self.mask.size][self.mask]
        return {name: ids[codes == code].tolist() for code, name in enumerate(_TYPE_NAMES) if (codes == code).any()}

    def type_of(self, memory_id: str) -> str | None:
        slot = self._slots.get(memory_id)
        return None if slot is None or slot >= self.mask.size else _TYPE_NAMES[int(self._types[slot])]

    def ranking_fields(self, memory_id: str) -> tuple[float, float, float] | None:
        """(importance, created, stored last_accessed) of a visible memory, None if hidden or unknown."""
        slot = self._slots.get(memory_id)
        if slot is None or slot >= self.mask.size or not self.mask[slot]:
            return None
        return float(self._importance[slot]), float(self._created[slot]), float(self._last[slot])

    def visible(self, memory_id: str) -> bool | None:
        """Whether the filter lets the memory through; None for a memory the index does not know yet."""
        slot = self._slots.get(memory_id)
        if slot is None or slot >= self.mask.size:
            return None
        return bool(self.mask[slot])


class KeywordResult:
    """Keyword scores of one query over the memories a filter lets through."""

    def __init__(self, top: list[tuple[str, float]], best: float, lookup: dict[str, int], scores: np.ndarray) -> None:
        self.top = top  # the best-scoring visible memories, best first
        self.best = best  # the highest visible score (0 when nothing matched)
        self._lookup = lookup
        self._scores = scores  # per slot, 0 where the filter hides the memory

    def score_of(self, memory_id: str) -> float:
        slot = self._lookup.get(memory_id)
        return 0.0 if slot is None else float(self._scores[slot])


class KeywordIndex:
    """BM25 over one user's memories, filtered with numpy masks.

    A bm25s model covers the memories present at the last build ("main"); memories added or changed since
    live in a small delta scored with the same Lucene BM25 formula and the main model's statistics (document
    frequencies, average length), so a write never forces a rebuild. When the delta passes 10% of main (at
    least 512 memories), the next search rebuilds main from everything alive.
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
        self._tokens: list[tuple[str, ...]] = []
        self._slot: dict[str, int] = {}  # live memory id -> slot
        self._alive = np.zeros(0, dtype=bool)
        self._superseded = np.zeros(0, dtype=bool)
        self._type = np.zeros(0, dtype=np.int8)
        self._scope = np.zeros(0, dtype=np.int32)
        self._importance = np.zeros(0, dtype=np.float32)
        self._created = np.zeros(0, dtype=np.float64)
        self._last = np.zeros(0, dtype=np.float64)
        self._scope_codes: dict[str, int] = {"global": 0}
        self._main_size = 0
        self._generation = getattr(self, "_generation", 0) + 1
        self._model: object | None = None
        self._df: dict[str, int] = {}
        self._avgdl = 1.0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._slot

    # ------------------------------------------------------------------------------------------ edits

    def replace_all(self, items: Iterable[tuple[str, IndexedMemory]]) -> None:
        with self._lock:
            self._reset()
            for memory_id, item in items:
                self._append(memory_id, item)
            self._rebuild()

    def put(self, memory_id: str, item: IndexedMemory) -> None:
        with self._lock:
            slot = self._slot.get(memory_id)
            if slot is not None and self._tokens[slot] == item.tokens:
                self._set_fields(slot, item)
                return
            if slot is not None:
                self._alive[slot] = False
            self._append(memory_id, item)

    def refresh_filters(self, records: Iterable[MemoryRecord]) -> None:
        """New fields (scope, state, importance, ...) for memories whose words did not change."""
        with self._lock:
            for record in records:
                slot = self._slot.get(record.id)
                if slot is not None:
                    self._set_fields(slot, IndexedMemory.of(record, self._tokens[slot]))

    def remove(self, memory_ids: Iterable[str]) -> None:
        with self._lock:
            for memory_id in memory_ids:
                slot = self._slot.pop(memory_id, None)
                if slot is not None:
                    self._alive[slot] = False

    def _append(self, memory_id: str, item: IndexedMemory) -> None:
        slot = len(self._ids)
        if slot >= len(self._alive):  # grow the per-slot arrays by doubling
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
        """Compact to the live memories and build the bm25s model over all of them (caller holds the lock)."""
        live = [slot for slot in range(len(self._ids)) if self._alive[slot]]
        ids = [self._ids[slot] for slot in live]
        tokens = [self._tokens[slot] for slot in live]
        size = max(64, len(live))
        for name in _SLOT_ARRAYS[1:]:
            setattr(self, name, np.resize(getattr(self, name)[live], size))
        self._ids, self._tokens = ids, tokens
        self._ids_array = None
        self._slot = {memory_id: slot for slot, memory_id in enumerate(ids)}
        self._alive = np.zeros(size, dtype=bool)
        self._alive[: len(live)] = True
        self._main_size = len(live)
        self._generation += 1
        self._model = None
        self._df = {}
        if live:
            import bm25s

            model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
            model.index([list(t) for t in tokens], show_progress=False)
            self._model = model
            for doc in tokens:
                for token in set(doc):
                    self._df[token] = self._df.get(token, 0) + 1
            self._avgdl = max(1.0, sum(len(doc) for doc in tokens) / len(tokens))

    # ------------------------------------------------------------------------------------------ search

    def _view(self, memory_filter: MemoryFilter) -> FilterView:
        count = len(self._ids)
        sizes = np.bincount(self._type[:count][self._alive[:count]], minlength=len(_TYPE_NAMES))
        return FilterView(self._mask(memory_filter), self._slot, memory_filter, self._generation, self._id_array(),
                          self._type, {name: int(sizes[code]) for code, name in enumerate(_TYPE_NAMES)},
                          (self._importance, self._created, self._last))

    def _id_array(self) -> np.ndarray:
        """The slot -> id list as a numpy array, remade only after memories were added (caller holds the lock)."""
        if self._ids_array is None or len(self._ids_array) != len(self._ids):
            self._ids_array = np.array(self._ids, dtype=object)
        return self._ids_array

    def _type_mask(self, memory_filter: MemoryFilter, count: int) -> np.ndarray:
        allowed = np.zeros(len(_TYPE_NAMES), dtype=bool)
        allowed[[_TYPE_CODES[t] for t in (memory_filter.types or _TYPE_NAMES)]] = True
        return allowed[self._type[:count]]

    def _mask(self, memory_filter: MemoryFilter) -> np.ndarray:
        count = len(self._ids)
        mask = self._alive[:count].copy()
        if not memory_filter.include_superseded:
            mask &= ~self._superseded[:count]
        if memory_filter.types is not None:
            mask &= self._type_mask(memory_filter, count)
        scopes = memory_filter.scopes
        if scopes is not None:
            in_scope = np.zeros(count, dtype=bool)
            for scope in scopes:
                code = self._scope_codes.get(scope)
                if code is not None:
                    in_scope |= self._scope[:count] == code
            mask &= in_scope
        return mask

    def view(self, memory_filter: MemoryFilter) -> FilterView:
        """The filter's mask over the index, for one search (merges a large delta first)."""
        with self._lock:
            pending = len(self._ids) - self._main_size
            if pending > max(self.min_merge, self.merge_fraction * self._main_size):
                self._rebuild()
            return self._view(memory_filter)

    def search(
        self, query_parts: Sequence[tuple[Sequence[str], float]], view: FilterView | MemoryFilter, top_n: int
    ) -> KeywordResult:
        """BM25 of the memories the view (or filter) lets through. ``query_parts`` are (tokens, weight) pairs
        whose scores are averaged by weight: one part for a plain query, one per utterance for a dialogue."""
        if isinstance(view, MemoryFilter):
            view = self.view(view)
        with self._lock:
            if view.generation != self._generation:
                view = self._view(view.memory_filter)
            count = min(len(self._ids), view.mask.size)
            total = np.zeros(count, dtype=np.float64)
            weight_sum = sum(weight for _, weight in query_parts)
            for tokens, weight in query_parts:
                if not tokens or weight <= 0:
                    continue
                if self._model is not None and self._main_size:
                    total[: self._main_size] += weight * self._model.get_scores(list(tokens))  # type: ignore[attr-defined]
                if count > self._main_size:
                    total[self._main_size :] += weight * self._delta_scores(tokens, range(self._main_size, count))
            if weight_sum > 0:
                total /= weight_sum
            total[~view.mask[:count]] = 0.0
            lookup = self._slot
            ids = self._ids
        positive = np.flatnonzero(total > 0)
        if positive.size > top_n:
            positive = positive[np.argpartition(-total[positive], top_n - 1)[:top_n]]
        ordered = positive[np.argsort(-total[positive], kind="stable")]
        top = [(ids[slot], float(total[slot])) for slot in ordered]
        return KeywordResult(top, top[0][1] if top else 0.0, lookup, total)

    def _delta_scores(self, tokens: Sequence[str], slots: range) -> np.ndarray:
        """Lucene BM25 of the delta memories, with the main model's document frequencies and average length."""
        n = max(1, self._main_size)
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

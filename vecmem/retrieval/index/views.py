"""What one search sees of a keyword index snapshot: the filter's mask over it (``FilterView``) and the BM25
scores of one query (``KeywordResult``). Split from keyword.py, which re-exports both."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from vecmem.models import MemoryFilter
from vecmem.retrieval.index.columns import TYPE_NAMES as _TYPE_NAMES

__all__ = ["FilterView", "IndexColumns", "KeywordResult"]


class IndexColumns(Protocol):
    """What a view reads of a keyword index snapshot (keyword.IndexSnapshot): its per-slot columns, and the
    BM25 search it runs over the slots a view lets through."""

    generation: int
    slots: Mapping[str, int]
    types: np.ndarray
    importance: np.ndarray
    created: np.ndarray
    last: np.ndarray

    @property
    def id_array(self) -> np.ndarray: ...

    def search(self, query_parts: Sequence[tuple[Sequence[str], float]], view: FilterView, top_n: int,
               variants: Sequence[tuple[Sequence[str], float]] = ()) -> KeywordResult: ...


class FilterView:
    """One search's view of a snapshot: which memories a filter lets through (computed once per search)."""

    def __init__(
        self, snapshot: IndexColumns, mask: np.ndarray, memory_filter: MemoryFilter, type_sizes: dict[str, int]
    ) -> None:
        self.snapshot = snapshot
        self.mask = mask  # per slot of the snapshot
        self.memory_filter = memory_filter
        self.type_sizes = type_sizes  # memories of each type (superseded included): each type's collection size
        wanted = memory_filter.types if memory_filter.types is not None else type_sizes
        self._in_types = sum(type_sizes.get(t, 0) for t in wanted)  # what the dense side searches
        self._slots = snapshot.slots

    @property
    def generation(self) -> int:
        return self.snapshot.generation

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    @property
    def fraction(self) -> float:
        """Share of the memories of the filter's types that the rest of the filter (scope, state) lets through."""
        return self.count / self._in_types if self._in_types else 1.0

    def visible_ids(self) -> dict[str, list[str]]:
        """Every memory the filter lets through, by type (to restrict a vector search to them)."""
        ids = self.snapshot.id_array[self.mask]
        codes = self.snapshot.types[: self.mask.size][self.mask]
        return {name: ids[codes == code].tolist() for code, name in enumerate(_TYPE_NAMES) if (codes == code).any()}

    def created_within(self, start: float, end: float, limit: int) -> list[str]:
        """The ``limit`` latest memories the filter lets through created in [start, end) (epoch seconds), latest
        first: the candidates a question's time window adds (timeframe.py), read from the catalogue alone."""
        if limit <= 0:
            return []
        created = self.snapshot.created[: self.mask.size]
        inside = np.flatnonzero(self.mask & (created >= start) & (created < end))
        if inside.size > limit:
            inside = inside[np.argpartition(-created[inside], limit - 1)[:limit]]
        inside = inside[np.argsort(-created[inside], kind="stable")]
        return [str(memory_id) for memory_id in self.snapshot.id_array[inside]]

    def best_by_priors(self, limit: int, skip: set[str], now: float, recency_weight: float, importance_weight: float,
                       decay_per_day: float) -> list[str]:
        """The ``limit`` visible memories not in ``skip`` that the reranker's priors alone rank first (recency of
        the later of created and stored last use, importance): what tops up a search whose query matched fewer
        than k memories, read from the catalogue alone (one pass over the visible slots)."""
        if limit <= 0:
            return []
        size = self.mask.size
        mask = self.mask.copy()
        for memory_id in skip:
            if (slot := self._slots.get(memory_id)) is not None and slot < size:
                mask[slot] = False
        slots = np.flatnonzero(mask)
        if slots.size == 0:
            return []
        used = np.maximum(self.snapshot.created[:size][slots], self.snapshot.last[:size][slots])
        days = np.maximum(0.0, now - used) / 86_400.0
        priors = recency_weight * np.exp(-decay_per_day * days) + importance_weight * self.snapshot.importance[:size][slots]
        if slots.size > limit:
            keep = np.argpartition(-priors, limit - 1)[:limit]
            slots, priors = slots[keep], priors[keep]
        return [str(memory_id) for memory_id in self.snapshot.id_array[slots[np.argsort(-priors, kind="stable")]]]

    def type_of(self, memory_id: str) -> str | None:
        slot = self._slots.get(memory_id)
        return None if slot is None else _TYPE_NAMES[int(self.snapshot.types[slot])]

    def ranking_fields(self, memory_id: str) -> tuple[float, float, float] | None:
        """(importance, created, stored last_accessed) of a visible memory, None if hidden or unknown."""
        slot = self._slots.get(memory_id)
        if slot is None or not self.mask[slot]:
            return None
        snapshot = self.snapshot
        return float(snapshot.importance[slot]), float(snapshot.created[slot]), float(snapshot.last[slot])

    def visible(self, memory_id: str) -> bool | None:
        """Whether the filter lets the memory through; None for a memory the snapshot does not know."""
        slot = self._slots.get(memory_id)
        return None if slot is None else bool(self.mask[slot])


class KeywordResult:
    """Keyword scores of one query over the memories a filter lets through."""

    def __init__(self, top: list[tuple[str, float]], best: float, lookup: Mapping[str, int], scores: np.ndarray,
                 scale: float = 0.0, terms: Mapping[str, float] | None = None,
                 tokens_of: Callable[[str], Sequence[str] | None] | None = None) -> None:
        self.top = top  # the best-scoring visible memories, best first
        self.best = best  # the highest visible score (0 when nothing matched)
        self.scale = scale  # the score that is full keyword evidence for this query (relevance.keyword_scale)
        self._lookup = lookup  # the snapshot's id -> slot: every slot has a score
        self._scores = scores  # per slot, 0 where the filter hides the memory
        # what each query term weighs in the query (its idf, times its utterance's weight in a dialogue), and each
        # memory's tokens: how much of the query a memory holds (coverage_of)
        self._terms = terms or {}
        self._mass = sum(self._terms.values())
        self._tokens_of = tokens_of

    def coverage_of(self, memory_id: str) -> float:
        """The share of the query's terms, each by its weight, that the memory holds (1 when unknown): a match on
        one everyday word of a long question covers little of it, one on every word all."""
        tokens = None if self._tokens_of is None or self._mass <= 0 else self._tokens_of(memory_id)
        if tokens is None:
            return 1.0
        held = set(tokens)
        return sum(weight for term, weight in self._terms.items() if term in held) / self._mass

    def score_of(self, memory_id: str) -> float:
        slot = self._lookup.get(memory_id)
        return 0.0 if slot is None else float(self._scores[slot])

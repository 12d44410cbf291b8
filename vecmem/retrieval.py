"""Ranking a query against one user's memories: dense and keyword candidates, fusion, the reranker.

The hot path avoids what is slow at 100,000 memories: Chroma's where-filter (only the collections of the
filter's types are searched, unfiltered, and scope and state are filtered in memory), rebuilding BM25 (edits go
to a delta), counting the collections (checked at most every ``VECMEM_INDEX_CHECK_SECONDS``), fetching records
that will not be returned (candidates are ranked from the in-memory catalogue first), and writing access
statistics to Chroma (``access.py`` keeps them in SQLite).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from datetime import datetime
from typing import Any, Sequence

import numpy as np

from .access import AccessStats
from .config import Settings
from .embed import Embedder
from .lexical import (
    FilterView,
    IndexedMemory,
    KeywordIndex,
    KeywordResult,
    memory_tokens,
    recency_weights,
    split_dialogue,
    tokenize,
    warm_up,
)
from .models import Hit, MemoryFilter, MemoryRecord
from .rank import freshness, rank_by_importance, rerank, score
from .store import ChromaStore

__all__ = ["Retriever", "DIALOGUE_DENSE_DECAY", "DIALOGUE_KEYWORD_DECAY"]

DIALOGUE_DENSE_DECAY = 0.5  # each earlier utterance of a dialogue-shaped query weighs half as much
DIALOGUE_KEYWORD_DECAY = 0.7
FETCH_SPARES = 3  # records fetched beyond the k wanted: ties, and a catalogue a little behind the store
MAX_UNFILTERED = 320  # the largest unfiltered over-fetch (5 ms at 100,000 memories) before restricting by id


class Retriever:
    def __init__(self, store: ChromaStore, embedder: Embedder, settings: Settings, access: AccessStats) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.access = access
        self._indexes: dict[str, tuple[KeywordIndex, float]] = {}  # user -> (index, when last checked)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------------------------------ keeping in step

    # Each takes the lock, so an edit made while another thread builds the index waits for the build and is
    # then applied to the new index instead of being lost with the old one.

    def on_written(self, user: str, records: Sequence[MemoryRecord], tokens: Sequence[Sequence[str]]) -> None:
        with self._lock:
            entry = self._indexes.get(user)
            if entry is not None:
                for record, words in zip(records, tokens, strict=True):
                    entry[0].put(record.id, IndexedMemory.of(record, words))

    def on_fields_changed(self, user: str, records: Sequence[MemoryRecord]) -> None:
        with self._lock:
            entry = self._indexes.get(user)
            if entry is not None:
                entry[0].refresh_filters(records)

    def on_forgotten(self, user: str, memory_ids: Sequence[str]) -> None:
        with self._lock:
            entry = self._indexes.get(user)
            if entry is not None:
                entry[0].remove(memory_ids)

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()

    def keyword_index(self, user: str) -> KeywordIndex:
        """The user's keyword index: built from the store on first use, rebuilt when the store holds a different
        number of memories than it does (another process wrote), checked at most every index_check_seconds."""
        with self._lock:
            now = time.monotonic()
            entry = self._indexes.get(user)
            if entry is not None and now - entry[1] < self.settings.index_check_seconds:
                return entry[0]
            if entry is None or len(entry[0]) != self.store.count(user):  # count() also sees new collections
                warm_up()  # one-time costs (jieba's dictionary) belong with this one-time build, not a query
                index = KeywordIndex()
                index.replace_all(
                    (record.id, IndexedMemory.of(record, words if words is not None else memory_tokens(record)))
                    for record, words in self.store.scan_keywords(user)
                )
                entry = (index, now)
            self._indexes[user] = (entry[0], now)
            return entry[0]

    # ------------------------------------------------------------------------------------------ ranking

    def rank(self, query: str, k: int, user: str, memory_filter: MemoryFilter, now: datetime) -> list[Hit]:
        settings = self.settings
        if not query.strip():
            records = self.access.apply(list(self.store.scan(user, memory_filter)))
            return rank_by_importance(records, now=now, weights=settings.weights,
                                      decay_per_day=settings.recency_decay_per_day)[:k]
        mode = settings.search_mode
        wanted = max(k * settings.overfetch_factor, settings.min_candidates)
        utterances = split_dialogue(query)
        index = self.keyword_index(user)  # also the catalogue of every memory's scope, type, state, importance
        view = index.view(memory_filter)
        dense: dict[str, float] = {}
        vector = None
        if mode != "keyword":
            vector = self._query_vector(query, utterances)
            dense = self._dense_candidates(user, vector, wanted, view)
        keyword = None
        if mode != "dense":
            keyword = index.search(_query_parts(query, utterances), view, wanted)
        candidates = list(dense) + [i for i, _ in (keyword.top if keyword else []) if i not in dense]
        if vector is not None:  # keyword-only candidates: their cosine from their stored vectors
            missing: dict[str, list[str]] = {}
            for memory_id in candidates:
                if memory_id not in dense and (kind := view.type_of(memory_id)) is not None:
                    missing.setdefault(kind, []).append(memory_id)
            if missing:
                count = sum(len(ids) for ids in missing.values())
                ids, cosines = self.store.nearest(user, vector, count, types=missing, among=missing,
                                                  sizes=view.type_sizes)
                dense.update(zip(ids, cosines, strict=True))
        fusion = _Fusion(None if vector is None else dense, keyword, settings.dense_weight)
        ranked = self._preselect(user, candidates, fusion, view, now)
        pairs = []
        parts: dict[str, tuple[float | None, float | None]] = {}
        fetched = 0
        # Fetch the best few by the catalogue's ranking; more only when some turn out hidden or gone (another
        # process changed them since the catalogue was last checked). Each row read costs 0.1 to 0.2 ms.
        while len(pairs) < k and fetched < len(ranked):
            chosen = ranked[fetched : fetched + (k - len(pairs)) + FETCH_SPARES]
            fetched += len(chosen)
            type_of = {i: t for i in chosen if (t := view.type_of(i)) is not None}
            for record in self.access.apply(list(self.store.get(user, chosen, type_of=type_of).values())):
                if not memory_filter.matches(record):  # defence in depth: never trust a filter we did not write
                    continue
                similarity, cosine, relative = fusion.parts(record.id)
                pairs.append((record, similarity))
                parts[record.id] = (cosine, relative)
        hits = rerank(pairs, now=now, weights=settings.weights, decay_per_day=settings.recency_decay_per_day)[:k]
        return [replace(hit, dense=parts[hit.id][0], keyword=parts[hit.id][1]) for hit in hits]

    def _preselect(
        self, user: str, candidates: list[str], fusion: "_Fusion", view: FilterView, now: datetime
    ) -> list[str]:
        """The candidates, best first by the reranker's own score computed from the in-memory catalogue and
        the access statistics, so that only the best few are fetched from Chroma."""
        settings = self.settings
        used = self.access.lookup(user, candidates)
        seconds = now.timestamp()
        ranked: list[tuple[float, str]] = []
        for memory_id in candidates:
            fields = view.ranking_fields(memory_id)
            if fields is None:  # hidden, or written by another process since the last check: fetched last
                ranked.append((float("-inf"), memory_id))
                continue
            importance, created, stored_last = fields
            last_used = max(created, stored_last, used.get(memory_id, (0, 0.0))[1])
            total = score(fusion.parts(memory_id)[0], freshness(seconds - last_used, settings.recency_decay_per_day),
                          importance, settings.weights)
            ranked.append((total, memory_id))
        ranked.sort(key=lambda pair: (-pair[0], pair[1]))
        return [memory_id for _, memory_id in ranked]

    def _dense_candidates(self, user: str, vector: Any, wanted: int, view: FilterView) -> dict[str, float]:
        """The ``wanted`` nearest memories the filter lets through, as {id: cosine}.

        Chroma's where-filter costs 140 to 300 ms at 100,000 memories. Instead only the collections of the
        filter's types are searched, and within them, when the filter lets most memories through, Chroma is
        asked unfiltered for enough neighbours that ``wanted`` should pass (a few ms); when it lets few
        through, or too few passed, the search is restricted to the visible ids the keyword index knows
        (the store picks between reading their vectors, exact, and a restricted HNSW search, which finds what
        Chroma's own filtered query finds, by the collection's size). Memories another process wrote since the index was last
        checked are not searched until the next check (``VECMEM_INDEX_CHECK_SECONDS``).
        """
        types = view.memory_filter.types  # a type filter is a choice of collections (store.py)
        fetch = max(wanted, math.ceil(1.3 * wanted / max(view.fraction, 1e-6)))
        while fetch <= MAX_UNFILTERED and view.count > 16 * fetch:  # unfiltered is cheaper than restricting
            ids, cosines = self.store.nearest(user, vector, fetch, types=types)
            kept = {i: c for i, c in zip(ids, cosines, strict=True) if view.visible(i) is not False}
            if len(kept) >= wanted or len(ids) < fetch:  # enough, or every memory was looked at
                return dict(list(kept.items())[:wanted])
            fetch *= 4
        ids, cosines = self.store.nearest(user, vector, wanted, types=types, among=view.visible_ids(),
                                          sizes=view.type_sizes)
        return dict(zip(ids, cosines, strict=True))

    def _query_vector(self, query: str, utterances: list[str] | None) -> Any:
        """The query embedding; for a dialogue, the recency-weighted mean of its utterances (latest counts most:
        a long dialogue would otherwise be cut to its first 256 tokens by the model)."""
        if utterances is None:
            return self.embedder.embed_query(query)
        vectors = self.embedder.embed_queries(utterances)
        mean = (recency_weights(len(utterances), DIALOGUE_DENSE_DECAY)[:, None] * vectors).sum(axis=0)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm else mean


class _Fusion:
    """One query's similarity of a memory: w·cosine + (1 - w)·keyword, or the one side that ran."""

    def __init__(self, dense: dict[str, float] | None, keyword: KeywordResult | None, dense_weight: float) -> None:
        self.dense = dense
        self.keyword = keyword
        self.dense_weight = dense_weight

    def parts(self, memory_id: str) -> tuple[float, float | None, float | None]:
        """(similarity, cosine, keyword relative to the query's best keyword match)."""
        cosine = None if self.dense is None else min(1.0, max(0.0, self.dense.get(memory_id, 0.0)))
        relative = None
        if self.keyword is not None:
            best = self.keyword.best
            relative = self.keyword.score_of(memory_id) / best if best > 0 else 0.0
        if cosine is None:
            return relative or 0.0, cosine, relative
        if relative is None:
            return cosine, cosine, relative
        return self.dense_weight * cosine + (1 - self.dense_weight) * relative, cosine, relative


def _query_parts(query: str, utterances: list[str] | None) -> list[tuple[list[str], float]]:
    if utterances is None:
        return [(tokenize(query), 1.0)]
    weights = recency_weights(len(utterances), DIALOGUE_KEYWORD_DECAY)
    return [(tokenize(text), float(weight)) for text, weight in zip(utterances, weights, strict=True)]

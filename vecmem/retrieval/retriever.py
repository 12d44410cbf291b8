"""Ranking a query against one user's memories: dense and keyword candidates, fusion, the reranker.

The hot path avoids what is slow at 100,000 memories: Chroma's where-filter (only the collections of the
filter's types are searched, unfiltered, and scope and state are filtered in memory), rebuilding BM25 (edits go
to a delta), fetching records that will not be returned (candidates are ranked from the in-memory catalogue
first), fetching records at all on an embedded store (each user's records are held in memory, kept exact by the
change feed of ``changes.py``), and writing access statistics to Chroma (``access.py`` keeps them in SQLite).
With a Chroma server there is no feed: records are read from Chroma and the catalogue is checked against the
store's counts at most every ``VECMEM_INDEX_CHECK_SECONDS``.
"""

from __future__ import annotations

import atexit
import gc
import logging
import math
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Sequence

import numpy as np

from vecmem.storage.access import AccessStats
from vecmem.storage.changes import settle
from vecmem.retrieval.held import HOLD_AT_MOST_BYTES, HeldVectors
from vecmem.config import Settings
from vecmem.retrieval.embedders import Embedder
from vecmem.errors import StoreError
from vecmem.retrieval.keyword import (
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
from vecmem.models import Hit, MemoryFilter, MemoryRecord
from vecmem.retrieval.rank import freshness, rank_by_importance, rerank, score
from vecmem.storage.rows import from_row, to_metadata
from vecmem.storage.chroma import ChromaStore

__all__ = ["Retriever", "DIALOGUE_DENSE_DECAY", "DIALOGUE_KEYWORD_DECAY"]

log = logging.getLogger(__name__)

DIALOGUE_DENSE_DECAY = 0.5  # each earlier utterance of a dialogue-shaped query weighs half as much
DIALOGUE_KEYWORD_DECAY = 0.7
FETCH_SPARES = 3  # records fetched beyond the k wanted: ties, and a catalogue a little behind the store
PREFETCH_VECTORS_AT_MOST = 64  # keyword candidates whose vectors are read while the query is embedded (3 ms)
REREAD_AT_MOST = 2_000  # memories changed by others past which the copy is rebuilt instead of patched
MAX_UNFILTERED = 320  # the largest unfiltered over-fetch (5 ms at 100,000 memories) before restricting by id


@dataclass
class _Copy:
    """One user's memories as this process holds them, and how current that is."""

    index: KeywordIndex  # also the catalogue of every memory's scope, type, state and importance
    records: dict[str, MemoryRecord] | None  # None without a change feed: records are then read from Chroma
    seen: int = 0  # the change feed's last row applied
    unsettled: dict[str, int] = field(default_factory=dict)  # writes by others begun, not ended: read live
    checked: float = 0.0  # without a feed: when the index was last checked against the store's count
    vectors: HeldVectors | None = None  # once asked for (hold_vectors), with a feed, for users that fit
    loader: threading.Thread | None = None
    loaded: threading.Event = field(default_factory=threading.Event)  # the vectors' loader has finished


class Retriever:
    def __init__(self, store: ChromaStore, embedder: Embedder, settings: Settings, access: AccessStats) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.access = access
        self._copies: dict[str, _Copy] = {}
        self._lock = threading.RLock()
        self._holding: set[str] = set()  # users whose vectors this process holds (hold_vectors)
        self._stopping = threading.Event()
        _OPEN.add(self)

    # ------------------------------------------------------------------------------------------ keeping in step

    # Each takes the lock, so an edit made while another thread builds the copy waits for the build and is
    # then applied to the new copy instead of being lost with the old one.

    def on_written(
        self, user: str, records: Sequence[MemoryRecord], tokens: Sequence[Sequence[str]], vectors: np.ndarray
    ) -> None:
        with self._lock:
            copy = self._copies.get(user)
            if copy is not None:
                for record, words in zip(records, tokens, strict=True):
                    copy.index.put(record.id, IndexedMemory.of(record, words))
                self._keep(copy, records)
                if copy.vectors is not None:
                    copy.vectors.put([record.id for record in records], vectors)

    def on_fields_changed(self, user: str, records: Sequence[MemoryRecord]) -> None:
        with self._lock:
            copy = self._copies.get(user)
            if copy is not None:
                copy.index.refresh_filters(records)
                self._keep(copy, records)

    def on_forgotten(self, user: str, memory_ids: Sequence[str]) -> None:
        with self._lock:
            copy = self._copies.get(user)
            if copy is not None:
                copy.index.remove(memory_ids)
                if copy.records is not None:
                    for memory_id in memory_ids:
                        copy.records.pop(memory_id, None)
                if copy.vectors is not None:
                    copy.vectors.remove(memory_ids)

    @staticmethod
    def _keep(copy: _Copy, records: Sequence[MemoryRecord]) -> None:
        if copy.records is not None:  # as Chroma will return them (times pass through epoch seconds)
            for record in records:
                copy.records[record.id] = from_row(record.id, record.content, to_metadata(record))

    def clear(self) -> None:
        with self._lock:
            self._copies.clear()

    def keyword_index(self, user: str) -> KeywordIndex:
        """The user's keyword index, brought up to date with other banks' writes (with a Chroma server, with other
        processes' as far as the count check sees them)."""
        return self._current(user).index

    def _current(self, user: str) -> _Copy:
        """The user's copy: built from the store on first use, then kept in step. With a change feed, exactly:
        what other banks changed since the last look is re-read. Without one (a Chroma server), the copy
        is rebuilt when the store holds a different number of memories, checked every index_check_seconds."""
        with self._lock:
            copy = self._copies.get(user)
            feed = self.store.changes
            if copy is None:
                copy = self._copies[user] = self._build(user)
            elif feed is not None:
                changes = feed.since(user, copy.seen)
                if changes.rebuild or len(changes.changed) > REREAD_AT_MOST:
                    copy = self._copies[user] = self._build(user)
                else:
                    settle(copy.unsettled, changes)
                    if changes.changed:
                        self._reread(user, copy, changes.changed)
                    copy.seen = changes.seen
            elif time.monotonic() - copy.checked >= self.settings.index_check_seconds:
                if len(copy.index) != self.store.count(user):  # count() also sees new collections
                    copy = self._copies[user] = self._build(user)
                copy.checked = time.monotonic()
            return copy

    def _build(self, user: str) -> _Copy:
        feed = self.store.changes
        seen = 0 if feed is None else feed.head()  # read first: a write finishing during the scan is re-read
        warm_up()  # one-time costs (jieba's dictionary) belong with this one-time build, not a query
        self.store.refresh(user)  # collections another bank or server client created count too
        index = KeywordIndex()
        records: dict[str, MemoryRecord] | None = None if feed is None else {}

        def entries() -> Any:
            for record, words in self.store.scan_keywords(user):
                if self._stopping.is_set():  # closing (perhaps the interpreter): leave Chroma at once
                    raise StoreError("the memory bank was closed while it read the store")
                if records is not None:
                    records[record.id] = record
                yield record.id, IndexedMemory.of(record, words if words is not None else memory_tokens(record))

        collecting = gc.isenabled()
        gc.disable()  # 100,000 records kept alive set off a dozen full collections: 2.7 s of a 21 s build
        try:
            index.replace_all(entries())
        finally:
            if collecting:
                gc.enable()
        unsettled = {} if feed is None else feed.unsettled(user, seen)
        copy = _Copy(index, records, seen=seen, unsettled=unsettled, checked=time.monotonic())
        if user in self._holding:
            self._start_loading(user, copy)
        return copy

    # ------------------------------------------------------------------------------------------ held vectors

    def hold_vectors(self, user: str, timeout: float | None = None) -> bool:
        """Hold the user's vectors in memory from now on (held.py), loading them in a background thread, and
        wait up to ``timeout`` for them; True once all are held. Long-running processes ask for this (through
        ``MemoryBank.warm_up``); a one-off command never pays for it."""
        with self._lock:
            self._holding.add(user)
            copy = self._current(user)
            if copy.loader is None:
                self._start_loading(user, copy)
        copy.loaded.wait(timeout)
        return copy.vectors is not None and copy.vectors.complete

    def _start_loading(self, user: str, copy: _Copy) -> None:
        dimension = self._dimension()
        if self.store.changes is None or not dimension or len(copy.index) * dimension * 4 > HOLD_AT_MOST_BYTES:
            copy.loaded.set()  # without a feed a held vector could go stale; a user this big stays in Chroma
            return
        copy.vectors = HeldVectors()
        copy.loader = threading.Thread(target=self._load_vectors, args=(user, copy), daemon=True,
                                       name="vecmem-load-vectors")
        copy.loader.start()

    def _dimension(self) -> int | None:
        stored = self.store.stored_model()
        return stored[1] if stored else None

    def _load_vectors(self, user: str, copy: _Copy) -> None:
        """Fill the copy's held vectors from the store (a background thread; searches read Chroma meanwhile)."""
        assert copy.vectors is not None
        try:
            for ids, matrix in self.store.scan_vectors(user):
                if self._stopping.is_set() or self._copies.get(user) is not copy:  # closing, or a new copy
                    return
                copy.vectors.put(ids, matrix, unless_held=True)
            copy.vectors.complete = True
        except Exception as exc:  # the vectors are an optimisation: a failure leaves searches reading Chroma
            log.warning("could not hold the vectors of user %r in memory: %s", user, exc)
        finally:
            copy.loaded.set()

    def close(self) -> None:
        """Stop the vector loaders (each finishes the page it reads, well under a second) and drop every copy.
        A loader still inside Chroma when the interpreter shuts down would crash it, so this also runs at exit."""
        self._stopping.set()
        with self._lock:
            loaders = [copy.loader for copy in self._copies.values() if copy.loader is not None]
        for loader in loaders:
            loader.join(timeout=30)
        self.clear()

    def _reread(self, user: str, copy: _Copy, memory_ids: set[str]) -> None:
        """Re-read memories another bank changed: changed ones replace the copy's, deleted ones leave it."""
        found = self.store.get_indexed(user, sorted(memory_ids))
        gone = [memory_id for memory_id in memory_ids if memory_id not in found]
        if gone:
            copy.index.remove(gone)
        for memory_id, (record, _, words) in found.items():
            copy.index.put(memory_id, IndexedMemory.of(record, words if words is not None else memory_tokens(record)))
        if copy.records is not None:
            for memory_id in gone:
                copy.records.pop(memory_id, None)
            copy.records.update((memory_id, record) for memory_id, (record, _, _) in found.items())
        if copy.vectors is not None:
            copy.vectors.remove(gone)
            if found:
                copy.vectors.put(list(found), np.stack([vector for _, vector, _ in found.values()]))

    def _records(self, user: str, copy: _Copy, ids: Sequence[str], view: FilterView) -> list[MemoryRecord]:
        """The records of these memories: from the copy where it is exact, else from Chroma (no feed, a write
        by another bank in flight, or a memory the copy does not know yet)."""
        held = copy.records
        if held is None:
            live = list(ids)
            found = []
        else:
            live = [i for i in ids if i not in held or i in copy.unsettled]
            found = [held[i] for i in ids if i in held and i not in copy.unsettled]
        if live:
            type_of = {i: t for i in live if (t := view.type_of(i)) is not None}
            found.extend(self.store.get(user, live, type_of=type_of).values())
        return found

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
        copy = self._current(user)
        index = copy.index
        view = index.view(memory_filter)
        # The query is embedded in another thread while the keyword side runs here and reads the stored vectors
        # of its candidates (both take a few ms; the embedding 8 ms, mostly outside the GIL).
        pending = None if mode == "keyword" else _embedding_pool().submit(self._query_vector, query, utterances)
        keyword = None
        stored: dict[str, np.ndarray] | None = None
        if mode != "dense":
            keyword = index.search(_query_parts(query, utterances), view, wanted)
            top = [memory_id for memory_id, _ in keyword.top]
            if copy.vectors is not None and copy.vectors.complete:
                top = []  # every vector is held
            elif copy.vectors is not None:
                top = [memory_id for memory_id in top if memory_id not in copy.vectors]
            if pending is not None and top and len(top) <= PREFETCH_VECTORS_AT_MOST:
                stored = self.store.vectors(user, top, type_of={i: t for i in top if (t := view.type_of(i))})
        dense: dict[str, float] = {}
        vector = None if pending is None else pending.result()
        if vector is not None:
            dense = self._dense_candidates(user, vector, wanted, view)
        candidates = list(dense) + [i for i, _ in (keyword.top if keyword else []) if i not in dense]
        if vector is not None:  # keyword-only candidates: their cosine from their stored vectors
            keyword_only = [memory_id for memory_id in candidates if memory_id not in dense]
            if copy.vectors is not None:
                dense.update(copy.vectors.cosines(keyword_only, vector))
                keyword_only = [memory_id for memory_id in keyword_only if memory_id not in dense]
            if stored is not None:
                dense.update((i, _cosine(stored[i], vector)) for i in keyword_only if i in stored)
            elif keyword_only:
                self._add_cosines(user, vector, keyword_only, view, dense)
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
            for record in self.access.apply(self._records(user, copy, chosen, view)):
                if not memory_filter.matches(record):  # defence in depth: never trust a filter we did not write
                    continue
                similarity, cosine, relative = fusion.parts(record.id)
                pairs.append((record, similarity))
                parts[record.id] = (cosine, relative)
        hits = rerank(pairs, now=now, weights=settings.weights, decay_per_day=settings.recency_decay_per_day)[:k]
        return [replace(hit, dense=parts[hit.id][0], keyword=parts[hit.id][1]) for hit in hits]

    def _add_cosines(
        self, user: str, vector: Any, memory_ids: list[str], view: FilterView, dense: dict[str, float]
    ) -> None:
        """Cosines of many keyword-only candidates, by the cheaper of reading their vectors or a restricted
        HNSW search (the store decides)."""
        missing: dict[str, list[str]] = {}
        for memory_id in memory_ids:
            if (kind := view.type_of(memory_id)) is not None:
                missing.setdefault(kind, []).append(memory_id)
        if missing:
            count = sum(len(ids) for ids in missing.values())
            ids, cosines = self.store.nearest(user, vector, count, types=missing, among=missing,
                                              sizes=view.type_sizes)
            dense.update(zip(ids, cosines, strict=True))

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
            if fields is None:  # hidden, or written by another bank or client since the last check: fetched last
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
        Chroma's own filtered query finds, by the collection's size). With a Chroma server, memories another
        process wrote since the index was last checked are not searched until the next check
        (``VECMEM_INDEX_CHECK_SECONDS``).
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


_OPEN: "weakref.WeakSet[Retriever]" = weakref.WeakSet()


@atexit.register
def _stop_loaders() -> None:
    for retriever in list(_OPEN):
        retriever.close()


_EMBEDDING_POOL: ThreadPoolExecutor | None = None
_EMBEDDING_POOL_LOCK = threading.Lock()


def _embedding_pool() -> ThreadPoolExecutor:
    global _EMBEDDING_POOL
    with _EMBEDDING_POOL_LOCK:
        if _EMBEDDING_POOL is None:
            _EMBEDDING_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vecmem-query-embedding")
        return _EMBEDDING_POOL


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


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """As Chroma's cosine space computes it (the vectors of every shipped embedder are unit length already)."""
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms > 0 else 0.0


def _query_parts(query: str, utterances: list[str] | None) -> list[tuple[list[str], float]]:
    if utterances is None:
        return [(tokenize(query), 1.0)]
    weights = recency_weights(len(utterances), DIALOGUE_KEYWORD_DECAY)
    return [(tokenize(text), float(weight)) for text, weight in zip(utterances, weights, strict=True)]

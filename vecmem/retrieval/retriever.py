"""Ranking a query against one user's memories: dense and keyword candidates, fusion, the reranker.

The hot path avoids what is slow at 100,000 memories: Chroma's where-filter (only the collections of the
filter's types are searched, unfiltered, and scope and state are filtered in memory), rebuilding BM25 (edits go
to a delta), fetching records that will not be returned (candidates are ranked from the in-memory catalogue
first), fetching records at all (each user's records are held in memory by its replica, ``replica.py``), and
writing access statistics to Chroma (``access.py`` keeps them in the state database).

A search reads one snapshot of the user's replica from start to end, so writes made by other threads while it
runs never mix into it (replica.py, keyword.py); what it reads from the store itself is the store's own
present, and every record returned passes the filter again.
"""

from __future__ import annotations

import atexit
import math
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from vecmem.config import Settings
from vecmem.errors import StoreError
from vecmem.models import Hit, MemoryFilter, MemoryRecord
from vecmem.retrieval.embedding.calibration import LANGUAGES, Anchors, language, pair_of
from vecmem.retrieval.embedding.embedders import Embedder, second_view_embedder
from vecmem.retrieval.fusion import Fusion, Fusions, Typical, cosine
from vecmem.retrieval.index.held import HeldVectors
from vecmem.retrieval.index.keyword import FilterView, KeywordIndex, KeywordResult
from vecmem.retrieval.index.replica import Replicas, Snapshot, UserCopy
from vecmem.retrieval.index.second_view import SecondView
from vecmem.retrieval.query.parsed import DIALOGUE_KEYWORD_DECAY, ParsedQuery, one_pass, parse_query
from vecmem.retrieval.query.timeframe import TimeWindow
from vecmem.retrieval.query.tokenize import keep_dictionary_in, matched_terms, memory_tokens, recency_weights
from vecmem.retrieval.query.variants import NO_VARIANTS, Variants, spelling_variants
from vecmem.retrieval.rank import rank_by_importance, rerank, score, timeliness
from vecmem.retrieval.relevance import Cohort, CohortStats
from vecmem.storage.base import MemoryStore
from vecmem.storage.state.access import AccessStats

__all__ = ["DIALOGUE_DENSE_DECAY", "DIALOGUE_KEYWORD_DECAY", "Retriever"]

DIALOGUE_DENSE_DECAY = 0.5  # each earlier utterance of a dialogue-shaped query weighs half as much
FETCH_SPARES = 3  # records fetched beyond the k wanted: ties, and a catalogue a little behind the store
PREFETCH_VECTORS_AT_MOST = 64  # keyword candidates whose vectors are read while the query is embedded (a few ms)
EXACT_SCAN_AT_MOST = 100_000  # a user's held vectors are scanned exactly up to this many (_dense_candidates)
MAX_UNFILTERED = 320  # the largest unfiltered over-fetch (a few ms at 100,000 memories) before restricting by id

_Result = TypeVar("_Result")


@dataclass(frozen=True)
class _Side:
    """What one query (or one part of a multi-part question) found: its candidates, their cosines (when the
    dense side ran), its keyword scores, its embedding and the spelling variants its names were widened by."""

    candidates: list[str]
    dense: dict[str, float]
    keyword: KeywordResult | None
    vector: Any
    variants: Variants
    second: Any = None  # the query's vector in the second view, when it is on


class Retriever:
    def __init__(self, store: MemoryStore, embedder: Embedder, settings: Settings, access: AccessStats,
                 second: Embedder | None = None) -> None:
        """``second``: the second dense view's model (default: ``VECMEM_SECOND_VIEW``'s, index/second_view.py)."""
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.access = access
        caches = (settings.model_cache, settings.home / "cache")
        second = second or second_view_embedder(settings)
        self.second = None if second is None else SecondView(
            second, settings.home / "second-view" / f"{second.name}.sqlite3")
        self._second_cohort = None if second is None else Cohort(second, caches)
        self._replicas = Replicas(store, settings, self.second)
        # the bar a cosine must clear to count as relevant, and what a cosine means for this model (relevance.py,
        # calibration.py), for any embedder: kept in the model cache (the user's cache folder), or in the store's
        # home where that cannot be written
        self._cohort = Cohort(embedder, caches)
        self._pool: ThreadPoolExecutor | None = None  # embeds a query while the keyword side runs; made lazily
        self._pool_lock = threading.Lock()
        # jieba's dictionary built once per home, not again whenever the system temp folder is cleaned (tokenize.py)
        keep_dictionary_in(settings.segmenter_cache)
        _OPEN.add(self)

    # ------------------------------------------------------------------------------------------ keeping in step

    def on_written(
        self, user: str, records: Sequence[MemoryRecord], tokens: Sequence[Sequence[str]], vectors: np.ndarray
    ) -> None:
        second = None if self.second is None else self.second.vectors(user, [(r.id, r.content) for r in records])
        self._replicas.on_written(user, records, tokens, vectors, second)

    def on_fields_changed(self, user: str, records: Sequence[MemoryRecord]) -> None:
        self._replicas.on_fields_changed(user, records)

    def on_forgotten(self, user: str, memory_ids: Sequence[str]) -> None:
        self._replicas.on_forgotten(user, memory_ids)
        if self.second is not None:
            self.second.forget(user, memory_ids)

    def clear(self) -> None:
        self._replicas.clear()

    def keyword_index(self, user: str) -> KeywordIndex:
        """The user's keyword index, brought up to date with other banks' and other processes' writes (the
        change feed)."""
        return self._replicas.current(user).index

    def warm_up(self) -> None:
        """Load the embedding model and embed the relevance cohort (relevance.py) before a first search needs them."""
        self._cohort.baseline(self.embedder.embed_query("warm up"))
        self._cohort.calibration()
        if self._second_cohort is not None and self.second is not None:
            self._second_cohort.baseline(self.second.embedder.embed_query("warm up"))

    def hold_vectors(self, user: str, timeout: float | None = None) -> bool:
        """Hold the user's vectors in memory from now on (held.py) and wait up to ``timeout`` for them; True
        once all are held. Long-running processes ask for this (``MemoryBank.warm_up``); a one-off command never
        pays for it."""
        return self._replicas.hold_vectors(user, timeout)

    # the replicas' own state, as tests and the crash child look at it through the bank
    @property
    def _copies(self) -> dict[str, UserCopy]:
        return self._replicas.copies

    def _current(self, user: str) -> UserCopy:
        return self._replicas.current(user)

    def close(self) -> None:
        """Stop the vector loaders, drop every copy and shut the query-embedding threads down (after the
        queries they embed). A loader still inside Chroma when the interpreter shuts down would crash it, so this
        also runs at exit."""
        self._replicas.close()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self.second is not None:
            self.second.close()

    def _submit(self, work: Callable[..., _Result], *args: Any) -> Future[_Result]:
        with self._pool_lock:  # submitted under the lock: close() never shuts the pool between making and using it
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vecmem-query-embedding")
            return self._pool.submit(work, *args)

    def visible(self, user: str, memory_filter: MemoryFilter) -> list[MemoryRecord]:
        """Every memory of the user the filter lets through, in no order: from the replica, brought up to date
        with the feed as a search brings it (the store is read only where the replica is not exact)."""
        snapshot = self._replicas.snapshot(user)
        # the catalogue's "superseded" covers every memory a search never returns (archived, pending too): the
        # view keeps them, and each record's own fields decide (a listing of the review queue asks for pending ones)
        view = snapshot.index.view(replace(memory_filter, include_superseded=True))
        ids = [memory_id for of_type in view.visible_ids().values() for memory_id in of_type]
        return [record for record in self._replicas.records(user, snapshot, ids, view) if memory_filter.matches(record)]

    # ------------------------------------------------------------------------------------------ ranking

    def rank(self, query: str, k: int, user: str, memory_filter: MemoryFilter, now: datetime) -> list[Hit]:
        settings = self.settings
        if not query.strip():
            records = self.access.apply(list(self.store.scan(user, memory_filter)))
            return rank_by_importance(records, now=now, weights=settings.weights,
                                      decay_per_day=settings.recency_decay_per_day)[:k]
        wanted = max(k * settings.overfetch_factor, settings.min_candidates)
        parsed = parse_query(query)  # read once, and once for the agent's several searches of one message
        # the time the question names (timeframe.py): evidence in the similarity (fusion.py) and, in place of
        # closeness to now, the recency term (rank.py); a conversation's "today" names none
        window = parsed.window(now)
        snapshot = self._replicas.snapshot(user)
        view = snapshot.index.view(memory_filter)
        # a question that asks several things is retrieved part by part, each memory counting by the part that
        # points at it most (question.py); anything else is one part
        sides = [self._side(user, part, snapshot, view, wanted) for part in parsed.asked]
        candidates = list(dict.fromkeys(memory_id for side in sides for memory_id in side.candidates))
        vector, dense, held = sides[0].vector, sides[0].dense, snapshot.vectors
        if window is not None:  # memories of the window that neither side found
            candidates += self._window_candidates(user, window, view, wanted, set(candidates), vector, held, dense)
        if len(candidates) < k:  # fewer matched than asked for (keyword mode): k whenever k are visible
            weights = settings.weights
            candidates += view.best_by_priors(k - len(candidates), set(candidates), now.timestamp(), weights.recency,
                                              weights.importance, settings.recency_decay_per_day)
        dates = None if window is None else {i: window.closeness(fields[1]) for i in candidates
                                             if (fields := view.ranking_fields(i)) is not None}
        languages = {memory_id: language(" ".join(snapshot.index.tokens_of(memory_id) or ()))
                     for memory_id in candidates} if sides[0].vector is not None else None
        asked_in = language(query)
        anchors = self._anchors(asked_in) if languages is not None else {}
        unreadable = frozenset(lang for lang, found in anchors.items() if lang != asked_in and not found.informative)
        fusions = [Fusion(None if side.vector is None else side.dense, side.keyword, settings.dense_weight,
                          None if side.vector is None else self._cohort.stats(side.vector), dates, languages,
                          anchors, unreadable, self._second_side(side, snapshot, candidates),
                          covering=settings.keyword_coverage and part.utterances is None, asked_in=asked_in)
                   for part, side in zip(parsed.asked, sides, strict=True)]
        # the similarity the reranker weighs, measured from the typical candidate (fusion.py, *Against the typical
        # candidate*)
        fusion = Typical(fusions[0] if len(fusions) == 1 else Fusions(fusions), candidates)
        used = self.access.lookup(user, candidates)  # one read for the ranking and the records returned
        ranked = self._preselect(candidates, fusion, view, now, used, window)
        pairs: list[tuple[MemoryRecord, float]] = []
        parts: dict[str, tuple[float | None, float | None, float]] = {}
        fetched = 0
        # Fetch the best few by the catalogue's ranking; more only when some turn out hidden or gone (another
        # process changed them since the catalogue was last checked). Each row read costs a fraction of a ms.
        while len(pairs) < k and fetched < len(ranked):
            chosen = ranked[fetched : fetched + (k - len(pairs)) + FETCH_SPARES]
            fetched += len(chosen)
            for record in self.access.apply(self._replicas.records(user, snapshot, chosen, view), known=used):
                if not memory_filter.matches(record):  # defence in depth: never trust a filter we did not write
                    continue
                similarity, dense_part, relative = fusion.parts(record.id)
                pairs.append((record, similarity))
                parts[record.id] = (dense_part, relative, fusion.relevance(record.id))
        hits = rerank(pairs, now=now, weights=settings.weights, decay_per_day=settings.recency_decay_per_day,
                      window=window)[:k]
        terms_asked = parsed.asked_terms
        terms_asked += [term for side in sides for term in side.variants.terms]  # variants: "Muhammad" matched
        # why each hit was found, for the k returned only: the query's terms its stored tokens hold (any mode)
        return [replace(hit, dense=parts[hit.id][0], keyword=parts[hit.id][1], relevance=parts[hit.id][2],
                        closeness=self._closeness(parts[hit.id][0], asked_in, hit.content),
                        matched_terms=matched_terms(query, terms_asked, snapshot.index.tokens_of(hit.id) or memory_tokens(hit.record)))
                for hit in hits]

    def _second_side(self, side: _Side, snapshot: Snapshot, candidates: list[str]
                     ) -> tuple[dict[str, float], dict[str, CohortStats]] | None:
        """The second view's cosines of every candidate and the query's chance level in it (fusion.py)."""
        if side.second is None or snapshot.second is None or self._second_cohort is None:
            return None
        return snapshot.second.cosines(candidates, side.second), self._second_cohort.stats(side.second)

    def _anchors(self, asked_in: str) -> dict[str, Anchors]:
        """By a memory's language, what this model's cosines mean between it and the query's (calibration.py)."""
        anchors = self._cohort.calibration().anchors
        return {lang: found for lang in LANGUAGES if (found := anchors.get(pair_of(asked_in, lang)))}

    def _closeness(self, cosine: float | None, asked_in: str, content: str) -> float | None:
        """The cosine on the model's calibrated scale (calibration.py), for the query's and the memory's languages."""
        if cosine is None:
            return None
        return self._cohort.calibration().closeness(cosine, asked_in, language(content))

    def _side(self, user: str, query: ParsedQuery, snapshot: Snapshot, view: FilterView, wanted: int) -> _Side:
        """Both sides' candidates of one query (or one part of a multi-part question), each with its cosine."""
        mode = self.settings.search_mode
        held = snapshot.vectors
        # The query is embedded in another thread while the keyword side runs here and reads the stored vectors
        # of its candidates (both take a few ms, the embedding longer, mostly outside the GIL).
        pending = None if mode == "keyword" else self._submit(self._query_vector, query.text, query.utterances)
        keyword: KeywordResult | None = None
        variants = NO_VARIANTS
        stored: dict[str, np.ndarray] | None = None
        if mode != "dense":
            asked_parts = query.keyword_parts
            variants = spelling_variants(snapshot.index, query)  # names the index lacks (variants.py)
            keyword = snapshot.index.search(asked_parts, view, wanted, variants.parts)
            top = [memory_id for memory_id, _ in keyword.top]
            if held is not None and held.complete:
                top = []  # every vector is held
            elif held is not None:
                top = [memory_id for memory_id in top if memory_id not in held]
            if pending is not None and top and len(top) <= PREFETCH_VECTORS_AT_MOST:
                stored = self.store.vectors(user, top, type_of={i: t for i in top if (t := view.type_of(i))})
        dense: dict[str, float] = {}
        # the second view's query vector here, while the store's model embeds it in the other thread (USE takes a
        # few ms on one core; handing it to a thread of its own cost more than that on two busy cores)
        second = None if pending is None or self.second is None or snapshot.second is None else \
            self._query_vector(query.text, query.utterances, self.second.embedder)
        vector = None if pending is None else pending.result()
        if vector is not None:
            dense = self._dense_candidates(user, vector, wanted, view, held)
        nearest = [] if second is None or snapshot.second is None else list(snapshot.second.nearest(
            second, wanted, lambda memory_id: view.visible(memory_id) is not False))  # the second view's own
        candidates = list(dict.fromkeys([*dense, *nearest, *(i for i, _ in (keyword.top if keyword else []))]))
        if vector is not None:  # keyword-only candidates: their cosine from their stored vectors
            keyword_only = [memory_id for memory_id in candidates if memory_id not in dense]
            if held is not None:
                dense.update(held.cosines(keyword_only, vector))
                keyword_only = [memory_id for memory_id in keyword_only if memory_id not in dense]
            if stored is not None:
                dense.update((i, cosine(stored[i], vector)) for i in keyword_only if i in stored)
            elif keyword_only:
                self._add_cosines(user, vector, keyword_only, view, dense)
        return _Side(candidates, dense, keyword, vector, variants, second)

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
            ids, cosines = self._nearest_among(user, vector, count, types=missing, among=missing,
                                               sizes=view.type_sizes)
            dense.update(zip(ids, cosines, strict=True))

    def _preselect(self, candidates: list[str], fusion: Typical, view: FilterView, now: datetime,
                   used: Mapping[str, tuple[int, float]], window: TimeWindow | None = None) -> list[str]:
        """The candidates, best first by the reranker's own score computed from the in-memory catalogue and
        the access statistics (``used``), so that only the best few are fetched from Chroma."""
        settings = self.settings
        seconds = now.timestamp()
        ranked: list[tuple[float, str]] = []
        for memory_id in candidates:
            fields = view.ranking_fields(memory_id)
            if fields is None:  # hidden, or written by another bank or client since the snapshot: fetched last
                ranked.append((float("-inf"), memory_id))
                continue
            importance, created, stored_last = fields
            last_used = max(created, stored_last, used.get(memory_id, (0, 0.0))[1])
            total = score(fusion.parts(memory_id)[0],
                          timeliness(created, last_used, seconds, settings.recency_decay_per_day, window),
                          importance, settings.weights)
            ranked.append((total, memory_id))
        ranked.sort(key=lambda pair: (-pair[0], pair[1]))
        return [memory_id for _, memory_id in ranked]

    def _window_candidates(self, user: str, window: TimeWindow, view: FilterView, wanted: int, known: set[str],
                           vector: Any, held: HeldVectors | None, dense: dict[str, float]) -> list[str]:
        """Up to ``wanted`` of the latest memories created inside the query's time window (timeframe.py) that
        are not candidates yet, their cosines added to ``dense``: a question such as "what did I do last
        Tuesday" names its evidence by date more than by words. Read from the catalogue, not the store."""
        added = [memory_id for memory_id in view.created_within(window.start.timestamp(), window.end.timestamp(),
                                                                 wanted) if memory_id not in known]
        if vector is not None and added:
            if held is not None:
                dense.update(held.cosines(added, vector))
            self._add_cosines(user, vector, [i for i in added if i not in dense], view, dense)
        return added

    def _dense_candidates(self, user: str, vector: Any, wanted: int, view: FilterView,
                          held: HeldVectors | None = None) -> dict[str, float]:
        """The ``wanted`` nearest memories the filter lets through, as {id: cosine}.

        Exactly, from the vectors this process holds (held.py), when it holds all of a user's and the user has
        at most EXACT_SCAN_AT_MOST memories: an HNSW index answers approximately (on a 9,000-turn benchmark its
        top 10 differed from the exact one for some questions), and a scan of 100,000 held vectors costs about as
        much as a Chroma query. Otherwise from the store, as follows.

        Chroma's where-filter is slow at 100,000 memories, many times a plain query. Instead only the collections
        of the filter's types are searched, and within them, when the filter lets most memories through, Chroma is
        asked unfiltered for enough neighbours that ``wanted`` should pass (a few ms); when it lets few
        through, or too few passed, the search is restricted to the visible ids the keyword index knows
        (the store picks between reading their vectors, exact, and a restricted HNSW search, which finds what
        Chroma's own filtered query finds, by the collection's size). With a Chroma server, memories another
        process wrote since the index was last checked are not searched until the next check
        (``VECMEM_INDEX_CHECK_SECONDS``).
        """
        if held is not None and held.complete and len(held) <= EXACT_SCAN_AT_MOST:
            return held.nearest(vector, wanted, lambda memory_id: view.visible(memory_id) is not False)
        types = view.memory_filter.types  # a type filter is a choice of collections (store.py)
        fetch = max(wanted, math.ceil(1.3 * wanted / max(view.fraction, 1e-6)))
        while fetch <= MAX_UNFILTERED and view.count > 16 * fetch:  # unfiltered is cheaper than restricting
            ids, cosines = self.store.nearest(user, vector, fetch, types=types)
            kept = {i: c for i, c in zip(ids, cosines, strict=True) if view.visible(i) is not False}
            if len(kept) >= wanted or len(ids) < fetch:  # enough, or every memory was looked at
                return dict(list(kept.items())[:wanted])
            fetch *= 4
        ids, cosines = self._nearest_among(user, vector, wanted, types=types, among=view.visible_ids(),
                                           sizes=view.type_sizes)
        return dict(zip(ids, cosines, strict=True))

    def _nearest_among(
        self, user: str, vector: Any, wanted: int, *, types: Iterable[str] | None,
        among: Mapping[str, Sequence[str]], sizes: Mapping[str, int],
    ) -> tuple[list[str], list[float]]:
        """The store's nearest among these ids (the snapshot's). Another thread may have deleted one of them
        from the store since the snapshot was taken, and Chroma refuses an id-restricted search naming an id it
        no longer holds; the search is then answered exactly from the stored vectors of the ids still there."""
        try:
            return self.store.nearest(user, vector, wanted, types=types, among=among, sizes=sizes)
        except StoreError:
            type_of = {memory_id: kind for kind, ids in among.items() for memory_id in ids}
            stored = self.store.vectors(user, list(type_of), type_of=type_of)  # ids no longer stored are skipped
            ranked = sorted(((cosine(v, vector), memory_id) for memory_id, v in stored.items()),
                            key=lambda pair: (-pair[0], pair[1]))[:wanted]
            return [memory_id for _, memory_id in ranked], [value for value, _ in ranked]

    def _query_vector(self, query: str, utterances: tuple[str, ...] | None, embedder: Embedder | None = None) -> Any:
        """The query embedding (by the store's model, or ``embedder``); for a dialogue, the recency-weighted mean of
        its utterances (latest counts most: a long dialogue would otherwise be cut to its first 256 tokens by the
        model). Each text is embedded as far as the model reads it in one pass (``one_pass``), so a query's
        embedding costs at most one pass a part."""
        embedder = embedder or self.embedder
        if utterances is None:
            return embedder.embed_query(one_pass(query))
        vectors = embedder.embed_queries([one_pass(utterance) for utterance in utterances])
        mean = (recency_weights(len(utterances), DIALOGUE_DENSE_DECAY)[:, None] * vectors).sum(axis=0)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm else mean


_OPEN: weakref.WeakSet[Retriever] = weakref.WeakSet()


@atexit.register
def _stop_loaders() -> None:
    for retriever in list(_OPEN):
        retriever.close()

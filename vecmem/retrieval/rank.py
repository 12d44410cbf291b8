"""The reranker: by default the blend the product specifies, ``score = w_s·similarity + w_r·recency +
w_i·importance`` (weights 0.6 / 0.2 / 0.2), so every hit's parts add up to its score.

A documented alternative, ``VECMEM_GATED_PRIORS=on``, gates the priors: ``score = w_s·similarity + max(1 -
similarity, TIE_BAND)·(w_r·recency + w_i·importance)``. Recency and importance say which memories matter in
general, not what this query asks; gated, they weigh in proportion to how little the query says about a memory,
so among memories the query does not tell apart they decide the order, and they cannot lift a memory above one
the query's evidence clearly prefers. Near the top the share never falls below TIE_BAND (0.2), so two memories
the query points at almost alike are still told apart by the priors, the newer first. A memory nothing in the
query points at (similarity 0) scores the same either way. ``make eval`` reports both blends on every benchmark
(docs/benchmarks.md, "Recall, measured").

* similarity: how much the query points at the memory, per query from its typical candidate (0) to its best
  evidence (retrieval/fusion.py, *Against the typical candidate*: so that these fixed weights mean the same in
  every store and with every model), in [0, 1];
* recency: ``exp(-λ·days)`` with days counted from the later of created_at and last_accessed, so a memory
  that keeps being used stays fresh (λ = 0.01 per day by default: a half-life of about 69 days);
* importance: the memory's importance in [0, 1] times its confidence, so a memory a model extracted with
  confidence 0.5 weighs half as much as the same statement made by the user (confidence 1.0, the default:
  every memory stated or added by hand ranks exactly as before).

When the query names a time ("last Tuesday", 去年五月: timeframe.py), the recency term is instead the memory's
closeness to that window (``TimeWindow.closeness``: 1 for a memory created inside it, decaying with the days
outside, in units of the window's length): the question says which time matters, and it is not "now". It is
read from ``created_at`` only, for the question is about when something happened or was said, not when the
memory was last used. The date is also evidence in the similarity itself (fusion.py), so it counts with
similarity-only weights (1 / 0 / 0) too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from vecmem.config import RankWeights
from vecmem.models import Hit, MemoryRecord
from vecmem.retrieval.query.timewindow import TimeWindow

__all__ = ["TIE_BAND", "prior_share", "freshness", "recency", "score", "weight", "rerank", "rank_by_importance", "timeliness"]

_SECONDS_PER_DAY = 86_400.0
TIE_BAND = 0.2  # the least share of the priors a memory gets, near the top (module docstring)


def freshness(seconds_since_use: float, decay_per_day: float) -> float:
    """exp(-λ·days); a use in the future counts as now."""
    return math.exp(-decay_per_day * max(0.0, seconds_since_use) / _SECONDS_PER_DAY)


def recency(record: MemoryRecord, now: datetime, decay_per_day: float) -> float:
    """exp(-λ·days since last use), counted from the later of created_at and last_accessed."""
    return freshness((now - record.last_used).total_seconds(), decay_per_day)


def timeliness(created: float, last_used: float, now: float, decay_per_day: float, window: TimeWindow | None) -> float:
    """The recency term from epoch seconds: closeness to the query's time window when it names one, else
    ``freshness`` since the last use."""
    if window is not None:
        return window.closeness(created)
    return freshness(now - last_used, decay_per_day)


def prior_share(similarity: float, gated: bool = False) -> float:
    """How much of the priors (recency, importance) a memory of this similarity gets: all of them in the specified
    blend; gated, ``max(1 - similarity, TIE_BAND)`` (module docstring)."""
    return max(1.0 - similarity, TIE_BAND) if gated else 1.0


def score(similarity: float, recency_value: float, importance: float, weights: RankWeights) -> float:
    priors = weights.recency * recency_value + weights.importance * importance
    return weights.similarity * similarity + prior_share(similarity, weights.gated) * priors


def weight(record: MemoryRecord) -> float:
    """The importance term of the score: importance scaled by confidence."""
    return record.importance * record.confidence


def _hit(record: MemoryRecord, similarity: float, now: datetime, weights: RankWeights, decay: float,
         window: TimeWindow | None = None) -> Hit:
    similarity = min(1.0, max(0.0, similarity))
    fresh = recency(record, now, decay) if window is None else window.closeness(record.created_at.timestamp())
    return Hit(
        id=record.id,
        content=record.content,
        type=record.type,
        score=score(similarity, fresh, weight(record), weights),
        similarity=similarity,
        recency=fresh,
        importance=weight(record),  # the score's part: the record keeps its own importance and confidence
        record=record,
    )


def rerank(
    candidates: Iterable[tuple[MemoryRecord, float]],
    *,
    now: datetime,
    weights: RankWeights,
    decay_per_day: float,
    window: TimeWindow | None = None,
) -> list[Hit]:
    """Score (record, similarity) pairs and sort them best first; ties go to the lower id, for repeatability.
    ``window``: the query's time window, if it names one (the module's docstring)."""
    hits = [_hit(record, similarity, now, weights, decay_per_day, window) for record, similarity in candidates]
    hits.sort(key=lambda hit: (-hit.score, hit.id))
    return hits


def rank_by_importance(
    records: Iterable[MemoryRecord], *, now: datetime, weights: RankWeights, decay_per_day: float
) -> list[Hit]:
    """For an empty query: the most important memories first (then the most recent), similarity 0."""
    hits = [_hit(record, 0.0, now, weights, decay_per_day) for record in records]
    hits.sort(key=lambda hit: (-hit.importance, -hit.recency, hit.id))
    return hits

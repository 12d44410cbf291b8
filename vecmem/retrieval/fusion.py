"""How one query's dense and keyword sides are combined: into the similarity the reranker weighs, and into the
relevance a prompt's floor compares (relevance.py)."""

from __future__ import annotations

import numpy as np

from vecmem.retrieval.keyword import KeywordResult
from vecmem.retrieval.relevance import dense_relevance
from vecmem.retrieval.tokenize import recency_weights, terms

__all__ = ["DIALOGUE_KEYWORD_DECAY", "Fusion", "cosine", "query_parts", "query_terms"]

DIALOGUE_KEYWORD_DECAY = 0.7  # each earlier utterance of a dialogue-shaped query weighs 0.7 times as much


class Fusion:
    """One query's similarity of a memory: w·cosine + (1 - w)·keyword, or the one side that ran; and its relevance.
    ``baseline``: the query's cohort bar (relevance.Cohort), when the dense side ran."""

    def __init__(self, dense: dict[str, float] | None, keyword: KeywordResult | None, dense_weight: float,
                 baseline: float | None = None) -> None:
        self.dense = dense
        self.keyword = keyword
        self.dense_weight = dense_weight
        self.baseline = baseline

    def parts(self, memory_id: str) -> tuple[float, float | None, float | None]:
        """(similarity, cosine, keyword relative to the query's best keyword match), each in [0, 1]."""
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

    def relevance(self, memory_id: str) -> float:
        """The larger of the two sides' evidence beyond chance, in [0, 1] (relevance.py)."""
        sides = []
        if self.dense is not None and self.baseline is not None:
            sides.append(dense_relevance(self.dense.get(memory_id, 0.0), self.baseline))
        if self.keyword is not None:
            scale = self.keyword.scale
            sides.append(min(1.0, self.keyword.score_of(memory_id) / scale) if scale > 0 else 0.0)
        return max(sides, default=0.0)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """As Chroma's cosine space computes it (the vectors of every shipped embedder are unit length already)."""
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms > 0 else 0.0


def query_terms(query: str, utterances: list[str] | None) -> list[list[tuple[str, str]]]:
    """The query's terms (tokenize.terms), tokenized once for ranking and for each hit's matched terms: the query
    whole, or each utterance of a dialogue."""
    return [terms(text) for text in ([query] if utterances is None else utterances)]


def query_parts(worded: list[list[tuple[str, str]]]) -> list[tuple[list[str], float]]:
    """The keyword side's (tokens, weight) parts of ``query_terms``: one of weight 1 for a plain query, one per
    utterance of a dialogue, the latest weighing most."""
    weights = recency_weights(len(worded), DIALOGUE_KEYWORD_DECAY)
    return [([token for _, token in part], float(weight)) for part, weight in zip(worded, weights, strict=True)]

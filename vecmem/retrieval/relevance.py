"""Relevance: how much a memory has to do with a query, on one scale in [0, 1] whatever the search mode, the
language and the embedding model. It decides what may go into a prompt (the relevance floor, budget.py); it
never reorders a search (the reranker's score does that, and recency and importance, which say nothing about
what the query asks, are no part of it).

Neither side's similarity can serve as it is. The keyword side is divided by the query's best match (fusion.py),
so some memory always scores 1, however weak that match. A cosine means nothing by itself: all-MiniLM-L6-v2 gives
unrelated English statements 0.0 to 0.3, while any two Chinese texts score 0.6 to 0.8 (the model carries no
signal for Chinese), so one cosine floor would let every Chinese memory in or none. Each side is therefore
measured against what it gives when nothing matches:

* **dense**: the query is also compared with a *cohort* of plain statements about unrelated things (``COHORT``,
  written like memories, in English and in Chinese; embedded once by the same model), and a memory's cosine
  counts only for how far it stands above the query's second-best cosine with them: ``(cosine - b) / (1 - b)``,
  clamped to [0, 1]. A memory no more like the query than statements about other things scores 0: with a model
  that cannot tell Chinese texts apart, almost every Chinese memory does, and keywords decide. One bar for both
  languages, the higher of what either language's statements reach: all-MiniLM-L6-v2 puts every Chinese text
  near the English word "Chinese", so "好的" scored 0.40 against "Reply in English unless the user writes in
  Chinese", far above the English statements, though not above the Chinese ones. The second best (not the
  best) so that one cohort statement that happens to share the query's topic does not silence it; and the
  statements are about what memories seldom are (an umbrella's colour, a salt mine), never what they often are
  (food, allergies, family, work, home, tools): against a first cohort, "suggest a dinner recipe, keep my
  allergy in mind" stood no higher above "The user is allergic to cats" and "...learning to cook Italian food"
  than the memory it was about. This is cohort normalisation (T-norm in speaker verification): the same query's
  scores against impostors set the bar;
* **keyword**: BM25 on the scale of the lesser of two scores: the query's whole (every query term once in a
  memory of average length, the score a memory that holds all the query asks would get) and one *unit* of
  evidence (one query term that only this memory holds: ``idf(df = 1) / (1 + k1)``), capped at 1. Holding every
  word of "coding habits" is full evidence however common the words are among the user's memories; so is sharing
  one rare term: "帮我写一个查询 PostgreSQL 的函数" is about the one memory that names PostgreSQL, however many other
  words it has. Sharing only words most memories hold ("user", 用户), of a longer query, is next to none.

The relevance of a memory is the larger of the two sides that ran (one side in ``dense`` and ``keyword``
mode): either kind of evidence is enough, so a floor means the same in every mode.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vecmem.retrieval.embedders import Embedder

__all__ = ["COHORT", "Cohort", "CohortStats", "dense_relevance", "idf", "keyword_scale"]

COHORT: Mapping[str, tuple[str, ...]] = {
    "en": (
        "The user's umbrella is dark green.", "The user once saw a lighthouse in Norway.",
        "The user is learning to juggle three balls.", "The user's grandfather repaired clocks.",
        "The user keeps a jar of old buttons.", "The user watched a meteor shower in August.",
        "The user's neighbour plays the trumpet.", "The user found a four-leaf clover as a child.",
        "The user likes notebooks with orange covers.", "The user counted the stairs of the old tower.",
        "The user painted the garden fence last weekend.", "The user owns a brass compass.",
        "The user sang in a choir at school.", "The user's doorbell plays a tune.",
        "The user likes the smell of rain on stone.", "The user visited a salt mine once.",
        "The user keeps a list of bird songs.", "The user sorted the bookshelf by colour.",
        "The user lost a glove at the fair.", "The user learned to tie a bowline knot.",
        "The user's window faces a chestnut tree.", "The user built a kite from newspaper.",
        "The user collects postcards of bridges.", "The user watched a puppet show in Prague.",
        "The user's alarm clock ticks loudly.", "The user planted tulip bulbs in October.",
        "The user once rode a camel.", "The user framed a map of the moon.",
        "The user's hallway lamp flickers.", "The user knits scarves in winter.",
        "The user climbed the hill behind the village.", "The user keeps seashells in a bowl.",
    ),
    "zh": (
        "用户的雨伞是深绿色的", "用户曾在挪威看到一座灯塔", "用户在学抛三个球", "用户的爷爷以前修钟表",
        "用户攒了一罐旧纽扣", "用户八月看过一场流星雨", "用户的邻居会吹小号", "用户小时候找到过四叶草",
        "用户喜欢橙色封面的本子", "用户数过老塔的台阶", "用户上周末刷了花园的篱笆", "用户有一个黄铜指南针",
        "用户上学时在合唱团唱歌", "用户家的门铃会放音乐", "用户喜欢雨后石头的气味", "用户参观过一座盐矿",
        "用户记录各种鸟叫声", "用户按颜色整理了书架", "用户在集市上丢了一只手套", "用户学会了打单套结",
        "用户的窗外有一棵栗子树", "用户用报纸做过风筝", "用户收集桥的明信片", "用户在布拉格看过木偶戏",
        "用户的闹钟走得很响", "用户十月种了郁金香球茎", "用户骑过一次骆驼", "用户装裱了一张月球地图",
        "用户家走廊的灯会闪", "用户冬天织围巾", "用户爬过村子后面的小山", "用户在碗里放着贝壳",
    ),
}
BASELINE_RANK = 2  # the cohort cosine that sets the bar: the second best (module docstring)


@dataclass(frozen=True)
class CohortStats:
    """What a query's cosines with the cohort say about chance for that query: their mean and spread (what a
    cosine with an unrelated memory looks like, fusion.py) and the bar a relevant memory must clear."""

    mean: float
    spread: float  # standard deviation
    bar: float  # the BASELINE_RANK-th best


class Cohort:
    """The cohort of one embedder: embedded on first use (64 short texts, once per bank), then one matrix-vector
    product per query."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    def baseline(self, query_vector: np.ndarray) -> float:
        """The query's BASELINE_RANK-th best cosine with the cohort: the bar a memory's cosine must clear."""
        return self.stats(query_vector).bar

    def stats(self, query_vector: np.ndarray) -> CohortStats:
        """The query's cosines with the cohort, summed up (one matrix-vector product)."""
        cosines = np.sort(self._load() @ np.asarray(query_vector, dtype=np.float32))[::-1]
        return CohortStats(float(cosines.mean()), float(cosines.std()), float(cosines[min(BASELINE_RANK, len(cosines)) - 1]))

    def _load(self) -> np.ndarray:
        with self._lock:
            if self._vectors is None:
                texts = [text for statements in COHORT.values() for text in statements]
                matrix = np.asarray(self._embedder.embed_documents(texts), dtype=np.float32)
                norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                self._vectors = matrix / np.where(norms > 0, norms, 1.0)
            return self._vectors


def dense_relevance(cosine: float, baseline: float) -> float:
    """How far a cosine stands above the cohort's bar, as a share of the way to 1; 0 at or below it."""
    if baseline >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (cosine - baseline) / (1.0 - baseline)))


def idf(df: int, documents: int) -> float:
    """Lucene's inverse document frequency, as bm25s and the keyword index's delta score it."""
    return math.log(1.0 + (documents - df + 0.5) / (df + 0.5))


def keyword_scale(query_terms: Iterable[tuple[int, float]], documents: int, k1: float) -> float:
    """The BM25 score that is full keyword evidence for a query (module docstring): the lesser of the query's whole
    and one unit. ``query_terms``: (document frequency, weight) of each query term, as often as the query has it
    (the weight of its utterance in a dialogue, weights summing to 1); 0 for a query without terms."""
    n = max(1, documents)
    whole = sum(weight * idf(df, n) for df, weight in query_terms) / (1.0 + k1)
    return min(whole, idf(1, n) / (1.0 + k1))

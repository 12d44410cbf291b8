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

import hashlib
import logging
import math
import threading
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vecmem.retrieval.embedding.calibration import PARAPHRASES, Calibration, calibrate
from vecmem.retrieval.embedding.fingerprint import remembered
from vecmem.storage.files import private_dir, replace_atomically

if TYPE_CHECKING:
    from vecmem.retrieval.embedding.embedders import Embedder

__all__ = ["COHORT", "Cohort", "CohortStats", "dense_relevance", "idf", "keyword_scale"]

log = logging.getLogger("vecmem")

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
    """What a query's cosines with the cohort of one language say about chance for that query: their mean and
    spread (what a cosine with an unrelated memory in that language looks like, fusion.py) and the bar a relevant
    memory in that language must clear."""

    mean: float
    spread: float  # standard deviation
    bar: float  # the BASELINE_RANK-th best


# the calibration set's own key: a cache file made from other texts is never read as this one
_TEXTS = hashlib.sha256("\n".join([*(t for texts in COHORT.values() for t in texts),
                                   *(t for pair in PARAPHRASES for t in pair)]).encode("utf-8")).hexdigest()
_ROWS = {**{f"{side}-{lang}": len(texts) for lang, texts in COHORT.items() for side in ("doc", "query")},
         "paraphrase-query": len(PARAPHRASES), "paraphrase-doc": len(PARAPHRASES)}  # what a whole cache file holds


class Cohort:
    """The cohort of one embedder and its calibration (calibration.py): embedded on first use, then one
    matrix-vector product per query. With ``caches`` (folders, the first that takes a file keeps it) the vectors
    are kept in a file keyed by what the model computes (embedding/fingerprint.py) and the calibration set, so
    only the first process on a machine pays for embedding them, whoever made the embedder, and new weights
    under an old name are measured anew. A damaged cache file is ignored and written again."""

    def __init__(self, embedder: Embedder, caches: Sequence[Path] = ()) -> None:
        self._embedder = embedder
        self._caches = tuple(caches)
        self._vectors: dict[str, np.ndarray] | None = None
        self._calibration: Calibration | None = None
        self._lock = threading.Lock()

    def baseline(self, query_vector: np.ndarray) -> float:
        """The query's BASELINE_RANK-th best cosine with the cohort, both languages together."""
        return self._of(self._all(), query_vector).bar

    def stats(self, query_vector: np.ndarray) -> dict[str, CohortStats]:
        """The query's cosines with the cohort of each language, summed up: what an unrelated memory in that
        language scores for this query (the two differ: a model's cosines run higher within a language)."""
        vectors = self._load()
        return {lang: self._of(vectors[f"doc-{lang}"], query_vector) for lang in COHORT}

    def calibration(self) -> Calibration:
        """The model's anchors (calibration.py), measured on first use."""
        with self._lock:
            if self._calibration is None:
                vectors = self._load_locked(calibration=True)
                self._calibration = calibrate(
                    self._embedder.name, {lang: vectors[f"query-{lang}"] for lang in COHORT},
                    {lang: vectors[f"doc-{lang}"] for lang in COHORT}, vectors["paraphrase-query"],
                    vectors["paraphrase-doc"])
            return self._calibration

    @staticmethod
    def _of(matrix: np.ndarray, query_vector: np.ndarray) -> CohortStats:
        cosines = np.sort(matrix @ np.asarray(query_vector, dtype=np.float32))[::-1]
        return CohortStats(float(cosines.mean()), float(cosines.std()),
                           float(cosines[min(BASELINE_RANK, len(cosines)) - 1]))

    def _all(self) -> np.ndarray:
        vectors = self._load()
        return np.concatenate([vectors[f"doc-{lang}"] for lang in COHORT])

    def _load(self) -> dict[str, np.ndarray]:
        with self._lock:
            return self._load_locked(calibration=False)

    def _load_locked(self, *, calibration: bool) -> dict[str, np.ndarray]:
        if self._vectors is None or (calibration and "paraphrase-doc" not in self._vectors):
            self._vectors = self._read_cache() or self._embed(calibration=calibration or bool(self._caches))
        return self._vectors

    def _embed(self, *, calibration: bool) -> dict[str, np.ndarray]:
        """The cohort as memories; with ``calibration`` also as queries, and the paraphrase pairs. Saved to the
        cache when complete."""
        vectors = {f"doc-{lang}": _unit(self._embedder.embed_documents(list(texts))) for lang, texts in COHORT.items()}
        if calibration:
            vectors.update({f"query-{lang}": _unit(self._embedder.embed_queries(list(texts)))
                            for lang, texts in COHORT.items()})
            vectors["paraphrase-query"] = _unit(self._embedder.embed_queries([first for first, _ in PARAPHRASES]))
            vectors["paraphrase-doc"] = _unit(self._embedder.embed_documents([second for _, second in PARAPHRASES]))
            self._write_cache(vectors)
        return vectors

    def _cache_name(self) -> str:
        model = remembered(self._embedder, self._caches)
        digest = hashlib.sha256(f"{model}\n{_TEXTS}".encode("ascii")).hexdigest()[:16]
        return f"calibration-{digest}.npz"

    def _read_cache(self) -> dict[str, np.ndarray] | None:
        if not self._caches:
            return None
        name = self._cache_name()
        for folder in self._caches:
            path = folder / name
            if not path.is_file():
                continue
            try:
                with np.load(path) as stored:
                    vectors = {key: np.asarray(stored[key], dtype=np.float32) for key in stored.files}
                if {key: len(vectors.get(key, ())) for key in _ROWS} != _ROWS:
                    raise ValueError("not the whole calibration set")
                return vectors
            # a damaged or partly written file (np.load raises what its reader meets): measured again, rewritten
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
                log.warning("vecmem: ignoring the calibration cache %s (%s); measuring the model again", path, exc)
        return None

    def _write_cache(self, vectors: dict[str, np.ndarray]) -> None:
        if not self._caches:
            return
        name, failures = self._cache_name(), []
        for folder in self._caches:
            path = folder / name
            try:
                private_dir(folder)
                # numpy's stub types allow_pickle only
                replace_atomically(path, lambda out: np.savez(out, **vectors))  # type: ignore[arg-type]
                return
            except OSError as exc:  # a read-only cache: the next folder, else the next process measures again
                failures.append(f"{path}: {exc}")
        log.warning("vecmem: could not keep the calibration (%s)", "; ".join(failures))


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def dense_relevance(cosine: float, baseline: float, ceiling: float = 1.0) -> float:
    """How far a cosine stands above the cohort's bar, as a share of the way to ``ceiling``: the cosine of a
    statement with itself for this model and these languages (calibration.py; 1 for a model that embeds queries
    and memories alike), so a share means the same for every model; 0 at or below the bar."""
    if baseline >= ceiling:
        return 0.0
    return min(1.0, max(0.0, (cosine - baseline) / (ceiling - baseline)))


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

"""How one query's dense and keyword sides are combined: into the similarity the reranker weighs, and into the
relevance a prompt's floor compares (relevance.py).

Each side is first put on one scale per query, from what chance gives (0) to the query's best candidate (1):

* **dense**: how far each cosine stands above chance, in spreads, over the best candidate's, clamped to [0, 1]:
  chance is the query's mean cosine (and its spread) with the relevance cohort *in the memory's language*
  (statements about unrelated things, relevance.py): what an unrelated memory in that language scores for this
  query and this model. A raw cosine cannot serve: all-MiniLM-L6-v2 gives every Chinese text much the same high
  cosine, and multilingual-e5-small's cosines within a language run higher than across the two, so a Chinese
  question's English answer would lose to any Chinese memory. Where the model does not know a translation from an
  unrelated statement (calibration.py: all-MiniLM-L6-v2 across zh and en), a memory in the other language gets
  no dense evidence at all;
* **keyword**: BM25 divided by the query's best visible score (a memory sharing no term scores 0 already).

Each side then weighs as much as it is *informative* for this query, so an empty or flat side adds nothing:

* the dense side by how far its best cosine stands above chance, in the cohort's standard deviations ``z``:
  nothing at ``z <= 1``, fully from ``z >= 3`` (one-sided p of about 0.16 and 0.001), linear between. With
  all-MiniLM-L6-v2 a Chinese query's best memory stands barely above chance (the model carries no signal for
  Chinese: the side drops out), an English one's well above (the mean z of each benchmark: docs/benchmarks.md,
  *Why retrieval is built as it is*);
* the keyword side by the best match's keyword relevance: its BM25 over the score that is full evidence for the
  query (relevance.keyword_scale), capped at 1; 0 when nothing matched. Beside a dense side, scaled by the share
  of the dense side's evidence on memories it can read (*Another language*).

**Another language.** The keyword side reads the query's language only: a memory in the other language
(calibration.language) can hold none of the query's terms but a Latin name or number, so the side's zero there is
no judgement of it. Its say against the dense side is therefore scaled by the share of the dense side's
evidence that falls on memories it can read (in the query's language, or holding one of its terms): where the dense
side points at a Chinese question's English memory, a Chinese memory sharing one word with the question no longer
outvotes it, and a store in one language ranks exactly as before. Judging such memories by the dense side alone
instead (the keyword side abstaining for them) let them displace same-language answers that share no term either;
weighing the keyword side's best match also by its standing above chance in the user's memories (the chance an
unrelated memory holds its terms, on the dense side's z scale) lifted the paraphrase set further but muted
distinctive words in stores of a few dozen memories (docs/benchmarks.md, *Fusion by what the keyword side can
read*).

**Coverage** (``VECMEM_KEYWORD_COVERAGE``, off by default: it cost LoCoMo 2 points of R@10 under the default
blend). Beside a dense side, a question's keyword matches also count by how much of it they cover: the
share of its terms, each weighed by its idf, that the memory holds (``KeywordResult.coverage_of``). The keyword
side's informativeness is scaled by the coverage of its best-covering match (score relative to the best times
coverage), and each match counts by its score and coverage relative to that match, so the best one keeps keyword
mode's evidence. One unit of evidence is enough to count as relevant (relevance.py), but a question that shares
one everyday word (用, 喜欢, "use") with a distractor and none with its memory must not outvote the dense side's
clear match: coverage narrows what *Another language* leaves of that gap on the paraphrase set, at LoCoMo's
cost in every form tried (docs/benchmarks.md, *Fusion by what the keyword side can read*). A
dialogue-shaped query is not weighed so (no memory covers a whole conversation: doing so cost MADial-Bench up to
3 points), and keyword mode is unchanged. The forms tried: docs/benchmarks.md, *A second dense view*.

Each side's evidence is its scaled score times its informativeness (``a·side``; the keyword side's, in hybrid,
times coverage: below), and the similarity is the average of the two sides' evidence weighed by ``w·a_d`` and
``(1 - w)·a_k`` (``w`` = ``VECMEM_DENSE_WEIGHT``, 0.5):

    similarity = (w·a_d·(a_d·dense) + (1 - w)·a_k·(a_k·keyword)) / (w·a_d + (1 - w)·a_k)

so a side that says nothing (``a = 0``) adds nothing and takes nothing away: with the default model every
Chinese query ranks exactly as in keyword mode, and a question that shares no keyword with its memory (another
language) exactly as in dense mode; two fully informative sides give ``w·dense + (1 - w)·keyword``. One side
alone (``dense`` or ``keyword`` mode) gives ``a·side``. A query whose best evidence is weak gives every memory a
low similarity, and the reranker lets recency and importance decide more there (rank.py), as it should when
the query says little. Summed without the average (w·a_d·dense + (1 - w)·a_k·keyword), a flat dense side halved
every Chinese similarity, so that under the default weights the priors reordered the keyword side's matches and
Chinese hybrid search ranked below keyword mode; averaged as above, the two rank alike.

The weight 0.5 was chosen on halves of the dev data (LoCoMo and MADial-Bench zh/en, similarity-only): over
{0.3 .. 0.7}, 0.4 won on the even queries and 0.5 on the odd ones, and the two came out about level on the
held-out halves.

A date the query names ("in May 2023", 去年五月; timeframe.py) is part of what it asks, so it is evidence too,
not a prior: the similarity is multiplied by ``1 - d + d·closeness`` (``d`` = DATE_SHARE, 0.5), closeness being
1 for a memory created inside the window and decaying with the days outside it (timewindow.py). A memory that
matches the words but not the date keeps half its similarity. It lifted LoCoMo's recall, whose questions often
name a date, and any ``d`` from 0.3 to 0.7 (or adding ``d·closeness`` instead) did about as well. A query shaped
like a conversation names no window here: its "today" and 今天 describe the speaker's present, not the memories
asked for (reading them cost recall on MADial-Bench, whose queries are dialogues).

The fusion before this one (w·cosine + (1 - w)·keyword relative to the best, w = 0.6) lost to its own dense
side on English MADial-Bench in many dialogues and let importance and recency reorder the keyword side's
Chinese matches.

**The second view** (``VECMEM_SECOND_VIEW=use``, index/second_view.py): a second model's cosines of the same
candidates, put on their own scale against the second model's own cohort exactly as above. The dense views make
one dense side: its evidence is their average weighed by ``p·a_v`` with the evidence factor (``p`` =
SECOND_VIEW_SHARE for the second view, the rest for the store's model), and its informativeness their shares'
average weighed alike (``Σ p·a_v² / Σ p·a_v``), so two views that agree rank as one would, and a view that says
nothing for a query (a flat one) adds nothing and takes nothing away. The dense side then meets the keyword side
as above. Relevance (the prompt's floor) stays the store's model's and the keyword side's: the floor was
calibrated on them.

**Against the typical candidate.** As a last step, the similarity the reranker weighs (rank.py) is measured from
the query's typical candidate (the median of its candidates' similarities: 0) to its best (which keeps its own
similarity, so a query whose evidence is weak stays weak): ``best·(s - typical) / (best - typical)``, 0 below the
typical one (``Typical``). Candidates are the nearest few dozen memories by either side, and all but a handful
are no answer, so the typical one says what a memory this query is not about scores among the ones it finds. They
are at least four times the k asked for (``VECMEM_OVERFETCH``, 4 by default), so the typical one ranks below every
memory returned and their order by similarity is kept: measured from a fixed rank instead (the 10th best, the same
for every k), the memories below it tied at 0 and LoCoMo's R@10 with similarity alone fell 0.7. The specified blend
adds recency and importance to the similarity with fixed weights, and for those weights to mean the same in every
store, the similarity has to spread a query's candidates alike. Without this it did not:
multilingual-e5-small gives every turn of one conversation (the same two speakers, the same style) a standing far
above the cohort, so a LoCoMo question's candidates all had similarities near the best's, and 0.2 of recency
outweighed nearly any difference the question made (the dense side lost 11.7 points of R@5 to the blend,
all-MiniLM-L6-v2's 0.7). The map is increasing above the typical candidate, so the order by similarity alone is
the same, and the relevance floor (relevance.py) is not touched. Measuring each dense view from its typical
candidate instead, before fusion, spread the blend as well but gave the dense side more say against the keyword
side than it has earned on LoCoMo (−4.3 R@5 with similarity alone): docs/benchmarks.md, *Against the typical
candidate*.

The measured effect of each of these choices, with all-MiniLM-L6-v2: docs/benchmarks.md, *Why retrieval is built
as it is*; of the second view: *A second dense view*.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from vecmem.retrieval.embedding.calibration import Anchors
from vecmem.retrieval.index.keyword import KeywordResult
from vecmem.retrieval.relevance import CohortStats, dense_relevance

__all__ = ["DATE_SHARE", "SECOND_VIEW_SHARE", "Fusion", "Fusions", "Typical", "cosine"]

CHANCE_Z, CERTAIN_Z = 1.0, 3.0  # the dense side's informativeness ramps from 0 to 1 between these (docstring)
DATE_SHARE = 0.5  # how much of a memory's similarity rests on the date the query names (docstring)
# the second dense view's part of the dense side's weight (docstring, *The second view*): 0.25 cost LoCoMo 0.7 point
# of R@5 and lifted MADial-Bench 1.3 (zh) and 1.8 (en); 0.5 cost LoCoMo 2.9 and lifted them 2.9 and 0.5
SECOND_VIEW_SHARE = 0.25


class Fusion:
    """One query's similarity of each candidate and its relevance (module docstring). ``dense``: cosines of the
    candidates (all of them, so the best is known); ``cohort``: the query's cosines with the cohort, summed up.
    ``second``: the second dense view's cosines of the candidates and its own cohort's (*The second view*).
    ``covering``: weigh keyword matches by their coverage of the query (a question; not a dialogue, *Coverage*).
    ``asked_in``: the query's language (calibration.language), the only one the keyword side reads (*Another
    language*); None: every memory taken as read."""

    def __init__(self, dense: dict[str, float] | None, keyword: KeywordResult | None, dense_weight: float,
                 cohort: Mapping[str, CohortStats] | None = None, dates: Mapping[str, float] | None = None,
                 languages: Mapping[str, str] | None = None, anchors: Mapping[str, Anchors] | None = None,
                 unreadable: frozenset[str] = frozenset(),
                 second: tuple[dict[str, float], Mapping[str, CohortStats]] | None = None,
                 covering: bool = True, asked_in: str | None = None) -> None:
        self.dates = dates  # each candidate's closeness to the query's time window, when it names one
        self.dense = dense
        self.keyword = keyword
        self.dense_weight = dense_weight
        self.cohort = cohort  # the query's chance level in each language (relevance.Cohort.stats)
        self.languages = languages or {}  # each candidate's language (calibration.language); English if unknown
        # by a memory's language, what the model's cosines mean between the query's language and it (calibration.py)
        self.anchors = anchors or {}
        # memory languages whose cosines with this query say nothing: another language than the query's, where
        # the model does not know a translation from an unrelated statement (all-MiniLM-L6-v2 across zh and en)
        self.unreadable = unreadable
        # the dense views (the store's model, and the second view when it is on) make one dense side: its
        # evidence is their average weighed by prior·share (evidence factor included), its informativeness their
        # shares' average weighed alike, so a flat view adds nothing and takes nothing away (*The second view*)
        views: list[_DenseView] = []
        if dense is not None:
            views.append(_DenseView(dense, cohort, self.languages, unreadable))
        if dense is not None and second is not None:
            views.append(_DenseView(second[0], second[1], self.languages, frozenset()))
        priors = [1.0 - SECOND_VIEW_SHARE, SECOND_VIEW_SHARE] if len(views) == 2 else [1.0] * len(views)
        mass = sum(prior * view.share for prior, view in zip(priors, views, strict=True))
        inside = [prior * view.share * view.share / mass if mass > 0 else 0.0
                  for prior, view in zip(priors, views, strict=True)]  # each view's part of the dense evidence
        dense_share = sum(inside)  # = Σ p·a² / Σ p·a: the dense side's informativeness
        keyword_share = _keyword_share(keyword) if keyword is not None else 0.0
        if keyword is not None and views and asked_in is not None and dense is not None:
            # scaled by the share of the dense side's evidence that falls on memories it can read (module
            # docstring, *Another language*)
            keyword_share *= _readable_share(views, inside, dense, keyword, self.languages, asked_in)
        # beside a dense side, a question's keyword matches count by how much of it they cover too (module
        # docstring, *Coverage*): the side's say against the dense side is scaled by the coverage of its
        # best-covering match, and each match counts by its score and coverage relative to that one
        self._keyword_share, covered = keyword_share, 1.0
        if keyword is not None and views and covering:
            covered = max((score / keyword.best * keyword.coverage_of(memory_id)
                           for memory_id, score in keyword.top), default=0.0)
            self._keyword_share = keyword_share / covered if covered > 0 else 0.0
        self._covering = keyword is not None and bool(views) and covering
        # each side's weight in the average of the two sides' evidence (module docstring)
        if keyword is not None and views:
            say = keyword_share * covered
            trust = dense_weight * dense_share + (1 - dense_weight) * say
            dense_part = dense_weight * dense_share / trust if trust > 0 else 0.0
            self._keyword_weight = (1 - dense_weight) * say / trust if trust > 0 else 0.0
        else:  # one side alone: its evidence, a·side
            dense_part, self._keyword_weight = 1.0, 1.0
        self._views = views
        self._view_weights = [dense_part * part for part in inside]

    def parts(self, memory_id: str) -> tuple[float, float | None, float | None]:
        """(similarity, cosine, keyword relative to the query's best keyword match); similarity and the keyword
        part in [0, 1], the cosine as the model gave it, clamped to [0, 1]."""
        cosine = None if self.dense is None else min(1.0, max(0.0, self.dense.get(memory_id, 0.0)))
        relative = None
        if self.keyword is not None:
            best = self.keyword.best
            relative = self.keyword.score_of(memory_id) / best if best > 0 else 0.0
        similarity = sum(weight * view.scaled(memory_id) for view, weight in zip(self._views, self._view_weights,
                                                                                   strict=True))
        if relative is not None and self.keyword is not None:
            evidence = self._keyword_share * relative
            if self._covering:
                evidence *= self.keyword.coverage_of(memory_id)
            similarity += self._keyword_weight * evidence
        if self.dates is not None:
            similarity *= 1.0 - DATE_SHARE + DATE_SHARE * self.dates.get(memory_id, 1.0)
        return min(1.0, similarity), cosine, relative

    def relevance(self, memory_id: str) -> float:
        """The larger of the two sides' evidence beyond chance, in [0, 1] (relevance.py)."""
        sides = []
        if self.dense is not None and self.cohort is not None:
            lang = self.languages.get(memory_id, "en")
            if lang not in self.unreadable:
                anchors = self.anchors.get(lang)
                sides.append(dense_relevance(self.dense.get(memory_id, 0.0), self._chance(memory_id).bar,
                                             1.0 if anchors is None else anchors.same))
        if self.keyword is not None:
            scale = self.keyword.scale
            sides.append(min(1.0, self.keyword.score_of(memory_id) / scale) if scale > 0 else 0.0)
        return max(sides, default=0.0)

    def _chance(self, memory_id: str) -> CohortStats:
        """What an unrelated memory in this memory's language scores for the query."""
        assert self.cohort is not None
        return _chance(self.cohort, self.languages, memory_id)


def _chance(cohort: Mapping[str, CohortStats], languages: Mapping[str, str], memory_id: str) -> CohortStats:
    return cohort.get(languages.get(memory_id, "en")) or next(iter(cohort.values()))


def _readable_share(views: list[_DenseView], inside: list[float], candidates: Mapping[str, float],
                    keyword: KeywordResult, languages: Mapping[str, str], asked_in: str) -> float:
    """The share of the dense side's evidence (module docstring) that falls on candidates the keyword side can
    read: in the query's language, or holding one of its terms; 1 where the dense side has none, or where every
    candidate is one it can read (a store in one language: no evidence is summed)."""
    if all(languages.get(memory_id, "en") == asked_in or keyword.score_of(memory_id) > 0 for memory_id in candidates):
        return 1.0
    total = readable = 0.0
    for memory_id in candidates:
        evidence = sum(part * view.scaled(memory_id) for view, part in zip(views, inside, strict=True))
        total += evidence
        if languages.get(memory_id, "en") == asked_in or keyword.score_of(memory_id) > 0:
            readable += evidence
    return readable / total if total > 0 else 1.0


def _keyword_share(keyword: KeywordResult) -> float:
    """How informative the keyword side is for the query: its best match's share of full evidence."""
    if keyword.best <= 0:
        return 0.0
    return min(1.0, keyword.best / keyword.scale) if keyword.scale > 0 else 1.0


class _DenseView:
    """One dense view of a query (the store's model, or the second view): each candidate's cosine as its standing
    above chance in its language, over the best candidate's, and how informative the view is (module docstring)."""

    def __init__(self, cosines: Mapping[str, float], cohort: Mapping[str, CohortStats] | None,
                 languages: Mapping[str, str], unreadable: frozenset[str]) -> None:
        self.span, self.share = 1.0, 0.0
        if cohort is None:  # no chance level known: the raw cosine, fully trusted
            self.above, self.share = dict(cosines), 1.0
            return
        self.above = {memory_id: _standing(cohort, languages, unreadable, memory_id, value)
                      for memory_id, value in cosines.items()}
        top = max(self.above.values(), default=0.0)
        if top > 0:
            self.span = top
            self.share = min(1.0, max(0.0, (top - CHANCE_Z) / (CERTAIN_Z - CHANCE_Z)))

    def scaled(self, memory_id: str) -> float:
        return min(1.0, max(0.0, self.above.get(memory_id, 0.0) / self.span))


def _standing(cohort: Mapping[str, CohortStats], languages: Mapping[str, str], unreadable: frozenset[str],
              memory_id: str, cosine: float) -> float:
    """How far the cosine stands above chance in the memory's language, in that cohort's spreads."""
    if languages.get(memory_id, "en") in unreadable:
        return 0.0
    chance = _chance(cohort, languages, memory_id)
    above = cosine - chance.mean
    return above / chance.spread if chance.spread > 0 else (CERTAIN_Z if above > 0 else 0.0)


class Fusions:
    """The fusions of a multi-part question, one per part (question.py): a memory counts by the part that
    points at it most, so each part's best match reaches the top however many words the other parts have."""

    def __init__(self, fusions: list[Fusion]) -> None:
        self.fusions = fusions

    def parts(self, memory_id: str) -> tuple[float, float | None, float | None]:
        """``Fusion.parts`` of the part that gives the memory its highest similarity."""
        return max((fusion.parts(memory_id) for fusion in self.fusions), key=lambda parts: parts[0])

    def relevance(self, memory_id: str) -> float:
        return max(fusion.relevance(memory_id) for fusion in self.fusions)


class Typical:
    """A query's fusion with each candidate's similarity measured from the typical candidate's (0) to the best's
    (module docstring, *Against the typical candidate*). Every candidate's parts are worked out once, here."""

    def __init__(self, fusion: Fusion | Fusions, candidates: Iterable[str]) -> None:
        self.fusion = fusion
        self._parts = {memory_id: fusion.parts(memory_id) for memory_id in candidates}
        similarities = sorted(parts[0] for parts in self._parts.values())
        self.best = similarities[-1] if similarities else 0.0
        # the median (the lower of two middles); fewer than three candidates have no typical one to measure from
        self.typical = similarities[(len(similarities) - 1) // 2] if len(similarities) >= 3 else 0.0

    def parts(self, memory_id: str) -> tuple[float, float | None, float | None]:
        """``Fusion.parts``, the similarity measured from the typical candidate."""
        similarity, cosine_part, relative = self._parts.get(memory_id) or self.fusion.parts(memory_id)
        if self.best > self.typical > 0:
            similarity = self.best * max(0.0, similarity - self.typical) / (self.best - self.typical)
        return similarity, cosine_part, relative

    def relevance(self, memory_id: str) -> float:
        return self.fusion.relevance(memory_id)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """As Chroma's cosine space computes it (the vectors of every shipped embedder are unit length already)."""
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms > 0 else 0.0

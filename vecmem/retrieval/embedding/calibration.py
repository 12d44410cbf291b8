"""What a cosine means for one embedding model: every decision that reads a cosine reads it on the model's own
calibrated scale, never on one model's raw numbers.

Models differ in their cosine scale. all-MiniLM-L6-v2 gives unrelated English statements about 0.2 and a
paraphrase about 0.8; multilingual-e5-small gives unrelated Chinese statements about 0.9 and a paraphrase about
0.97, unrelated English ones about 0.8, and a statement and its translation about 0.85. The same model's scale
even differs by language: between two Chinese texts e5's cosines run higher than between two English ones, and
across the two languages lower. So a cosine is read against **anchors** measured for the model and for the pair
of languages it compares (English-English, Chinese-Chinese, across), on a calibration set the package ships:

* *unrelated*: the median cosine between statements about unrelated things (the relevance cohort, relevance.py,
  32 in each language), each embedded as a query against the others as memories;
* *paraphrase*: the median cosine between a statement (as a query) and the same fact in other words, or in the
  other language (``PARAPHRASES``);
* *same*: the median cosine between a statement as a query and itself as a memory (e5 embeds the two sides
  with different prefixes, so this is not 1).

The calibrated **closeness** is piecewise linear through these: 0 at *unrelated*, ``PARAPHRASE_AT`` (0.8) at
*paraphrase*, 1 at *same*, clamped to [0, 1]. A threshold on it means the same for every model: 0.9 is
"halfway from a paraphrase to the same statement" whatever the raw numbers. Where the model cannot tell
unrelated statements of a language pair from paraphrases (the 99th percentile of its unrelated pairs reaches
the paraphrases' median: all-MiniLM-L6-v2 on Chinese, and across languages), closeness is unknown (``None``)
and no decision rests on it.

Calibrating embeds about 200 short texts once per model; the result is kept with the cohort's vectors
(relevance.py) in the model cache, keyed by what the model computes (embedding/fingerprint.py: its vectors of a
few probe texts, never its name) and these texts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["LANGUAGES", "PARAPHRASES", "PARAPHRASE_AT", "Anchors", "Calibration", "calibrate", "language", "pair_of"]

PARAPHRASE_AT = 0.8  # where a typical paraphrase sits on the calibrated scale (module docstring)
UNRELATED_TOP = 0.99  # the quantile of unrelated pairs that must stay below the paraphrases' median

# (a statement, the same fact in other words or in the other language): everyday memories, not benchmark text
PARAPHRASES: tuple[tuple[str, str], ...] = (
    ("The user works as a nurse at a children's hospital.", "The user's job is caring for patients in a paediatric ward."),
    ("The user is allergic to peanuts.", "Peanuts give the user an allergic reaction."),
    ("The user prefers short answers without long explanations.", "The user wants replies to be brief and to the point."),
    ("The user moved to Berlin last spring.", "Since last spring the user has been living in Berlin."),
    ("The user's daughter is called Mia.", "Mia is the name of the user's daughter."),
    ("The user drinks coffee without sugar.", "The user takes their coffee unsweetened."),
    ("The user writes backend services in Go.", "The user's server-side code is written in Golang."),
    ("The user goes running every morning before work.", "Each day before the office the user goes for a jog."),
    ("The user is vegetarian.", "The user does not eat meat."),
    ("The user's laptop is a ThinkPad.", "The user works on a Lenovo ThinkPad notebook."),
    ("用户在一家银行做数据分析", "用户的工作是在银行分析数据"),
    ("用户对花生过敏", "花生会让用户过敏"),
    ("用户喜欢简短的回答", "用户希望回复尽量简洁"),
    ("用户去年搬到了成都", "用户从去年开始住在成都"),
    ("用户的儿子叫小明", "小明是用户儿子的名字"),
    ("用户每天早上喝一杯绿茶", "用户习惯早晨来一杯绿茶"),
    ("用户用 Python 写数据处理脚本", "用户的数据处理脚本是用 Python 写的"),
    ("用户周末常去爬山", "用户一到周末就喜欢去登山"),
    ("用户不吃辣", "用户吃不了辛辣的食物"),
    ("用户养了一只橘猫", "用户家里有一只橘色的猫"),
    ("The user lives in Shanghai.", "用户住在上海"),
    ("The user is learning Japanese.", "用户在学日语"),
    ("The user prefers dark mode in every editor.", "用户在所有编辑器里都喜欢用深色模式"),
    ("The user's wife is a teacher.", "用户的妻子是一名老师"),
    ("用户在腾讯做产品经理", "The user works at Tencent as a product manager."),
    ("用户周末会弹钢琴", "The user plays the piano on weekends."),
    ("The user has two cats.", "用户养了两只猫"),
    ("用户希望代码注释用英文写", "The user wants code comments in English."),
    ("The user is training for a marathon.", "用户正在为马拉松做训练"),
    ("用户的生日在三月", "The user's birthday is in March."),
)

_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
LANGUAGES = ("en", "zh")


def language(text: str) -> str:
    """``zh`` for text written mostly in Chinese characters (a Latin name or two inside it included), else ``en``
    (the scale of every alphabetic language is taken to be English's: the calibration set holds only these two)."""
    han = len(_HAN.findall(text))
    return "zh" if han and han >= len(_LATIN_WORD.findall(text)) else "en"


def pair_of(first: str, second: str) -> str:
    """The anchors' key of two languages: ``en``, ``zh`` or ``cross``."""
    return first if first == second else "cross"


@dataclass(frozen=True)
class Anchors:
    """One model's cosines for one pair of languages (module docstring)."""

    unrelated: float
    paraphrase: float
    same: float
    unrelated_top: float  # the UNRELATED_TOP quantile of unrelated pairs

    @property
    def informative(self) -> bool:
        """Whether the model tells unrelated statements from paraphrases here at all."""
        return self.unrelated_top < self.paraphrase and self.unrelated < self.paraphrase < self.same

    def closeness(self, cosine: float) -> float | None:
        """The cosine on the calibrated scale, in [0, 1]; None where the model cannot tell."""
        if not self.informative:
            return None
        if cosine <= self.paraphrase:
            value = PARAPHRASE_AT * (cosine - self.unrelated) / (self.paraphrase - self.unrelated)
        else:
            value = PARAPHRASE_AT + (1 - PARAPHRASE_AT) * (cosine - self.paraphrase) / (self.same - self.paraphrase)
        return min(1.0, max(0.0, value))


@dataclass(frozen=True)
class Calibration:
    """One model's anchors for each pair of languages."""

    model: str
    anchors: Mapping[str, Anchors]

    def closeness(self, cosine: float, first: str, second: str) -> float | None:
        """How alike two texts of these languages are (``language``), on the calibrated scale."""
        anchors = self.anchors.get(pair_of(first, second))
        return None if anchors is None else anchors.closeness(cosine)

    def to_dict(self) -> dict[str, object]:
        return {"model": self.model, "anchors": {key: vars(anchors) for key, anchors in self.anchors.items()}}


def calibrate(model: str, cohort_queries: Mapping[str, np.ndarray], cohort_documents: Mapping[str, np.ndarray],
              paraphrase_queries: np.ndarray, paraphrase_documents: np.ndarray) -> Calibration:
    """The anchors from the calibration set's vectors: the cohort of each language embedded as queries and as
    memories (rows in ``relevance.COHORT`` order), and each paraphrase pair's first text as a query, its second
    as a memory (``PARAPHRASES`` order)."""
    unrelated: dict[str, list[np.ndarray]] = {"en": [], "zh": [], "cross": []}
    same: list[np.ndarray] = []
    for first in LANGUAGES:
        for second in LANGUAGES:
            cosines = cohort_queries[first] @ cohort_documents[second].T
            if first == second:
                same.append(np.diag(cosines))
                cosines = cosines[~np.eye(len(cosines), dtype=bool)]
            unrelated[pair_of(first, second)].append(cosines.ravel())
    paraphrased: dict[str, list[float]] = {"en": [], "zh": [], "cross": []}
    pair_cosines = np.sum(paraphrase_queries * paraphrase_documents, axis=1)
    for (first, second), value in zip(PARAPHRASES, pair_cosines, strict=True):
        paraphrased[pair_of(language(first), language(second))].append(float(value))
    same_of = {lang: float(np.median(values)) for lang, values in zip(LANGUAGES, same, strict=True)}
    same_of["cross"] = float(np.mean(list(same_of.values())))  # a translation is never its own text
    anchors = {}
    for key, parts in unrelated.items():
        values = np.concatenate(parts)
        anchors[key] = Anchors(unrelated=float(np.median(values)), paraphrase=float(np.median(paraphrased[key])),
                               same=same_of[key], unrelated_top=float(np.quantile(values, UNRELATED_TOP)))
    return Calibration(model, anchors)

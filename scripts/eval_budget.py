"""Recall within the prompt's budget (``eval_hit_rate.py --budgets``): what a prompt of N tokens would carry.

For each question, the ranked memories are taken in rank order while their texts, one a line (each memory's
line text is its content), fit N tokens, counted as the budgeter counts (tiktoken); the first that does not fit
ends the list. Of what fits:

* evidence recall: the share of the question's evidence turns named by the memories taken (per turn, the turns
  themselves; through the agent, the turns of each memory's provenance); 1 without evidence, as R@k counts;
* answer coverage: the share of the reference answer's content words (lowercased, simple tokenization, English
  stop words removed; Chinese by characters) found among the content words of the text that fits. Questions
  without a reference answer (LoCoMo's adversarial category, MADial-Bench) or whose answer has no content word
  are left out of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["BUDGET_DEPTH", "BudgetHit", "BudgetTotals", "STOP_WORDS", "budget_scores", "content_words", "fitting",
           "markdown"]

BUDGET_DEPTH = 100  # memories searched for the budget: enough to fill 2,048 tokens with LoCoMo's turns (~35 each)

# A short English stop list: articles, pronouns, auxiliaries, prepositions, conjunctions.
STOP_WORDS = frozenset("""
a an the and or but nor so if then than as of to in on at by for with from into onto about over under after before
during since until up down out off through between among per via
i me my mine myself we us our ours you your yours he him his she her hers it its they them their theirs
this that these those who whom whose which what when where why how
is am are was were be been being do does did done have has had having will would shall should can could may might
must there here also just very too s t
""".split())

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    """The content words of ``text``: lowercased runs of letters and digits without ``STOP_WORDS``, and each
    Chinese character."""
    lowered = text.lower()
    words = {word for word in _WORD.findall(_CJK.sub(" ", lowered)) if word not in STOP_WORDS}
    return words | set(_CJK.findall(lowered))


@dataclass(frozen=True)
class BudgetHit:
    """One ranked memory: its line text and the turns it names (per turn: itself; else its provenance)."""

    text: str
    turns: Sequence[str]


def fitting(hits: Sequence[BudgetHit], count: Callable[[str], int], budget: int) -> list[BudgetHit]:
    """The hits taken in rank order while their texts, one a line, fit ``budget`` tokens (the joined text counted
    exactly; each text's own count, plus one a line break, only guides where to look)."""

    def fits(n: int) -> bool:
        return count("\n".join(hit.text for hit in hits[:n])) <= budget

    n, estimate = 0, -1
    for hit in hits:  # the estimate: each text's tokens and one for each line break
        estimate += count(hit.text) + 1
        if estimate > budget:
            break
        n += 1
    while n and not fits(n):
        n -= 1
    while n < len(hits) and fits(n + 1):
        n += 1
    return list(hits[:n])


def budget_scores(hits: Sequence[BudgetHit], relevant: Sequence[str], answer: str | None,
                  count: Callable[[str], int], budget: int) -> dict[str, float | None]:
    """``recall`` (share of ``relevant`` named by the hits that fit; 1 without evidence), ``coverage`` (share of
    the answer's content words in their text; None without an answer or content word), ``memories`` (how many
    fit) and ``full`` (1.0 when every hit fitted: the budget was not filled, the search was not deep enough)."""
    taken = fitting(hits, count, budget)
    wanted = set(relevant)
    named = {turn for hit in taken for turn in hit.turns}
    recall = len(wanted & named) / len(wanted) if wanted else 1.0
    reference = content_words(answer) if answer else set()
    coverage = None
    if reference:
        present = content_words("\n".join(hit.text for hit in taken))
        coverage = len(reference & present) / len(reference)
    return {"recall": recall, "coverage": coverage, "memories": float(len(taken)),
            "full": float(len(taken) == len(hits))}


@dataclass
class BudgetTotals:
    """Averages over the questions, per budget: recall over all, coverage over those with an answer."""

    rows: dict[int, list[dict[str, float | None]]] = field(default_factory=dict)

    def add(self, hits: Sequence[BudgetHit], relevant: Sequence[str], answer: str | None,
            count: Callable[[str], int], budgets: Sequence[int]) -> None:
        for budget in budgets:
            self.rows.setdefault(budget, []).append(budget_scores(hits, relevant, answer, count, budget))

    def summary(self) -> dict[int, dict[str, float]]:
        """Per budget: ``recall``, ``coverage`` (NaN when no question has an answer), ``answered`` (how many
        questions coverage averages), ``memories`` (mean taken) and ``unfilled`` (share of questions whose hits
        all fitted)."""
        result = {}
        for budget, rows in sorted(self.rows.items()):
            covered = [row["coverage"] for row in rows if row["coverage"] is not None]
            result[budget] = {
                "recall": sum(row["recall"] or 0.0 for row in rows) / len(rows),
                "coverage": sum(c for c in covered if c is not None) / len(covered) if covered else float("nan"),
                "answered": float(len(covered)),
                "memories": sum(row["memories"] or 0.0 for row in rows) / len(rows),
                "unfilled": sum(row["full"] or 0.0 for row in rows) / len(rows),
            }
        return result


def markdown(rows: Sequence[tuple[str, str, dict[int, dict[str, float]]]], questions: int) -> str:
    """One table: per (protocol, mode, summary) and budget, evidence recall and answer coverage."""
    lines = ["| protocol | mode | budget (tokens) | memories in it | evidence recall | answer coverage |",
             "|---|---|---|---|---|---|"]
    answered = 0
    unfilled = []
    for protocol, mode, summary in rows:
        for budget, figures in summary.items():
            coverage = figures["coverage"]
            lines.append(f"| {protocol} | {mode} | {budget:,} | {figures['memories']:.1f} | "
                         f"{100 * figures['recall']:.1f} | "
                         f"{'-' if coverage != coverage else f'{100 * coverage:.1f}'} |")
            answered = int(figures["answered"])
            if figures["unfilled"] > 0:
                unfilled.append(f"{protocol} {mode} {budget:,}: {100 * figures['unfilled']:.0f}%")
    coverage_note = (f"answer coverage over the {answered} with a reference answer (the share of its content words "
                     "in the text that fits)" if answered else "no reference answers, so no answer coverage")
    lines += ["", f"Within the budget, in %: memories taken in rank order while their text (one a line) fits the "
              f"budget (tiktoken). Evidence recall over all {questions} questions (the turns the memories name); "
              f"{coverage_note}."]
    if unfilled:
        lines.append(f"Questions whose searched memories (at most {BUDGET_DEPTH}) all fitted: " + ", ".join(unfilled)
                     + ".")
    return "\n".join(lines)

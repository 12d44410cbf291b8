"""scripts/eval_budget.py: recall within the prompt's budget (memories in rank order while their text fits)."""

import importlib.util
import math
import sys

import pytest

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("eval_budget", REPO / "scripts" / "eval_budget.py")
eval_budget = importlib.util.module_from_spec(spec)
sys.modules["eval_budget"] = eval_budget  # dataclasses look their module up while the class is built
spec.loader.exec_module(eval_budget)

Hit = eval_budget.BudgetHit


def words(text: str) -> int:
    """A counter of whitespace-separated words, the line break a word of its own."""
    return len(text.split()) + text.count("\n")


HITS = [
    Hit("Mira moved to Lisbon in spring", ("D1:2", "D1:3")),  # 6
    Hit("her cat is called Pepper", ("D2:5",)),  # 5, +1 for the line break
    Hit("she teaches violin on weekends", ("D3:1",)),  # 5, +1
]


def test_memories_are_taken_in_rank_order_while_they_fit():
    assert eval_budget.fitting(HITS, words, 5) == []
    assert eval_budget.fitting(HITS, words, 6) == HITS[:1]
    assert eval_budget.fitting(HITS, words, 11) == HITS[:1]
    assert eval_budget.fitting(HITS, words, 12) == HITS[:2]
    assert eval_budget.fitting(HITS, words, 100) == HITS
    # the first that does not fit ends the list, though a later, shorter one would fit
    assert eval_budget.fitting([Hit("a b c d e f g h", ()), Hit("x", ())], words, 4) == []


def test_recall_counts_the_turns_the_memories_that_fit_name():
    scores = eval_budget.budget_scores(HITS, ["D1:3", "D2:5", "D3:1", "D9:9"], None, words, 12)
    assert scores["recall"] == pytest.approx(2 / 4)
    assert scores["memories"] == 2 and scores["full"] == 0.0
    assert eval_budget.budget_scores(HITS, [], None, words, 1)["recall"] == 1.0  # no evidence counts 1, as R@k
    assert eval_budget.budget_scores(HITS, ["D1:2"], None, words, 100)["full"] == 1.0


def test_coverage_is_the_share_of_the_answers_content_words_in_the_text_that_fits():
    # "the", "in" are stop words; "Lisbon" and "spring" are found in the first memory, "Pepper" only in the second
    assert eval_budget.budget_scores(HITS, [], "in the spring, Lisbon", words, 6)["coverage"] == 1.0
    assert eval_budget.budget_scores(HITS, [], "Lisbon and Pepper", words, 6)["coverage"] == pytest.approx(1 / 2)
    assert eval_budget.budget_scores(HITS, [], "Lisbon and Pepper", words, 12)["coverage"] == 1.0
    # without an answer, or one of stop words only, the question is left out of coverage
    assert eval_budget.budget_scores(HITS, [], None, words, 12)["coverage"] is None
    assert eval_budget.budget_scores(HITS, [], "to the", words, 12)["coverage"] is None


def test_content_words_lowercase_drop_stop_words_and_split_chinese_by_character():
    assert eval_budget.content_words("The week before 14 March, 2024") == {"week", "14", "march", "2024"}
    assert eval_budget.content_words("我喜欢猫 and Dogs") == {"我", "喜", "欢", "猫", "dogs"}


def test_totals_average_recall_over_all_and_coverage_over_the_answered():
    totals = eval_budget.BudgetTotals()
    totals.add(HITS, ["D2:5"], "Pepper", words, [6, 12])
    totals.add(HITS, ["D1:2"], None, words, [6, 12])
    summary = totals.summary()
    assert summary[6]["recall"] == pytest.approx(0.5) and summary[6]["coverage"] == 0.0
    assert summary[12]["recall"] == 1.0 and summary[12]["coverage"] == 1.0
    assert summary[12]["answered"] == 1 and summary[12]["memories"] == 2
    empty = eval_budget.BudgetTotals()
    empty.add(HITS, [], None, words, [6])
    assert math.isnan(empty.summary()[6]["coverage"])
    table = eval_budget.markdown([("per turn", "hybrid", summary)], questions=2)
    assert "| per turn | hybrid | 12 | 2.0 | 100.0 | 100.0 |" in table

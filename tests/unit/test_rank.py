import math
from datetime import UTC, datetime, timedelta

import pytest

from vecmem import MemoryRecord, RankWeights
from vecmem.retrieval.rank import TIE_BAND, prior_share, rank_by_importance, recency, rerank, score

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DEFAULT = RankWeights()


def memory(memory_id: str, *, days_old: float = 0, accessed_days_ago: float | None = None, importance=0.5):
    return MemoryRecord(
        id=memory_id,
        content=f"memory {memory_id}",
        importance=importance,
        created_at=NOW - timedelta(days=days_old),
        last_accessed=None if accessed_days_ago is None else NOW - timedelta(days=accessed_days_ago),
    )


def test_recency_by_hand():
    assert recency(memory("a"), NOW, 0.01) == 1.0
    assert recency(memory("a", days_old=10), NOW, 0.01) == pytest.approx(math.exp(-0.1))
    assert recency(memory("a", days_old=69.3147), NOW, 0.01) == pytest.approx(0.5, abs=1e-5)
    # counted from the later of created_at and last_accessed
    assert recency(memory("a", days_old=100, accessed_days_ago=2), NOW, 0.01) == pytest.approx(math.exp(-0.02))
    # a time in the future counts as now
    assert recency(memory("a", days_old=-3), NOW, 0.01) == 1.0
    assert recency(memory("a", days_old=50), NOW, 0.0) == 1.0


def test_score_by_hand():
    # the specified blend: every part adds up to the score
    assert score(0.5, 0.8, 0.9, DEFAULT) == pytest.approx(0.6 * 0.5 + 0.2 * 0.8 + 0.2 * 0.9)
    assert score(0.95, 0.8, 0.9, DEFAULT) == pytest.approx(0.6 * 0.95 + 0.2 * 0.8 + 0.2 * 0.9)
    assert score(0.0, 0.8, 0.9, DEFAULT) == pytest.approx(0.2 * 0.8 + 0.2 * 0.9)
    assert score(0.5, 0.8, 0.9, RankWeights(1, 0, 0)) == pytest.approx(0.5)


def test_gated_priors_weigh_what_the_query_leaves_open():
    gated = RankWeights(0.6, 0.2, 0.2, gated=True)
    # the priors weigh in proportion to what the query leaves open: (1 - similarity), at least TIE_BAND
    assert score(0.5, 0.8, 0.9, gated) == pytest.approx(0.6 * 0.5 + (1 - 0.5) * (0.2 * 0.8 + 0.2 * 0.9))
    assert score(0.95, 0.8, 0.9, gated) == pytest.approx(0.6 * 0.95 + TIE_BAND * (0.2 * 0.8 + 0.2 * 0.9))
    assert score(0.0, 0.8, 0.9, gated) == score(0.0, 0.8, 0.9, DEFAULT)  # nothing points at it: the same either way
    # near-ties at the top go to the priors; a memory a fifth of the scale below cannot pass, whatever its priors
    assert score(0.94, 1.0, 0.4, gated) > score(0.96, 0.0, 0.4, gated)
    assert score(0.8, 1.0, 1.0, gated) < score(1.0, 0.0, 0.0, gated)
    assert score(0.8, 1.0, 1.0, DEFAULT) > score(1.0, 0.0, 0.0, DEFAULT)  # the plain blend lets the priors pass


def test_rerank_arithmetic_and_order():
    a = memory("a", days_old=10, importance=0.9)  # recency e^-0.1
    b = memory("b", days_old=0, importance=0.2)
    hits = rerank([(a, 0.40), (b, 0.50)], now=NOW, weights=DEFAULT, decay_per_day=0.01)
    expected_a = 0.6 * 0.40 + 0.2 * math.exp(-0.1) + 0.2 * 0.9  # 0.6010...
    expected_b = 0.6 * 0.50 + 0.2 * 1.0 + 0.2 * 0.2  # 0.54
    assert [hit.id for hit in hits] == ["a", "b"]
    assert hits[0].score == pytest.approx(expected_a)
    assert hits[1].score == pytest.approx(expected_b)
    for hit in hits:  # every hit's parts add up to its score
        assert hit.score == pytest.approx(0.6 * hit.similarity + 0.2 * hit.recency + 0.2 * hit.importance)


def test_similarity_is_clamped_to_unit_interval():
    hits = rerank([(memory("a"), -0.3), (memory("b"), 1.0000001)], now=NOW, weights=DEFAULT, decay_per_day=0.01)
    by_id = {hit.id: hit for hit in hits}
    assert by_id["a"].similarity == 0.0 and by_id["b"].similarity == 1.0


def test_ties_break_by_id():
    hits = rerank([(memory("b"), 0.5), (memory("a"), 0.5)], now=NOW, weights=DEFAULT, decay_per_day=0.01)
    assert [hit.id for hit in hits] == ["a", "b"]


def test_rank_by_importance_for_empty_query():
    records = [memory("low", importance=0.1), memory("high", importance=1.0), memory("mid", importance=0.5)]
    hits = rank_by_importance(records, now=NOW, weights=DEFAULT, decay_per_day=0.01)
    assert [hit.id for hit in hits] == ["high", "mid", "low"]
    assert all(hit.similarity == 0.0 for hit in hits)
    assert hits[0].score == pytest.approx(0.2 * 1.0 + 0.2 * 1.0)


def test_confidence_scales_importance_so_an_uncertain_extraction_ranks_below_a_stated_memory(make_bank):
    from tests.conftest import FakeEmbedder

    bank = make_bank(embedder=FakeEmbedder())
    stated = bank.add("the user drinks oolong tea", memory_id="stated", importance=0.8, session_id="a")
    guessed = bank.add("the user drinks oolong tea", memory_id="guessed", importance=0.8, session_id="b",
                       source="extracted", confidence=0.5)
    hits = {hit.id: hit for hit in bank.search("oolong tea", 5, session_id="a", record_access=False)}
    hits.update({hit.id: hit for hit in bank.search("oolong tea", 5, session_id="b", record_access=False)})
    assert hits["stated"].similarity == hits["guessed"].similarity
    assert hits["stated"].importance == pytest.approx(0.8) and hits["guessed"].importance == pytest.approx(0.4)
    assert hits["stated"].score - hits["guessed"].score == pytest.approx(prior_share(hits["stated"].similarity) * 0.2 * 0.4)
    assert bank.get(guessed.id).importance == 0.8 and bank.get(stated.id).confidence == 1.0  # records keep theirs


def test_priors_break_a_near_tie_at_the_top_but_never_pass_a_clear_match(make_bank, clock):
    """Two memories the query points at almost alike: the newer leads. A new memory the query barely touches
    stays below an old one it clearly asks about."""
    from datetime import timedelta

    from tests.conftest import FakeEmbedder

    bank = make_bank(embedder=FakeEmbedder())
    now = clock.now
    bank.add("The user trains at the gym on Mondays.", memory_id="old", created_at=now - timedelta(days=540),
             resolve=False)
    bank.add("The user trains at the gym on Thursdays.", memory_id="new", created_at=now - timedelta(days=5),
             resolve=False)
    bank.add("The user bought new headphones.", memory_id="unrelated", created_at=now)
    hits = bank.search("on which day do I train at the gym?", 3, record_access=False)
    assert [hit.id for hit in hits] == ["new", "old", "unrelated"]
    assert abs(hits[0].similarity - hits[1].similarity) < TIE_BAND  # a near-tie, decided by recency

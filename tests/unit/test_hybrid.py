"""Hybrid retrieval through MemoryBank: fusion arithmetic, modes, and isolation of keyword-only candidates."""

import pytest

from tests.conftest import FakeEmbedder
from vecmem import RankWeights, dialogue_query

pytestmark = pytest.mark.both_stores  # embedded, and again on a real `chroma run` server


@pytest.fixture
def similarity_only(settings):
    return settings.with_changes(weights=RankWeights(1, 0, 0))


def test_fused_similarity_by_hand(make_bank, similarity_only):
    bank = make_bank(settings=similarity_only)
    a = bank.add("zebra crossing rules")
    b = bank.add("zebra stripes pattern")
    hits = {hit.id: hit for hit in bank.search("zebra stripes", 2)}
    best = max(hits.values(), key=lambda hit: hit.keyword)
    assert best.keyword == 1.0  # the best keyword match of the query
    for hit in hits.values():
        assert 0 <= hit.keyword <= 1 and 0 <= hit.dense <= 1 and 0 <= hit.similarity <= 1
        assert hit.score == pytest.approx(hit.similarity)
    assert hits[b.id].score > hits[a.id].score


def test_fusion_arithmetic_by_hand():
    """Each side from chance (the cohort's mean cosine; no keyword match) to the query's best, weighed by how
    informative it is (fusion.py): the dense side by its best cosine's z over the cohort, the keyword side by its
    best match's evidence: its share of full evidence times how much of the query it covers."""
    import numpy as np

    from vecmem.retrieval.fusion import Fusion
    from vecmem.retrieval.index.views import KeywordResult
    from vecmem.retrieval.relevance import CohortStats

    cohort = {"en": CohortStats(mean=0.2, spread=0.1, bar=0.35)}  # every memory here is English
    # full evidence 6: a holds half of it and every query term, b a quarter of it and the terms of 3/4 of the query
    keyword = KeywordResult([("a", 3.0), ("b", 1.5)], 3.0, {"a": 0, "b": 1, "c": 2}, np.array([3.0, 1.5, 0.0]), 6.0,
                            {"x": 3.0, "y": 1.0}, {"a": ["x", "y", "z"], "b": ["x"], "c": ["z"]}.get)
    dense = {"a": 0.5, "b": 0.35, "c": 0.1}  # best z = (0.5 - 0.2) / 0.1 = 3: fully informative
    fusion = Fusion(dense, keyword, 0.5, cohort)

    def evidence(relative):  # share of full evidence (3 / 6 at best) times coverage of the query (a 1, b 3/4)
        return 0.5 * relative * (1.0 if relative == 1.0 else 0.75)

    def average(dense_part, keyword_relative, dense_share=1.0):  # of each side's evidence, weighed by w·share
        weights = (0.5 * dense_share, 0.5 * evidence(1.0))
        return (weights[0] * dense_share * dense_part + weights[1] * evidence(keyword_relative)) / sum(weights)

    assert fusion.parts("a") == pytest.approx((average(1.0, 1.0), 0.5, 1.0))
    assert fusion.parts("b")[0] == pytest.approx(average(0.15 / 0.3, 0.5))
    assert fusion.parts("c")[0] == 0.0  # below chance on the dense side, no keyword match
    flat = Fusion({"a": 0.3, "b": 0.28}, keyword, 0.5, cohort)  # best z = 1: the dense side adds nothing...
    alone = Fusion(None, keyword, 0.5, None)  # ...and the keyword matches keep keyword mode's order
    assert flat.parts("a")[0] == pytest.approx(alone.parts("a")[0]) == pytest.approx(0.5)
    assert flat.parts("b")[0] == pytest.approx(evidence(0.5)) and alone.parts("b")[0] == pytest.approx(0.25)
    empty = KeywordResult([], 0.0, {"a": 0}, np.array([0.0]), 6.0)  # nothing matched: as in dense mode
    dense_alone = Fusion(dense, None, 0.5, cohort)
    assert Fusion(dense, empty, 0.5, cohort).parts("a")[0] == pytest.approx(dense_alone.parts("a")[0]) == 1.0
    assert Fusion(dense, empty, 0.5, cohort).parts("b")[0] == pytest.approx(0.5)


def test_a_match_on_a_small_part_of_the_query_weighs_little_against_the_dense_side():
    """The paraphrase set's case: the question shares one everyday word with a distractor and none with its
    memory; the distractor's keyword match covers a sixth of the query, so the dense side's clear match stays first."""
    import numpy as np

    from vecmem.retrieval.fusion import Fusion
    from vecmem.retrieval.index.views import KeywordResult
    from vecmem.retrieval.relevance import CohortStats

    cohort = {"en": CohortStats(mean=0.2, spread=0.1, bar=0.35)}
    keyword = KeywordResult([("distractor", 2.0)], 2.0, {"distractor": 0, "answer": 1}, np.array([2.0, 0.0]), 2.0,
                            {"use": 1.0, "kettle": 2.5, "descale": 2.5},
                            {"distractor": ["use", "pan"], "answer": ["boil", "water"]}.get)
    # one unit of evidence, on a sixth of the query
    dense = {"answer": 0.5, "distractor": 0.42}  # z 3 and 2.2
    fusion = Fusion(dense, keyword, 0.5, cohort)
    assert fusion.parts("answer")[0] > fusion.parts("distractor")[0]


def test_a_memory_in_another_language_is_not_outvoted_by_a_word_the_keyword_side_can_read():
    """*Another language* (fusion.py): the keyword side cannot read the question's English answer; its say is
    scaled by the share of the dense side's evidence on memories it can read, so a Chinese memory sharing a word
    with a Chinese question does not outvote the dense side's English best. In one language nothing changes."""
    import numpy as np

    from vecmem.retrieval.fusion import Fusion
    from vecmem.retrieval.index.views import KeywordResult
    from vecmem.retrieval.relevance import CohortStats

    cohort = {"en": CohortStats(mean=0.2, spread=0.1, bar=0.35), "zh": CohortStats(mean=0.2, spread=0.1, bar=0.35)}
    keyword = KeywordResult([("zh-word", 2.0)], 2.0, {"zh-word": 0, "en-answer": 1}, np.array([2.0, 0.0]), 2.0)
    dense = {"en-answer": 0.5, "zh-word": 0.4}  # z 3 and 2
    mixed = {"en-answer": "en", "zh-word": "zh"}
    fusion = Fusion(dense, keyword, 0.5, cohort, languages=mixed, asked_in="zh")
    assert fusion.parts("en-answer")[0] > fusion.parts("zh-word")[0]
    before = Fusion(dense, keyword, 0.5, cohort, languages=mixed)  # no query language: as before this rule
    assert before.parts("zh-word")[0] > before.parts("en-answer")[0]
    one_language = {"en-answer": "zh", "zh-word": "zh"}
    assert (Fusion(dense, keyword, 0.5, cohort, languages=one_language, asked_in="zh").parts("zh-word")
            == Fusion(dense, keyword, 0.5, cohort, languages=one_language).parts("zh-word"))


def test_similarity_is_measured_from_the_typical_candidate():
    """*Against the typical candidate* (fusion.py): the best keeps its similarity, the median candidate scores 0,
    the order above it is kept, and the specified blend no longer lets a slightly newer memory the query barely
    prefers to the typical one overtake its best match."""
    from vecmem import RankWeights
    from vecmem.retrieval.fusion import Typical
    from vecmem.retrieval.rank import score

    class Fused:  # a query's fusion, as Typical reads it: similarity, cosine, keyword part
        def __init__(self, similarities):
            self.similarities = similarities

        def parts(self, memory_id):
            return self.similarities[memory_id], 0.5, None

        def relevance(self, memory_id):
            return 0.25

    # a conversation's turns as multilingual-e5-small sees them: every candidate near the best
    fused = Fused({"answer": 0.9, "newer": 0.8, "typical": 0.75, "other": 0.72, "far": 0.7})
    typical = Typical(fused, list(fused.similarities))
    assert typical.parts("answer") == (pytest.approx(0.9), 0.5, None)
    assert typical.parts("newer")[0] == pytest.approx(0.9 * 0.05 / 0.15)
    assert typical.parts("typical")[0] == typical.parts("other")[0] == typical.parts("far")[0] == 0.0
    assert typical.relevance("far") == 0.25  # the relevance floor's measure is not touched
    blend = RankWeights(0.6, 0.2, 0.2)
    old, new = (0.2, 0.5), (0.6, 0.5)  # (recency, importance): the answer is months older
    assert score(fused.parts("newer")[0], *new, blend) > score(fused.parts("answer")[0], *old, blend)
    assert score(typical.parts("answer")[0], *old, blend) > score(typical.parts("newer")[0], *new, blend)
    two = Typical(Fused({"a": 0.9, "b": 0.8}), ["a", "b"])  # fewer than three candidates: nothing to measure from
    assert two.parts("b")[0] == 0.8


def test_a_search_of_fewer_hits_gives_the_top_of_a_search_of_more(make_bank, settings):
    """Every search of k <= 10 ranks one pool of candidates (VECMEM_MIN_CANDIDATES), so under the default blend,
    whose similarity is measured from the pool's typical candidate, asking for 5 gives the first 5 of asking for 10."""
    from datetime import UTC, datetime, timedelta

    from vecmem.models import MemoryRecord

    bank = make_bank()
    topics = ["tea", "coffee", "hiking", "python", "rust", "garden", "piano", "chess", "sailing", "bread"]
    now = datetime.now(UTC)
    bank.add_records([MemoryRecord(id=f"m{i}", user_id=bank.settings.default_user, importance=(i % 7) / 7,
                                   content=f"the user talked about {topics[i % 10]} and {topics[i * 3 % 10]}, day {i}",
                                   created_at=now - timedelta(days=3 * i)) for i in range(60)])
    for query in ("what about tea and hiking?", "python or rust", "day 7 chess"):
        assert [hit.id for hit in bank.search(query, 5)] == [hit.id for hit in bank.search(query, 10)][:5]


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_modes(make_bank, similarity_only, mode):
    bank = make_bank(settings=similarity_only.with_changes(search_mode=mode))
    bank.add("the cat sleeps on the sofa")
    bank.add("quarterly revenue report")
    (hit,) = bank.search("cat sofa", 1)
    assert hit.content == "the cat sleeps on the sofa"
    assert (hit.dense is None) == (mode == "keyword") and (hit.keyword is None) == (mode == "dense")


def test_keyword_mode_needs_no_embedding_of_the_query(make_bank, settings):
    embedder = FakeEmbedder()
    bank = make_bank(settings=settings.with_changes(search_mode="keyword"), embedder=embedder)
    bank.add("the cat sleeps on the sofa")
    bank.search("cat", 1)
    assert embedder.query_calls == 0


def test_keyword_only_matches_obey_every_isolation_rule(make_bank, settings):
    # The fake embedder makes these unrelated on the dense side; only the rare keyword connects them.
    bank = make_bank(settings=settings.with_changes(min_candidates=1, overfetch_factor=1))
    visible = bank.add("xylophone lesson on friday")
    other_session = bank.add("xylophone notes for session one", session_id="s1")
    old = bank.add("xylophone teacher was Ann", memory_type="preference")
    bank.supersede(old.id, visible.id)
    other_user = bank.add("xylophone recital", user_id="bob")
    forgotten = bank.add("xylophone tuning")
    bank.forget(forgotten.id)
    for _ in range(30):
        bank.add(f"filler memory number {_} about gardening")
    never = {other_session.id, old.id, other_user.id, forgotten.id}
    hits = [hit.id for hit in bank.search("xylophone", 40)]
    assert hits[0] == visible.id and not never & set(hits) and len(hits) == 31
    in_session = [hit.id for hit in bank.search("xylophone", 40, session_id="s1")]
    assert set(in_session[:2]) == {visible.id, other_session.id} and not {old.id, other_user.id} & set(in_session)
    assert [hit.id for hit in bank.search("xylophone", 40, user_id="bob")] == [other_user.id]
    assert bank.search("xylophone", 40, types=["preference"]) == []


def test_updates_and_restores_reach_the_keyword_side(make_bank, settings):
    bank = make_bank(settings=settings.with_changes(search_mode="keyword"))
    record = bank.add("the quokka lives in Australia")
    assert bank.search("quokka", 1)[0].id == record.id
    bank.update(record.id, content="the wombat lives in Australia")
    (left,) = bank.search("quokka", 1)  # still one hit (k whenever k are visible), but no longer a match
    assert left.keyword == 0.0 and left.matched_terms == () and bank.search("wombat", 1)[0].id == record.id
    bank.update(record.id, tags=["marsupial"])
    assert bank.search("marsupial", 1)[0].id == record.id
    newer = bank.add("the wombat moved to Tasmania")
    bank.supersede(record.id, newer.id)
    assert [h.id for h in bank.search("wombat Australia", 5)] == [newer.id]
    bank.restore(record.id)
    assert [h.id for h in bank.search("wombat Australia", 5)] == [record.id]


def test_context_is_searchable_but_not_shown(make_bank, settings):
    bank = make_bank(settings=settings.with_changes(search_mode="keyword"))
    record = bank.add("Sure, that sounds lovely!", context="Do you want to visit the aquarium on Sunday?")
    (hit,) = bank.search("aquarium", 1)
    assert hit.id == record.id and "aquarium" not in hit.content
    pack = bank.build_context("aquarium", context_tokens=1000)
    assert "aquarium" not in pack.long_term.replace(pack.messages[-1]["content"], "")


def test_the_keyword_index_is_rebuilt_from_the_store_and_sees_other_writers(make_bank, settings):
    """Another bank's write is seen by the next search, embedded or on a server: every writer announces its
    writes on the change feed of the state they share (the home's files here; PostgreSQL for workers)."""
    keyword = settings.with_changes(search_mode="keyword")
    first = make_bank(settings=keyword)
    first.add("the narwhal has a tusk")
    assert first.search("narwhal", 1)
    second = make_bank(settings=keyword)
    second.add("narwhals live in the Arctic")
    assert len(first.search("narwhal", 5)) == 2
    reopened = make_bank(settings=keyword)
    assert len(reopened.search("narwhal", 5)) == 2


def test_a_dialogue_query_weighs_the_latest_turn_most(make_bank, similarity_only):
    bank = make_bank(settings=similarity_only)
    early = bank.add("birthday cake with candles")
    late = bank.add("magic trick at the new year party")
    query = dialogue_query([("Dana", "I baked a birthday cake"), ("Assistant", "Nice"),
                            ("Dana", "Now I will do a magic trick at the party")])
    hits = bank.search(query, 2)
    assert hits[0].id == late.id and hits[1].id == early.id


def test_legacy_memories_without_stored_keywords_are_tokenized(make_bank, settings, store_kind):
    if store_kind == "memory":
        pytest.skip("white-box: it edits a Chroma row by hand, as a store written before keywords were stored")
    bank = make_bank(settings=settings.with_changes(search_mode="keyword"))
    record = bank.add("the pangolin eats ants")
    collection = bank._store._typed("default")["fact"]  # white-box: a row written before keywords existed
    collection.update(ids=[record.id], metadatas=[{"keywords": None}])
    fresh = make_bank(settings=settings.with_changes(search_mode="keyword"))
    assert fresh.search("pangolin", 1)[0].id == record.id


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_k_results_whenever_k_memories_are_visible(make_bank, settings, mode):
    """A query that shares a word with one memory still gets k results in every mode: the rest by the priors
    (recency, importance), below the one it matched."""
    bank = make_bank(settings=settings.with_changes(search_mode=mode))
    matched = bank.add("the cat sleeps on the sofa", importance=0.1, resolve=False)
    others = [bank.add(text, importance=importance, resolve=False) for text, importance in (
        ("quarterly revenue report", 0.9), ("dentist on friday", 0.5), ("a blue umbrella", 0.3))]
    bank.add("hidden in another session", session_id="elsewhere", resolve=False)
    hits = bank.search("cat", 4)
    assert len(hits) == 4 and {hit.id for hit in hits} == {matched.id, *(o.id for o in others)}
    if mode != "dense":
        assert hits[0].id == matched.id
    assert len(bank.search("cat", 10)) == 4  # never another session's memory to make up the number

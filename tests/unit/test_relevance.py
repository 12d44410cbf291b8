"""Relevance (retrieval/relevance.py) and the relevance floor of a prompt (retrieval/budget.py): one scale in
[0, 1] whatever the mode and language, measured against what each side gives when nothing matches; the floor
applies where a prompt is assembled, never to a plain search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import T0, FakeEmbedder, WideFakeEmbedder
from vecmem import BudgetShares, MemoryRecord
from vecmem.models import Hit
from vecmem.retrieval.budget import ContextAssembler, TiktokenCounter
from vecmem.retrieval.relevance import COHORT, Cohort, dense_relevance, idf, keyword_scale

FACTS = ["The user lives in Hangzhou near West Lake", "The user works at Acme on the billing team",
         "用户养了一只猫叫年糕", "用户的公司用的是 PostgreSQL", "The user drinks oolong tea every morning"]
FILLER = ["thanks", "谢谢", "ok", "thank you!", "嗯嗯"]  # not 好的: the fake shares 的 with "用户的…" (no model would)


def wide_embedder() -> FakeEmbedder:
    return WideFakeEmbedder()  # two texts without a word in common look unrelated, as to a real model


def test_the_keyword_scale_is_the_lesser_of_the_whole_query_and_one_rare_term():
    unit = idf(1, 100) / 2.2
    assert keyword_scale([(1, 1.0)], 100, 1.2) == pytest.approx(unit)  # one rare term: one unit
    common = [(60, 1.0), (70, 1.0)]  # two words most memories hold: the whole query is less than one unit
    assert keyword_scale(common, 100, 1.2) == pytest.approx((idf(60, 100) + idf(70, 100)) / 2.2)
    assert keyword_scale(common, 100, 1.2) < unit
    long_query = [(0, 1.0)] * 8 + [(1, 1.0)]  # eight words no memory has and one rare one: one unit
    assert keyword_scale(long_query, 100, 1.2) == pytest.approx(unit)
    assert keyword_scale([], 100, 1.2) == 0.0
    assert idf(3, 10) == pytest.approx(math.log(1 + 7.5 / 3.5))


def test_dense_relevance_is_the_way_above_the_bar_to_one():
    assert dense_relevance(0.8, 0.6) == pytest.approx(0.5)
    assert dense_relevance(0.5, 0.6) == 0.0 and dense_relevance(1.2, 0.0) == 1.0 and dense_relevance(0.9, 1.0) == 0.0


def test_the_cohort_bar_is_the_second_best_cosine_over_both_languages():
    embedder = FakeEmbedder()
    cohort = Cohort(embedder)
    query = embedder.embed_query("the user likes tea")
    cosines = embedder.embed_documents([text for texts in COHORT.values() for text in texts]) @ query
    assert cohort.baseline(query) == pytest.approx(float(np.sort(cosines)[-2]), abs=1e-6)
    assert embedder.document_calls == 3  # the cohort is embedded once per bank (a call per language), not per query
    cohort.baseline(query)
    assert embedder.document_calls == 3
    assert {len(texts) for texts in COHORT.values()} == {32} and set(COHORT) == {"en", "zh"}


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_filler_has_no_relevance_and_a_question_about_a_fact_has_some(make_bank, settings, mode):
    bank = make_bank(settings=settings.with_changes(search_mode=mode), embedder=wide_embedder())
    for fact in FACTS:
        bank.add(fact)
    for filler in FILLER:
        hits = bank.search(filler, 5, record_access=False)
        assert all(hit.relevance is not None and hit.relevance < 0.1 for hit in hits), (filler, hits)
    asked = {"where does the user live?": "Hangzhou", "我的猫叫什么": "猫", "公司用什么数据库 PostgreSQL 吗": "PostgreSQL"}
    if mode == "dense":  # the fake's cosines know words, not meanings: "live" is not "lives" (the real model's test
        asked = {"Hangzhou West Lake": "Hangzhou", "年糕": "猫"}  # is tests/integration/test_relevance_model.py)
    for question, needle in asked.items():
        best = max(bank.search(question, 5, record_access=False), key=lambda hit: hit.relevance or 0.0)
        assert needle in best.content and best.relevance is not None and best.relevance >= 0.1, (question, mode)
    assert all(hit.relevance is None for hit in bank.search("", 5))  # nothing asked: nothing measured


def test_a_search_returns_the_k_best_whatever_their_relevance(bank):
    for fact in FACTS:
        bank.add(fact)
    assert len(bank.search("thanks", 5)) == 5  # the floor is the prompt's, not the search's


def _hit(memory_id: str, relevance: float | None) -> Hit:
    record = MemoryRecord(id=memory_id, content=f"memory {memory_id}", created_at=T0)
    return Hit(memory_id, record.content, "fact", 0.5, 0.5, 1.0, 0.5, record, relevance=relevance)


def test_the_assembler_holds_back_what_is_under_the_floor():
    assembler = ContextAssembler(TiktokenCounter(), BudgetShares(), relevance_floor=0.3)
    pack = assembler.assemble(query="q", hits=[_hit("a", 0.9), _hit("b", 0.29), _hit("c", None), _hit("d", 0.3)],
                              context_tokens=2000)
    assert [hit.id for hit in pack.memories] == ["a", "c", "d"]  # None: not measured (an empty query), not held back
    assert pack.below_floor_ids == ("b",) and pack.dropped_ids == ()
    assert "memory b" not in pack.long_term
    everything = ContextAssembler(TiktokenCounter(), BudgetShares(), relevance_floor=0.0)
    assert len(everything.assemble(query="q", hits=[_hit("a", 0.0)], context_tokens=2000).memories) == 1
    nothing = assembler.assemble(query="q", hits=[_hit("b", 0.1)], context_tokens=2000)
    assert nothing.memories == () and nothing.long_term == "" and nothing.tokens["long_term"] == 0
    assert all("Long-term" not in message["content"] for message in nothing.messages)


def test_build_context_applies_the_floor_and_search_does_not(make_bank, settings):
    bank = make_bank(embedder=wide_embedder())
    for fact in FACTS:
        bank.add(fact)
    thanks = bank.build_context("thanks")
    assert thanks.memories == () and thanks.long_term == "" and len(thanks.below_floor_ids) == len(FACTS)
    assert all(bank.get(memory_id).access_count == 0 for memory_id in thanks.below_floor_ids)  # not used
    asked = bank.build_context("where does the user live?")
    assert [hit.content for hit in asked.memories][0] == FACTS[0]
    assert f"- {T0:%Y-%m-%d} [fact] {FACTS[0]}" in asked.long_term  # dated, so newer can override older
    open_bank = make_bank(settings=settings.with_changes(relevance_floor=0.0), embedder=wide_embedder())
    assert len(open_bank.build_context("thanks").memories) == len(FACTS)

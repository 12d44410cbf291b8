"""A date the query names ranks the memories of that time first, softly, through the public
MemoryBank API; a query that names none ranks exactly as the reranker alone would."""

import math
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import FakeEmbedder, WideFakeEmbedder
from vecmem import RankWeights
from vecmem.retrieval.rank import recency, rerank

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # a Monday: "last Tuesday" and 上周二 are both 26 May
TUESDAY = datetime(2026, 5, 26, 19, 0, tzinfo=UTC)
CHESS = "played chess at the club until late"

DIARY = [  # (id, what, when): one entry a few days apart, across three months
    ("apr-02", "went hiking in the hills with Anna", datetime(2026, 4, 2, 10, tzinfo=UTC)),
    ("apr-20", "repaired the bicycle chain in the garage", datetime(2026, 4, 20, 10, tzinfo=UTC)),
    ("may-05", "cooked a big pot of curry for friends", datetime(2026, 5, 5, 10, tzinfo=UTC)),
    ("may-19", "visited the dentist for a checkup", datetime(2026, 5, 19, 10, tzinfo=UTC)),
    ("may-26", CHESS, TUESDAY),
    ("may-29", "bought new running shoes downtown", datetime(2026, 5, 29, 10, tzinfo=UTC)),
    ("may-31", "watched a documentary about whales", datetime(2026, 5, 31, 10, tzinfo=UTC)),
]
ZH_DIARY = [  # the same, in Chinese, for another user (no word shared with the questions asked)
    ("zh-02", "跟安娜去山里徒步", datetime(2026, 4, 2, 10, tzinfo=UTC)),
    ("zh-20", "在车库修自行车链条", datetime(2026, 4, 20, 10, tzinfo=UTC)),
    ("zh-05", "给朋友煮一大锅咖喱", datetime(2026, 5, 5, 10, tzinfo=UTC)),
    ("zh-19", "去看牙医检查牙齿", datetime(2026, 5, 19, 10, tzinfo=UTC)),
    ("zh-26", "在俱乐部下棋到很晚", TUESDAY),
    ("zh-29", "在市中心买新跑鞋", datetime(2026, 5, 29, 10, tzinfo=UTC)),
    ("zh-31", "看一部关于鲸鱼的纪录片", datetime(2026, 5, 31, 10, tzinfo=UTC)),
]


@pytest.fixture
def diary(make_bank, clock):
    """English memories for the default user, Chinese ones for "zh"; an embedder whose unrelated texts are
    near orthogonal (WideFakeEmbedder), so that a date, not a hash collision, is what moves a memory."""
    clock.now = NOW
    bank = make_bank(embedder=WideFakeEmbedder())
    for user, entries in ((None, DIARY), ("zh", ZH_DIARY)):
        for memory_id, content, when in entries:
            bank.add(content, memory_id=memory_id, created_at=when, user_id=user)
    return bank


def search(bank, query, k):
    return bank.search(query, k, user_id="zh" if any("\u4e00" <= char <= "\u9fff" for char in query) else None,
                       record_access=False)


def ids(hits):
    return [hit.id for hit in hits]


@pytest.mark.parametrize(("query", "expected"), [
    ("what did I do last Tuesday", "may-26"),
    ("what did I do on May 26", "may-26"),
    ("我上周二做了什么", "zh-26"),
    ("我5月26号做了什么", "zh-26"),
])
def test_the_memory_of_the_named_day_ranks_first(diary, query, expected):
    hits = search(diary, query, 3)
    assert hits[0].id == expected
    assert hits[0].recency == 1.0  # inside the window
    assert all(hit.recency < 0.2 for hit in hits[1:])  # days away from a one-day window


def test_a_wider_window_ranks_its_memories_above_the_newer_ones(diary):
    top = ids(search(diary, "what did I do in April", 2))
    assert sorted(top) == ["apr-02", "apr-20"]  # the oldest memories, above a month of newer ones
    zh_top = ids(search(diary, "我两个月前做了什么", 2))  # April, the calendar month
    assert sorted(zh_top) == ["zh-02", "zh-20"]


def test_the_window_is_soft_a_clearly_relevant_memory_outside_it_still_ranks_first(diary):
    # the dentist's visit was 19 May, a week before the window: its words outweigh the date
    assert search(diary, "when did I visit the dentist for a checkup last Tuesday", 1)[0].id == "may-19"


def test_memories_inside_the_window_that_neither_side_found_are_added(make_bank, clock, settings, monkeypatch):
    # 40 older notes whose hashed words happen to point the fake embedder's way of "last Tuesday" (no word in
    # common) fill the dense side's 20 candidates, and the keyword side finds nothing: only the catalogue's
    # dates make the chess memory, orthogonal to the question, a candidate
    clock.now = NOW
    embedder = FakeEmbedder()
    question = embedder.embed_query("last Tuesday")
    notes = [text for text in (f"note{number} garden" for number in range(5_000))
             if float(embedder.embed_query(text) @ question) > 0.3][:40]
    assert len(notes) == 40 and float(embedder.embed_query(CHESS) @ question) == 0.0
    # the notes are clear dense matches, which the priors may not outrank (rank.py): with the similarity weighing
    # little, what decides is whether the window's memory is a candidate at all
    bank = make_bank(embedder=embedder, settings=settings.with_changes(min_candidates=20,
                                                                       weights=RankWeights(0.2, 0.6, 0.2)))
    bank.add(CHESS, memory_id="chess", created_at=TUESDAY)
    for number, text in enumerate(notes):
        bank.add(text, memory_id=f"note-{number}", created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=number))
    assert ids(bank.search("last Tuesday", 1, record_access=False)) == ["chess"]

    from vecmem.retrieval.index.views import FilterView

    monkeypatch.setattr(FilterView, "created_within", lambda self, start, end, limit: [])
    assert "chess" not in ids(bank.search("last Tuesday", 5, record_access=False))  # what the window added


def test_a_query_without_a_date_ranks_exactly_as_the_reranker_alone(diary):
    for query in ("what did I do", "shoes and chess", "我做了什么", "下棋 跑鞋", "tuesday chess club"):
        hits = search(diary, query, 12)
        assert len(hits) == len(DIARY)
        again = rerank([(hit.record, hit.similarity) for hit in hits], now=NOW, weights=RankWeights(),
                       decay_per_day=0.01)
        assert ids(again) == ids(hits)
        assert [hit.score for hit in again] == [hit.score for hit in hits]
        for hit in hits:
            assert hit.recency == recency(hit.record, NOW, 0.01)  # closeness to now, not to any window


def test_with_similarity_only_weights_a_date_is_evidence(make_bank, clock, settings):
    """The date a question names is part of what it asks (fusion.py): with similarity alone, of two memories
    the words match alike, the one from that day leads, and the other keeps the share not resting on the date."""
    from vecmem.retrieval.fusion import DATE_SHARE

    clock.now = NOW
    bank = make_bank(settings=settings.with_changes(weights=RankWeights(1, 0, 0)), embedder=WideFakeEmbedder())
    april = datetime(2026, 4, 7, 19, tzinfo=UTC)
    bank.add(CHESS, memory_id="april-chess", created_at=april, resolve=False)  # the same words twice, on purpose
    bank.add(CHESS, memory_id="tuesday-chess", created_at=TUESDAY, resolve=False)
    undated = bank.search("where did I play chess", 2, record_access=False)
    assert undated[0].similarity == pytest.approx(undated[1].similarity)  # the words cannot tell them apart
    dated = bank.search("where did I play chess last Tuesday", 2, record_access=False)
    assert ids(dated) == ["tuesday-chess", "april-chess"]
    assert all(hit.score == pytest.approx(hit.similarity) for hit in dated)
    window_start = datetime(2026, 5, 26, tzinfo=UTC)  # last Tuesday, one day long
    closeness = math.exp(-(window_start - april).total_seconds() / 86_400)
    assert dated[1].similarity == pytest.approx(dated[0].similarity * (1 - DATE_SHARE + DATE_SHARE * closeness))


def test_recency_within_a_window_is_the_closeness_to_it(diary):
    hits = {hit.id: hit for hit in search(diary, "what did I do last week", 12)}
    # last week: Monday 25 May to Sunday 31 May, a seven-day window
    assert hits["may-26"].recency == hits["may-31"].recency == hits["may-29"].recency == 1.0
    outside = datetime(2026, 5, 25, tzinfo=UTC) - DIARY[3][2]  # 19 May: 5.58 days before it
    assert hits["may-19"].recency == pytest.approx(math.exp(-outside / timedelta(days=1) / 7))

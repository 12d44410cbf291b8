"""The date phrases a query is read for (vecmem.retrieval.query.timeframe), each against a fixed clock, and the words
that must not be read as dates."""

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from vecmem.retrieval.query.timeframe import TimeWindow, find_window

NOW = datetime(2026, 6, 11, 15, 0, tzinfo=UTC)  # a Thursday


def day(text: str) -> tuple[str, str]:
    """[day, next day) as ISO dates."""
    start = datetime.fromisoformat(text).date()
    return start.isoformat(), (start + timedelta(days=1)).isoformat()


def span(query: str, now: datetime = NOW) -> tuple[str, str] | None:
    window = find_window(query, now)
    if window is None:
        return None
    as_text = [moment.date().isoformat() if moment.time() == datetime.min.time() else moment.isoformat()
               for moment in (window.start, window.end)]
    return as_text[0], as_text[1]


ENGLISH = [
    ("what did I do today", day("2026-06-11")),
    ("what did I eat this morning", day("2026-06-11")),
    ("what did I buy yesterday?", day("2026-06-10")),
    ("the day before yesterday", day("2026-06-09")),
    ("3 days ago", day("2026-06-08")),
    ("three days ago", day("2026-06-08")),
    ("a week ago", ("2026-06-01", "2026-06-08")),  # the calendar week, Monday to Sunday
    ("two weeks ago", ("2026-05-25", "2026-06-01")),
    ("a month ago", ("2026-05-01", "2026-06-01")),
    ("twelve months ago", ("2025-06-01", "2025-07-01")),
    ("a couple of years ago", ("2024-01-01", "2025-01-01")),
    ("last week", ("2026-06-01", "2026-06-08")),
    ("this week", ("2026-06-08", "2026-06-15")),
    ("last month", ("2026-05-01", "2026-06-01")),
    ("this month", ("2026-06-01", "2026-07-01")),
    ("last year", ("2025-01-01", "2026-01-01")),
    ("this year", ("2026-01-01", "2027-01-01")),
    ("earlier this week", ("2026-06-08", NOW.isoformat())),
    ("earlier this month", ("2026-06-01", NOW.isoformat())),
    ("in the past two weeks", ((NOW - timedelta(days=14)).isoformat(), NOW.isoformat())),
    ("what did I do last Tuesday", day("2026-06-09")),  # the most recent Tuesday before today
    ("last Thursday", day("2026-06-04")),  # said on a Thursday: a week ago
    ("last Friday", day("2026-06-05")),
    ("on Monday", day("2026-06-08")),
    ("this Tuesday", day("2026-06-09")),
    ("this past Wednesday", day("2026-06-10")),
    ("last weekend", ("2026-06-06", "2026-06-08")),
    ("over the weekend", ("2026-06-06", "2026-06-08")),
    ("in May", ("2026-05-01", "2026-06-01")),
    ("in June", ("2026-06-01", "2026-07-01")),  # the current month counts
    ("last June", ("2025-06-01", "2025-07-01")),  # ... but not after "last"
    ("in July", ("2025-07-01", "2025-08-01")),  # the latest July that has begun
    ("in May 2023", ("2023-05-01", "2023-06-01")),
    ("in Sept 2024", ("2024-09-01", "2024-10-01")),
    ("November 2022", ("2022-11-01", "2022-12-01")),
    ("in 2023", ("2023-01-01", "2024-01-01")),
    ("since 2024", ("2024-01-01", NOW.isoformat())),
    ("since March", ("2026-03-01", NOW.isoformat())),
    ("2023-05-08", day("2023-05-08")),
    ("2023/5/8", day("2023-05-08")),
    ("May 8", day("2026-05-08")),
    ("May 8, 2023", day("2023-05-08")),
    ("on October 13th", day("2025-10-13")),  # still to come this year: last year's
    ("8 May 2023", day("2023-05-08")),
    ("25 February, 2022", day("2022-02-25")),
    ("the 8th of May", day("2026-05-08")),
]

CHINESE = [
    ("今天", day("2026-06-11")),
    ("我昨天买了什么", day("2026-06-10")),
    ("前天", day("2026-06-09")),
    ("大前天", day("2026-06-08")),
    ("上周", ("2026-06-01", "2026-06-08")),
    ("上星期", ("2026-06-01", "2026-06-08")),
    ("上个星期", ("2026-06-01", "2026-06-08")),
    ("上礼拜", ("2026-06-01", "2026-06-08")),
    ("上上周", ("2026-05-25", "2026-06-01")),
    ("这周", ("2026-06-08", "2026-06-15")),
    ("本周", ("2026-06-08", "2026-06-15")),
    ("这星期", ("2026-06-08", "2026-06-15")),
    ("上个月", ("2026-05-01", "2026-06-01")),
    ("上月", ("2026-05-01", "2026-06-01")),
    ("这个月", ("2026-06-01", "2026-07-01")),
    ("本月", ("2026-06-01", "2026-07-01")),
    ("去年", ("2025-01-01", "2026-01-01")),
    ("前年", ("2024-01-01", "2025-01-01")),
    ("今年", ("2026-01-01", "2027-01-01")),
    ("3天前", day("2026-06-08")),
    ("三天前", day("2026-06-08")),
    ("两周前", ("2026-05-25", "2026-06-01")),
    ("三个星期前", ("2026-05-18", "2026-05-25")),
    ("2个月前", ("2026-04-01", "2026-05-01")),
    ("十二个月前", ("2025-06-01", "2025-07-01")),
    ("一年前", ("2025-01-01", "2026-01-01")),
    ("我上周二做了什么", day("2026-06-02")),  # the Tuesday of the previous calendar week, unlike "last Tuesday"
    ("上星期三", day("2026-06-03")),
    ("上礼拜天", day("2026-06-07")),
    ("这周二", day("2026-06-09")),
    ("上周末", ("2026-06-06", "2026-06-08")),
    ("周三", day("2026-06-10")),
    ("星期三", day("2026-06-10")),
    ("周四", day("2026-06-04")),  # today is Thursday: the one before
    ("去年五月", ("2025-05-01", "2025-06-01")),
    ("去年5月", ("2025-05-01", "2025-06-01")),
    ("今年三月", ("2026-03-01", "2026-04-01")),
    ("五月", ("2026-05-01", "2026-06-01")),
    ("5月", ("2026-05-01", "2026-06-01")),
    ("六月份", ("2026-06-01", "2026-07-01")),  # the current month counts
    ("十二月", ("2025-12-01", "2026-01-01")),
    ("2023年", ("2023-01-01", "2024-01-01")),
    ("二〇二三年", ("2023-01-01", "2024-01-01")),
    ("2023年5月", ("2023-05-01", "2023-06-01")),
    ("5月8日", day("2026-05-08")),
    ("5月8号", day("2026-05-08")),
    ("五月八号", day("2026-05-08")),
    ("12月25日", day("2025-12-25")),
    ("2023年5月8日", day("2023-05-08")),
    ("2023-05-08", day("2023-05-08")),
    ("2023/5/8", day("2023-05-08")),
]


@pytest.mark.parametrize(("query", "expected"), ENGLISH + CHINESE, ids=[q for q, _ in ENGLISH + CHINESE])
def test_each_form_names_its_span(query, expected):
    assert span(query) == expected


@pytest.mark.parametrize("query", [
    "recently", "what have I been up to lately", "最近怎么样", "前几天", "几天前",  # vague: no window
    "lastly, what is my name", "the mayor of my town", "May I ask what I like?", "you may 3d print it",
    "the last day of school", "every Tuesday", "what do I do on Tuesdays", "this weekend's plan",
    "next week", "this Friday", "明天", "这周五", "下个月",  # ahead of us
    "三个月", "每周三", "我周一到周五上班", "一周一次", "马上月底了", "这周围有什么", "周期表", "2023年前",
    "在线上周报", "I scored 12 points", "version 2.10.3", "in 10 minutes",
])
def test_words_that_are_no_date_give_no_window(query):
    assert find_window(query, NOW) is None


def test_the_longest_phrase_wins_then_the_first():
    assert find_window("2023年5月8日", NOW).phrase == "2023年5月8日"
    assert find_window("what did I say in May 2023, not in 2021", NOW).phrase == "in May 2023"
    assert find_window("yesterday or today", NOW).phrase == "yesterday"


def test_a_date_that_does_not_exist_is_no_window():
    assert find_window("2023年2月30日", NOW) is None
    assert find_window("February 29", NOW).start.date().isoformat() == "2024-02-29"  # the latest year that has it


def test_days_are_the_clocks_own_zone():
    beijing = timezone(timedelta(hours=8))
    window = find_window("yesterday", datetime(2026, 6, 11, 1, 0, tzinfo=beijing))  # still 10 June in UTC
    assert window.start == datetime(2026, 6, 10, tzinfo=beijing) and window.end == datetime(2026, 6, 11, tzinfo=beijing)
    assert find_window("today", datetime(2026, 6, 11, 12)).start.tzinfo is not None  # a naive clock is read as UTC


def test_closeness_is_one_inside_and_decays_by_the_windows_length_outside():
    window = TimeWindow(datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC), "in May")
    assert window.scale_days == 31
    assert window.closeness(datetime(2026, 5, 15, tzinfo=UTC).timestamp()) == 1.0
    assert window.closeness(datetime(2026, 5, 1, tzinfo=UTC).timestamp()) == 1.0  # start included ...
    assert window.closeness(datetime(2026, 6, 1, tzinfo=UTC).timestamp()) == 1.0  # ... end's first moment: 0 days out
    assert window.closeness(datetime(2026, 7, 2, tzinfo=UTC).timestamp()) == pytest.approx(math.exp(-1))
    assert window.closeness(datetime(2026, 3, 31, tzinfo=UTC).timestamp()) == pytest.approx(math.exp(-1))
    one_day = TimeWindow(datetime(2026, 6, 9, tzinfo=UTC), datetime(2026, 6, 10, tzinfo=UTC), "last Tuesday")
    assert one_day.scale_days == 1
    assert one_day.closeness(datetime(2026, 6, 12, tzinfo=UTC).timestamp()) == pytest.approx(math.exp(-2))
    hour = TimeWindow(NOW - timedelta(hours=1), NOW, "the past hour")
    assert hour.scale_days == 1  # at least a day


def test_a_window_refuses_naive_or_empty_spans():
    with pytest.raises(ValueError):
        TimeWindow(datetime(2026, 1, 1), datetime(2026, 1, 2), "naive")
    with pytest.raises(ValueError):
        TimeWindow(NOW, NOW, "empty")


def test_a_query_is_parsed_once_and_its_window_read_at_each_moment():
    from vecmem.retrieval.query.parsed import parse_query

    first = parse_query("What did I eat yesterday? And where did I go on Monday?")
    assert parse_query("What did I eat yesterday? And where did I go on Monday?") is first  # cached by text
    assert [part.text for part in first.asked] == ["What did I eat yesterday?", "where did I go on Monday?"]
    monday = datetime(2023, 5, 8, 12, tzinfo=UTC)
    assert first.window(monday) != first.window(monday + timedelta(days=1))  # "yesterday" moves with the moment
    dialogue = parse_query("<Priya>: I went out yesterday\n<Greta>: where to?")
    assert dialogue.utterances is not None and len(dialogue.keyword_parts) == 2
    assert dialogue.window(monday) is None  # a conversation's "yesterday" names no time the user asks about

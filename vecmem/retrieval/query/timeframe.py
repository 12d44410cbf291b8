"""Reading the time a question is about from its words: ``find_window(query, now)``.

English and Chinese, relative and absolute: today, yesterday, N days/weeks/months/years ago, last/this week,
month or year, last Tuesday, in May, May 8, 2023-05-08, in 2023; 今天, 昨天, 前天, 上周, 上周二, 上个月, 去年五月,
三天前, 2023年5月8日, 5月8号, 周三. Each phrase names a [start, end) span of the clock's calendar (timewindow.py);
when several are there, the longest phrase wins (2023年5月8日 over 2023年), then the first.

A wrong window is worse than none (it pulls the wrong memories up), so the rules are conservative: words count
as words only ("lastly", "mayor" and "this weekend" are not "last", "May" and "this week"); a bare "May" is a
month only with a day or a year, or after in / last / since / during ("May I ask" is not); habits are not
dates ("every Tuesday", "on Tuesdays", 每周三, 周一到周五); a count is not a month (三个月 is a duration; 三月 is
March); the future has no window ("next week", 明天: memories are of the past); and vague words ("recently",
最近, 前几天) give none, leaving the reranker's own recency in place.

Readings chosen where speakers differ (tests/unit/test_timeframe.py pins each):

* "last Tuesday" is the most recent Tuesday before today, as dateparser and Duckling read it; said on a
  Tuesday, a week ago. Chinese says which week outright: 上周二 is the Tuesday of the previous calendar week,
  这周二 this week's. "on Tuesday" and a bare 周二 are the most recent Tuesday before today.
* "in May" and a bare 五月 / 5月 are the latest May that has begun, this one if we are in it; "last May" is the
  latest before this month. With a year, that year's.
* "N weeks ago" and N周前 are the calendar week (Monday to Sunday) N weeks back; "N months ago" the calendar
  month; "in the past two weeks" is the 14 days up to now.
* "since May" / "since 2023" run from the start of that span up to now.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

from vecmem.retrieval.query.timewindow import Calendar, TimeWindow

__all__ = ["TimeWindow", "find_window"]

_Span = tuple[datetime, datetime]
_Rule = tuple[re.Pattern[str], Callable[[re.Match[str], Calendar], _Span | None]]

# ------------------------------------------------------------------------------------------------- words

_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
               "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2}
_EN_COUNT = r"(\d{1,3}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EN_WEEKDAY = "(" + "|".join(_WEEKDAYS) + ")"
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_NUMBER = {**{name: number for number, name in enumerate(_MONTHS, 1)},
                 **{name[:3]: number for number, name in enumerate(_MONTHS, 1)}, "sept": 9}
_EN_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december" \
            r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_YEAR = r"(19[7-9]\d|20\d\d)"  # what a memory's date can be: the epoch to this century's end
_DAY = r"([12]\d|3[01]|0?[1-9])"

_ZH_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9}
_ZH_COUNT = r"(?<![\d一二两三四五六七八九十几])(\d{1,3}|[一二两三四五六七八九十]{1,3})"
_ZH_MONTH = r"(1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])"
_ZH_DAY = r"([12]\d|3[01]|0?[1-9]|[二三]?十[一二三四五六七八九]?|[一二三四五六七八九])"
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": -1}
_ZH_WEEK = r"(?:周|星期|礼拜|週)"
_NOT_A_WEEK = r"(?![期年围边到全转岁刊报游遭身])"  # 周期, 周年, 周围 ...: words that start with 周, not weeks


def _count(text: str) -> int:
    """An English or Chinese count: 3, "three", "a couple of", 十二, 两."""
    text = text.lower()
    if text.isdigit():
        return int(text)
    if text in _EN_NUMBERS:
        return _EN_NUMBERS[text]
    return _zh_number(text)


def _zh_number(text: str) -> int:
    """一 .. 九十九 (十一, 二十, 三十一) and digits written with Chinese numerals (二〇二三)."""
    if "十" not in text:
        return int("".join(str(_ZH_DIGITS[char]) for char in text))
    tens, _, ones = text.partition("十")
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _zh_number(text)


def _unit(word: str) -> str:
    """day, week, month or year, for an English or Chinese unit word."""
    word = word.lower()
    if word in ("天", "日") or word.startswith("day"):
        return "day"
    if word in ("周", "星期", "礼拜", "週") or word.startswith("week"):
        return "week"
    return "month" if word in ("月", "个月") or word.startswith("month") else "year"


def _since(text: str, span: _Span | None, calendar: Calendar) -> _Span | None:
    """A span read after "since": from its start up to now."""
    if span is None or not text.lower().startswith("since"):
        return span
    return (span[0], calendar.now) if span[0] < calendar.now else None


# ------------------------------------------------------------------------------------------------- English

def _en_month(match: re.Match[str], calendar: Calendar) -> _Span | None:
    """in / during / since / last <Month> [YYYY]."""
    lead, name, year = match.group(1).lower(), match.group(2).lower(), match.group(3)
    month = _MONTH_NUMBER[name]
    if year is not None:
        span = calendar.month(int(year), month)
    else:
        span = calendar.recent_month(month, this_one_too=lead != "last")
    return _since(lead, span, calendar)


def _en_month_day(match: re.Match[str], calendar: Calendar) -> _Span | None:
    """<Month> <day>[, YYYY] and <day> [of] <Month> [YYYY]; a bare "may" needs a capital M or a year."""
    name, day, year = (match.group(1), match.group(2), match.group(3)) if match.group(1) else \
        (match.group(5), match.group(4), match.group(6))
    if name.lower() == "may" and year is None and not name.startswith("M"):
        return None
    month = _MONTH_NUMBER[name.lower().rstrip(".")]
    if year is not None:
        return calendar.date(int(year), month, int(day))
    return calendar.recent_date(month, int(day))


def _en_weekday(match: re.Match[str], calendar: Calendar) -> _Span | None:
    lead, weekday = match.group(1).lower(), _WEEKDAYS.index(match.group(2).lower())
    if lead == "this":  # this week's, once it has come; "this Friday" said on a Monday is ahead of us
        span = calendar.weekday_of_week(weekday, 0)
        return span if span[0] <= calendar.now else None
    return calendar.last_weekday(weekday)


def _en_period(match: re.Match[str], calendar: Calendar) -> _Span | None:
    """last / previous / this / earlier this week, month, year."""
    lead, unit = match.group(1).lower(), match.group(2).lower()
    back = 0 if lead.endswith("this") else 1
    span = calendar.back(back, unit)
    return (span[0], calendar.now) if lead.startswith("earlier") else span


_ENGLISH: list[tuple[str, Callable[[re.Match[str], Calendar], _Span | None]]] = [
    (r"\bthe day before yesterday\b", lambda m, c: c.days_ago(2)),
    (r"\byesterday\b", lambda m, c: c.days_ago(1)),
    (r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", lambda m, c: c.days_ago(0)),
    (r"\blast night\b", lambda m, c: (c.days_ago(1)[0], c.days_ago(0)[0] + timedelta(hours=6))),  # till dawn
    (rf"\b{_EN_COUNT} (day|week|month|year)s? ago\b", lambda m, c: c.back(_count(m.group(1)), _unit(m.group(2)))),
    # "the last" only after in / over / during / within / for: "the last day of school" is no span
    (rf"\b(?:(?:in|over|during|within|for) the (?:past|last)|the past) (?:{_EN_COUNT} )?(day|week|month|year)s?\b",
     lambda m, c: c.rolling(_count(m.group(1) or "1"), _unit(m.group(2)))),
    (r"\b(last|previous|this|earlier this) (week|month|year)\b", _en_period),
    (r"\blast weekend\b", lambda m, c: c.weekend(1)),
    (r"\b(?:the|over the) weekend\b", lambda m, c: c.recent_weekend()),
    (r"\bthis weekend\b", lambda m, c: c.weekend(0) if c.today.weekday() >= 5 else None),  # else it is ahead
    (rf"(?<!every )\b(last|this past|past|on|this) {_EN_WEEKDAY}\b", _en_weekday),
    (rf"\b(in|during|since|last|early|late|mid|back in) {_EN_MONTH}(?:,? {_YEAR})?\b", _en_month),
    (rf"\b{_EN_MONTH} {_YEAR}\b", lambda m, c: c.month(int(m.group(2)), _MONTH_NUMBER[m.group(1).lower()])),
    (rf"\b(?:{_EN_MONTH} {_DAY}(?:st|nd|rd|th)?(?:,? {_YEAR})?|{_DAY}(?:st|nd|rd|th)? (?:of )?{_EN_MONTH}"
     rf"(?:,? {_YEAR})?)\b(?!:)", _en_month_day),
    (rf"\b(in|during|since|from|back in|throughout) {_YEAR}\b(?![-/.:]\d)",
     lambda m, c: _since(m.group(1), c.year(int(m.group(2))), c)),
]


# ------------------------------------------------------------------------------------------------- Chinese

def _zh_weekday(text: str) -> int:
    """Monday 0 .. Sunday 6 for 一 .. 日 / 天 and 1 .. 7; -1 for 末 (the weekend)."""
    return int(text) - 1 if text.isdigit() else _ZH_WEEKDAY[text]


def _zh_week(match: re.Match[str], calendar: Calendar) -> _Span | None:
    """上周 / 上上周 / 这周 / 本周, and with a day after it: 上周二, 这星期天, 上周末."""
    lead, day = match.group(1), match.group(2)
    back = {"上上": 2, "上": 1}.get(lead.removesuffix("个"), 0)
    if day is None:
        return calendar.week(back)
    weekday = _zh_weekday(day)
    if weekday == -1:
        return calendar.weekend(back)
    span = calendar.weekday_of_week(weekday, back)
    return span if span[0] <= calendar.now else None  # 这周五 said on a Monday is ahead of us


def _zh_dated(match: re.Match[str], calendar: Calendar) -> _Span | None:
    """Year, month and day, any of them left out from the front: 2023年5月8日, 去年五月, 5月8号, 三月, 2023年."""
    digits, word, month_text, day_text = match.group(1), match.group(2), match.group(3), match.group(4)
    if digits is None and word is None and month_text is None:
        return None
    relative = {"今年": 0, "去年": 1, "前年": 2, "大前年": 3}
    year = calendar.today.year - relative[word] if word else _number(digits) if digits else None
    if month_text is None:
        return None if year is None else calendar.year(year)
    month = _number(month_text)
    if day_text is None:
        return calendar.recent_month(month, this_one_too=True) if year is None else calendar.month(year, month)
    day = _number(day_text)
    return calendar.recent_date(month, day) if year is None else calendar.date(year, month, day)


# 上 closes many words (马上 at once, 晚上 evening, 楼上 upstairs, 去上课): after one of them, 上周 / 上月 is no date
_NOT_AFTER_SHANG = r"(?<![马晚早楼路身桌网线世加以之向往北爱遇赶跟比看想墙床去])"
_CHINESE: list[tuple[str, Callable[[re.Match[str], Calendar], _Span | None]]] = [
    (r"大前天", lambda m, c: c.days_ago(3)),
    (r"前天", lambda m, c: c.days_ago(2)),
    (r"昨天|昨日|昨晚|昨儿", lambda m, c: c.days_ago(1)),
    (r"今天|今日|今早|今晚|今儿", lambda m, c: c.days_ago(0)),
    (rf"{_ZH_COUNT}(天|日|周|个星期|星期|个礼拜|礼拜|个月|年)(?:之前|以前|前)",
     lambda m, c: c.back(_number(m.group(1)), _unit(m.group(2).removeprefix("个")))),
    (rf"{_NOT_AFTER_SHANG}(上上个|上个|上上|上|这个|这|本){_ZH_WEEK}{_NOT_A_WEEK}([一二三四五六日天末1-7])?", _zh_week),
    (rf"{_NOT_AFTER_SHANG}(上上个|上个|上上|上|这个|本)月", lambda m, c: c.months_back(
        {"上上个": 2, "上上": 2, "上个": 1, "上": 1}.get(m.group(1), 0))),
    # a bare weekday: not after 每 (every), a count (一周一次) or 到 (周一到周五: a habit), nor before 到
    (rf"(?<![每上这本个一二两三四五六七八九十几\d到至]){_ZH_WEEK}([一二三四五六日天1-7])(?![到至~\-－])",
     lambda m, c: c.last_weekday(_zh_weekday(m.group(1)))),
    # [year][month 月[day 日|号]]: not 三个月 or 每月 (no month), nor 2023年前 (before 2023) or 5月8 (a day unsaid)
    (r"(?:(?:(?<!\d)(\d{4}|[〇零一二三四五六七八九]{4})年|(大前年|前年|去年|今年))|(?<![\d一二三四五六七八九十两几个第每]))"
     rf"(?:{_ZH_MONTH}月份?(?:{_ZH_DAY}[日号])?)?(?!以?前|之前|\d)", _zh_dated),
]

_BOTH: list[tuple[str, Callable[[re.Match[str], Calendar], _Span | None]]] = [
    (r"(?<![\d/.-])" + _YEAR + r"[-/](1[0-2]|0?[1-9])[-/]" + _DAY + r"(?![\d/.-])",
     lambda m, c: c.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))),
    (r"(?<![\d/.-])" + _YEAR + r"-(1[0-2]|0[1-9])(?![\d/.-])", lambda m, c: c.month(int(m.group(1)), int(m.group(2)))),
]

_RULES: list[_Rule] = [(re.compile(pattern, re.IGNORECASE), read) for pattern, read in [*_ENGLISH, *_CHINESE, *_BOTH]]


def find_window(query: str, now: datetime) -> TimeWindow | None:
    """The span of time ``query`` asks about, read against ``now`` (its zone's calendar), or None.

    Every rule's phrases are found; the longest wins, then the earliest, so "2023年5月8日" is a day and not the
    year its first characters name. A phrase that names no real span (30 February, a weekday still to come)
    gives way to the next longest, as does one beyond the calendar (a week before 1 January of year 1).
    """
    calendar = Calendar(now)
    found: list[tuple[int, int, str, _Span]] = []
    for pattern, read in _RULES:
        for match in pattern.finditer(query):
            try:
                span = read(match, calendar)
            except OverflowError:
                continue
            if match.end() > match.start() and span is not None and span[1] > span[0]:
                found.append((-(match.end() - match.start()), match.start(), match.group(0).strip(), span))
    if not found:
        return None
    _, _, phrase, (start, end) = min(found, key=lambda item: item[:2])
    return TimeWindow(start, end, phrase)

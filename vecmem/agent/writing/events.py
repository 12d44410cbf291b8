"""Events: what someone did, and when, told in passing ("I went to a support group yesterday", "上周我们领养了一只
小狗"). Without a model, a clause that narrates one is kept as a fact even when it names no preference or other
cue of ``rules.classify``, and its date is written down as the day it refers to.

* **An event** is a clause in the past: a past-tense action ("went", "adopted", "have been", 了, 过) after its
  subject (I, we, my sister; 我, 我们; or left out at the clause's start, "got married last week"), or anywhere
  in a clause that also says when (yesterday, last week, on Saturday, in 2021; 昨天, 上周, 去年: the phrases
  ``retrieval.timeframe`` reads in questions). A question, a request, or a clause with too little information is
  none: "I loved it" and "太好了" are no events.
* **Its date** is read from the clause against the time it was said (the message's own time; else now), and the
  relative phrase is replaced by the date it names: "yesterday" said on 8 May 2023 is "on 7 May 2023", 上周 is
  "2023年5月1日那一周". A memory outlives the day it was said on, and "yesterday" means nothing a month later.
  A phrase that already names its year ("in 2021", "2023年5月") is left as it is.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from vecmem.agent import rules
from vecmem.retrieval.query.timeframe import TimeWindow, find_window
from vecmem.text import has_cjk

__all__ = ["dated", "event_reason", "is_past"]

_IRREGULAR_PAST = (
    "went|got|had|made|took|saw|met|bought|brought|built|caught|chose|came|drove|ate|fell|felt|flew|found|gave|"
    "grew|heard|held|kept|left|lost|paid|put|ran|read|rode|sang|sent|slept|spent|spoke|swam|taught|threw|told|"
    "thought|won|wore|wrote|began|became|broke|did|drew|forgot|hung|hit|quit|sold|shot|shut|sat|stood|stole|"
    "struck|swept|tore|understood|woke|was|were|been|done|gone|seen|taken|given|written|begun|finished|started|"
    "joined|moved|adopted|visited|attended|graduated|married|travel(?:l)?ed|tried|celebrated|volunteered|painted|"
    "signed|launched|released|published|received|won|passed|opened|closed|hosted|organized|organised|learned|"
    "learnt|studied|created|decided|discovered|bumped|ran"
)
# a past-tense verb: an irregular one, or a regular -ed form (not an adjective alone: "excited", "tired")
_FEELINGS = ("excit|interest|tir|bor|worri|scar|amaz|surpris|stress|bless|pleas|thrill|overwhelm|inspir|motivat|"
             "relax|exhaust|confus|disappoint|annoy|frustrat|need|se|fe|bl|blessed|determin|attach|obsess|talent|"
             "committ|dedicat|devot|gift|experienc|skill|advanc|qualifi|marri(?= to)")
_EN_PAST = rf"(?:{_IRREGULAR_PAST}|(?!(?:{_FEELINGS})ed\b)[a-z]{{2,}}ed)"
# the speaker or someone they tell of by name; not "you" (the listener) nor "it", "that" (a thing, a remark)
_EN_SUBJECT = r"(?:i|we|my \w+|our \w+|he|she|they|(?-i:(?!(?:You|It|That|This|There|These|Those|What|Here|" \
              r"Which|Who|How|Why)\b)[A-Z][a-z]+))"
_EN_AUXILIARY = r"(?:(?:'ve|\s+have|\s+had|'d)\s+)?"
_EN_ADVERB = r"(?:(?:just|also|finally|even|recently|actually|really|already|once|then|both|all)\s+)*"
_EN_SUBJECT_PAST = re.compile(rf"(?:^|\b{_EN_SUBJECT}){_EN_AUXILIARY}\s*{_EN_ADVERB}(?:{_EN_PAST})\b",
                              re.IGNORECASE)
_EN_ANY_PAST = re.compile(rf"\b{_EN_PAST}\b", re.IGNORECASE)
_ZH_PAST = re.compile(r"[\u4e00-\u9fff](?:了|过)(?![吗吧呢啊呀])|刚刚|已经")
_ZH_FIRST_PERSON = re.compile(r"我|咱们")
_ZH_PAST_DATE = re.compile(r"昨|前天|上上?(?:个)?(?:周|星期|礼拜|月)|去年|前年|\S前(?!面|往|进)")
_ZH_SUBJECT = re.compile(r"我|咱们|^(?![你他她它这那])")
_MIN_EVENT_UNITS = 3  # "I went there" is too little to be worth a memory


def event_reason(clause: str, now: datetime | None = None) -> str | None:
    """Why ``clause`` narrates an event worth keeping (module docstring), or None when it does not."""
    text = clause.strip()
    if not text or rules.is_question(text) or rules.is_request(text):
        return None
    if rules.information_units(text) < _MIN_EVENT_UNITS:
        return None
    window = find_window(text, now or datetime.now(UTC))
    if has_cjk(text):
        past = _ZH_PAST.search(text) or _ZH_PAST_DATE.search(text)
        # without a date, only a first-person clause: "赢了就特别开心" is a feeling, "我领养了一只小狗" an event
        if past and ((window and _ZH_SUBJECT.search(text)) or _ZH_FIRST_PERSON.search(text)):
            return f"an event ('{past.group(0)}')" + (f", dated '{window.phrase}'" if window else "")
        return None
    if found := _EN_SUBJECT_PAST.search(text):
        return f"an event ('{found.group(0).strip()}')" + (f", dated '{window.phrase}'" if window else "")
    if window and (found := _EN_ANY_PAST.search(text)):
        return f"an event ('{found.group(0)}'), dated '{window.phrase}'"
    return None


def is_past(text: str) -> bool:
    """Does the clause tell of the past? Only then is its "on Monday" a date gone by: "my meeting is on Monday"
    is ahead of us, whatever the calendar's reading of a bare weekday."""
    if has_cjk(text):
        return bool(_ZH_PAST.search(text) or _ZH_PAST_DATE.search(text))
    return bool(_EN_ANY_PAST.search(text) or re.search(r"\b(?:yesterday|ago|last)\b", text, re.IGNORECASE))


def dated(content: str, now: datetime | None = None) -> str:
    """``content`` with its relative time phrase replaced by the date it names, read against ``now``; a clause
    not in the past is left as it is (``is_past``)."""
    if not is_past(content):
        return content
    window = find_window(content, now or datetime.now(UTC))
    if window is None or re.search(r"(?:19|20)\d\d", window.phrase):
        return content
    start = content.find(window.phrase)
    if start < 0:  # found case-insensitively: look for it so
        match = re.search(re.escape(window.phrase), content, re.IGNORECASE)
        if match is None:
            return content
        start = match.start()
    chinese = has_cjk(content)
    date = _zh_date(window) if chinese else _en_date(window)
    if not chinese and start == 0:
        date = date[0].upper() + date[1:]
    return content[:start] + date + content[start + len(window.phrase):]


def _span_days(window: TimeWindow) -> float:
    return (window.end - window.start) / timedelta(days=1)


def _en_day(moment: datetime) -> str:
    return f"{moment.day} {moment:%B %Y}"


def _en_date(window: TimeWindow) -> str:
    days, start = _span_days(window), window.start
    if days <= 1.5:  # a day ("last night" runs to the next dawn)
        return f"on {_en_day(start)}"
    if days <= 3 and start.weekday() >= 5:
        return f"on the weekend of {_en_day(start)}"
    if days == 7 and start.weekday() == 0:
        return f"in the week of {_en_day(start)}"
    if start.day == 1 and 28 <= days <= 31:
        return f"in {start:%B %Y}"
    if start.day == 1 and start.month == 1 and days >= 365:
        return f"in {start.year}"
    last = window.end - timedelta(days=1)
    return f"between {_en_day(start)} and {_en_day(last)}"


def _zh_day(moment: datetime) -> str:
    return f"{moment.year}年{moment.month}月{moment.day}日"


def _zh_date(window: TimeWindow) -> str:
    days, start = _span_days(window), window.start
    if days <= 1.5:
        return _zh_day(start)
    if days <= 3 and start.weekday() >= 5:
        return f"{_zh_day(start)}那个周末"
    if days == 7 and start.weekday() == 0:
        return f"{_zh_day(start)}那一周"
    if start.day == 1 and 28 <= days <= 31:
        return f"{start.year}年{start.month}月"
    if start.day == 1 and start.month == 1 and days >= 365:
        return f"{start.year}年"
    return f"{_zh_day(start)}至{_zh_day(window.end - timedelta(days=1))}"

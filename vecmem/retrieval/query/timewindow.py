"""A span of time a question is about (``TimeWindow``), how close a memory's date is to it, and the calendar
arithmetic the date phrases of timeframe.py resolve with (``Calendar``).

Days, weeks and months are those of the clock's own time zone (the bank's clock: UTC unless the caller gives
another); weeks start on Monday, as ISO 8601 and the Chinese 周一 both have it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

__all__ = ["Calendar", "TimeWindow"]

_SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class TimeWindow:
    """[start, end): aware datetimes, end exclusive; ``phrase`` is the words of the query it was read from."""

    start: datetime
    end: datetime
    phrase: str

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("a time window needs aware datetimes")
        if self.end <= self.start:
            raise ValueError(f"a time window must end after it starts: {self.start} .. {self.end}")

    @property
    def scale_days(self) -> float:
        """How many days outside the window cost a factor e: the window's own length, and at least one day.

        A phrase is only as precise as the span it names: a memory from early January is barely outside "in
        2023", but a week is far outside "yesterday". Scaling by the length says exactly that, and the one-day
        floor absorbs what a day-sized window cannot know: a memory written just after midnight, in another
        time zone than the clock's, or about the evening before.
        """
        return max(1.0, (self.end - self.start).total_seconds() / _SECONDS_PER_DAY)

    def closeness(self, created: float) -> float:
        """1 for a time (epoch seconds) inside the window, exp(-days outside / scale_days) outside it."""
        start, end = self.start.timestamp(), self.end.timestamp()
        outside = start - created if created < start else created - end if created >= end else 0.0
        return math.exp(-outside / _SECONDS_PER_DAY / self.scale_days)


class Calendar:
    """Days, weeks, months and years as seen from one moment (``now``), as [start, end) pairs of aware datetimes."""

    def __init__(self, now: datetime) -> None:
        self.now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)  # a naive clock is read as UTC
        self.zone = self.now.tzinfo
        self.today = self.now.date()

    def at(self, day: date) -> datetime:
        """The day's first moment in the clock's zone."""
        return datetime.combine(day, time(), tzinfo=self.zone)

    def days(self, first: date, count: int = 1) -> tuple[datetime, datetime]:
        return self.at(first), self.at(first + timedelta(days=count))

    def days_ago(self, count: int) -> tuple[datetime, datetime]:
        return self.days(self.today - timedelta(days=count))

    def monday(self, weeks_back: int = 0) -> date:
        """The Monday of this week (0), of last week (1), ..."""
        return self.today - timedelta(days=self.today.weekday() + 7 * weeks_back)

    def week(self, weeks_back: int = 0) -> tuple[datetime, datetime]:
        return self.days(self.monday(weeks_back), 7)

    def weekday_of_week(self, weekday: int, weeks_back: int) -> tuple[datetime, datetime]:
        """That weekday (Monday 0) of this week (0) or an earlier one, whether or not it has come yet."""
        return self.days(self.monday(weeks_back) + timedelta(days=weekday))

    def last_weekday(self, weekday: int) -> tuple[datetime, datetime]:
        """The most recent such day before today (a week ago when today is one)."""
        back = (self.today.weekday() - weekday - 1) % 7 + 1
        return self.days(self.today - timedelta(days=back))

    def weekend(self, weeks_back: int) -> tuple[datetime, datetime]:
        """Saturday and Sunday of this week (0) or an earlier one."""
        return self.days(self.monday(weeks_back) + timedelta(days=5), 2)

    def recent_weekend(self) -> tuple[datetime, datetime]:
        """This weekend while it lasts, else the one just past."""
        return self.weekend(0 if self.today.weekday() >= 5 else 1)

    def month(self, year: int, month: int) -> tuple[datetime, datetime]:
        following = (year + 1, 1) if month == 12 else (year, month + 1)
        return self.at(date(year, month, 1)), self.at(date(*following, 1))

    def months_back(self, count: int) -> tuple[datetime, datetime]:
        """The calendar month ``count`` months before this one (0: this month)."""
        serial = self.today.year * 12 + self.today.month - 1 - count
        return self.month(serial // 12, serial % 12 + 1)

    def recent_month(self, month: int, *, this_one_too: bool) -> tuple[datetime, datetime]:
        """The latest month of that name that has begun: this one too when ``this_one_too``, else before it."""
        current = self.today.month
        year = self.today.year if month < current or (month == current and this_one_too) else self.today.year - 1
        return self.month(year, month)

    def year(self, year: int) -> tuple[datetime, datetime]:
        return self.at(date(year, 1, 1)), self.at(date(year + 1, 1, 1))

    def years_back(self, count: int) -> tuple[datetime, datetime]:
        return self.year(self.today.year - count)

    def recent_date(self, month: int, day: int) -> tuple[datetime, datetime] | None:
        """The latest such date up to today (last year's when it is still to come this year); None for a date no
        year has (30 February), and for 29 February the latest year that has it."""
        for year in range(self.today.year, self.today.year - 8, -1):
            found = self.date(year, month, day)
            if found is not None and found[0] <= self.at(self.today):
                return found
        return None

    def date(self, year: int, month: int, day: int) -> tuple[datetime, datetime] | None:
        """That day, or None where it does not exist."""
        try:
            return self.days(date(year, month, day))
        except ValueError:
            return None

    def back(self, count: int, unit: str) -> tuple[datetime, datetime]:
        """The calendar day, week, month or year ``count`` of them before this one ("3 days ago", "两周前")."""
        if unit == "day":
            return self.days_ago(count)
        if unit == "week":
            return self.week(count)
        if unit == "month":
            return self.months_back(count)
        return self.years_back(count)

    def rolling(self, count: int, unit: str) -> tuple[datetime, datetime]:
        """The last ``count`` days, weeks, months or years up to now ("in the past two weeks")."""
        if unit in ("day", "week"):
            return self.now - timedelta(days=count * (7 if unit == "week" else 1)), self.now
        months = count * (12 if unit == "year" else 1)
        serial = self.today.year * 12 + self.today.month - 1 - months
        year, month = serial // 12, serial % 12 + 1
        day = min(self.today.day, 28)  # every month has a 28th: "a month ago" from 31 March is 28 February
        return datetime.combine(date(year, month, day), self.now.timetz()), self.now

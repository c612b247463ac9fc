"""Relative dates in English and Chinese, resolved against the turn's local date.

``find_dates`` returns ``(start, end, value)`` for each relative phrase, ``value`` being the
absolute date in the forms ``memoryd.domain.normalise._normalise`` documents. Pure: stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta

__all__ = ["find_dates"]

_Resolver = Callable[["re.Match[str]", date], str | None]

_WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5,
             "sunday": 6}
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
               "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_EN_STEP = {"next": 1, "last": -1, "this": 0}
_ZH_STEP = {"下下": 2, "下": 1, "上上": -2, "上": -1, "这": 0, "本": 0}

_MONTHS = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
           r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?")
# An absolute date written right next to a phrase ("tomorrow (2026-12-01)", "明天12月1号",
# "next Friday, Dec 4"): the phrase is then left alone, which also makes the output a fixed
# point — our own annotation "(YYYY…" is one such date.
_ABSOLUTE = (
    r"[(（]\s*\d{4}"
    r"|[(（]?\s*(?:\d{4}\s*[-/.年]\s*\d{1,2}"
    r"|\d{1,2}\s*月\s*\d{1,2}\s*[日号]|\d{1,2}\s*[日号](?![线楼])"
    rf"|{_MONTHS}\s+\d{{1,2}}\b|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}"
    r"|the\s+\d{1,2}(?:st|nd|rd|th)\b|\d{1,2}/\d{1,2}\b)"
)
_ABSOLUTE_AFTER = re.compile(rf"[\s,，:：]*(?:(?:on|by)\s+)?(?:{_ABSOLUTE})", re.IGNORECASE)
_ABSOLUTE_BEFORE = re.compile(r"(?:\d{4}\s*[-/.年]\s*\d{1,2}(?:\s*[-/.月]\s*\d{1,2})?\s*[日号]?"
                              r"|\d{1,2}\s*月\s*\d{1,2}\s*[日号])[\s,，:：]*[(（]?\s*$")


def _add_months(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _monday(day: date, weeks: int = 0) -> date:
    """The Monday of ``day``'s ISO week, moved by ``weeks``."""
    return day - timedelta(days=day.weekday()) + timedelta(weeks=weeks)


def _day(day: date) -> str:
    return day.isoformat()


def _month(year: int, month: int) -> str:
    if not 1 <= year <= 9999:
        raise OverflowError(year)
    return f"{year:04d}-{month:02d}"


def _year(year: int) -> str:
    if not 1 <= year <= 9999:
        raise OverflowError(year)
    return f"{year:04d}"


def _range(first: date, last: date) -> str:
    return f"{first.isoformat()}..{last.isoformat()}"


def _week(today: date, step: int) -> str:
    monday = _monday(today, step)
    return _range(monday, monday + timedelta(days=6))


def _weekend(today: date, step: int) -> str:
    saturday = _monday(today, step) + timedelta(days=5)
    return _range(saturday, saturday + timedelta(days=1))


def _zh_number(text: str) -> int:
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS[text]


def _offset(today: date, count: int, unit: str) -> str:
    """``count`` units from today; the unit sets the precision (days and weeks give a day)."""
    if unit in ("day", "天"):
        return _day(today + timedelta(days=count))
    if unit in ("week", "周", "星期", "礼拜"):
        return _day(today + timedelta(weeks=count))
    if unit in ("month", "月"):
        return _month(*_add_months(today, count))
    return _year(today.year + count)


def _fixed(days: int) -> _Resolver:
    return lambda m, today: _day(today + timedelta(days=days))


def _en_period(m: re.Match[str], today: date) -> str:
    step, unit = _EN_STEP[m["step"].lower()], m["unit"].lower()
    if unit == "week":
        return _week(today, step)
    if unit == "month":
        return _month(*_add_months(today, step))
    return _year(today.year + step)


def _en_weekday(m: re.Match[str], today: date) -> str | None:
    """See the module docstring of ``_normalise`` for what each English form means."""
    weekday = _WEEKDAYS[m["weekday"].lower()]
    if m["week"]:  # "Friday next week": that ISO week's Friday
        return _day(_monday(today, _EN_STEP[m["week"].lower()]) + timedelta(days=weekday))
    if not m["rel"]:
        return None  # a bare weekday may be a habit ("Friday is gym day"): not a date
    rel, ahead = m["rel"].lower(), (weekday - today.weekday()) % 7
    if rel == "this":  # the coming one, today included
        return _day(today + timedelta(days=ahead))
    if rel == "last":  # the most recent one before today
        return _day(today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1))
    return _day(today + timedelta(days=ahead or 7))  # next/on/by: the first one after today


def _en_offset(m: re.Match[str], today: date) -> str | None:
    word = m["n"].lower()
    if not (word.isdigit() or word in _EN_NUMBERS):
        return None  # "in some days", "in many years": no number to count
    count = _EN_NUMBERS.get(word) or int(word)
    return _offset(today, -count if m.groupdict().get("ago") else count, m["unit"].lower())


def _zh_week(m: re.Match[str], today: date) -> str:
    step = _ZH_STEP[m["step"]]
    if m["weekend"]:
        return _weekend(today, step)
    if m["weekday"]:  # Chinese weeks are explicit: 下周五 is the Friday of next week
        return _day(_monday(today, step) + timedelta(days=_ZH_WEEKDAYS[m["weekday"]]))
    return _week(today, step)


def _zh_offset(m: re.Match[str], today: date) -> str:
    count = _zh_number(m["n"])
    return _offset(today, -count if m["dir"] == "前" else count, m["unit"])


_EN = re.IGNORECASE
_ZH_N = (r"(?<![\d第零一二两三四五六七八九十百千万])"
         r"(?P<n>\d{1,3}|[一二两三四五六七八九]?十[一二三四五六七八九]?|[一二两三四五六七八九])")
_WEEKDAY = "|".join(_WEEKDAYS)

# (pattern, flags, resolver). English phrases are whole words and may end in a possessive
# ("tomorrow's"); ASCII word edges, not \b, so "见next Friday后" counts without spaces.
_RULES: tuple[tuple[str, int, _Resolver], ...] = (
    (r"(?:the\s+)?day\s+after\s+tomorrow", _EN, _fixed(2)),
    (r"(?:the\s+)?day\s+before\s+yesterday", _EN, _fixed(-2)),
    (r"(?:today|tonight|this\s+(?:morning|afternoon|evening))", _EN, _fixed(0)),
    (r"tomorrow", _EN, _fixed(1)),
    (r"(?:yesterday|last\s+night)", _EN, _fixed(-1)),
    (r"(?P<step>next|last|this)\s+(?P<unit>week|month|year)", _EN, _en_period),
    (rf"(?:(?P<rel>next|last|this|on|by)\s+)?(?P<weekday>{_WEEKDAY})"
     r"(?:\s+(?P<week>next|last|this)\s+week)?", _EN, _en_weekday),
    (r"in\s+(?P<n>\d{1,3}|[a-z]+)\s+(?P<unit>day|week|month|year)s?"
     r"(?:\s+from\s+now)?", _EN, _en_offset),
    (r"(?P<n>\d{1,3}|[a-z]+)\s+(?P<unit>day|week|month|year)s?\s+(?:(?P<ago>ago)|from\s+now)",
     _EN, _en_offset),
    ("大后天", 0, _fixed(3)),
    ("后天(?!性)", 0, _fixed(2)),
    ("明天|明晚|明早", 0, _fixed(1)),
    ("今天|今晚|今早", 0, _fixed(0)),
    ("昨天|昨晚", 0, _fixed(-1)),
    ("前天", 0, _fixed(-2)),
    ("大前天", 0, _fixed(-3)),
    ("(?P<step>下下|下|上上|上|这|本)个?(?:(?P<weekend>周末)|(?:周|星期|礼拜)"
     "(?P<weekday>[一二三四五六日天])?)(?![期围边到全刊岁年])", 0, _zh_week),
    ("(?P<step>下下|下|上上|上|这|本)个?月份?(?![饼亮光球])",
     0, lambda m, today: _month(*_add_months(today, _ZH_STEP[m["step"]]))),
    ("(?P<y>明|去|今|前|后)年", 0,
     lambda m, today: _year(today.year + {"明": 1, "去": -1, "今": 0, "前": -2, "后": 2}[m["y"]])),
    (_ZH_N + r"\s*(?:个\s*)?(?P<unit>天|周|星期|礼拜|年)(?:以|之)?(?P<dir>后|前)", 0, _zh_offset),
    (_ZH_N + r"\s*个\s*(?P<unit>月)(?:以|之)?(?P<dir>后|前)", 0, _zh_offset),
)
_COMPILED = tuple(
    (re.compile(rf"(?<![A-Za-z0-9_]){p}(?:['’]s)?(?![A-Za-z0-9_])" if f else p, f), r)
    for p, f, r in _RULES
)


def find_dates(text: str, today: date) -> list[tuple[int, int, str]]:
    """Each relative date phrase of ``text`` as ``(start, end, absolute value)``, in order.

    Overlapping phrases keep the one that starts first, then the longest ("the day after
    tomorrow", not "tomorrow").
    """
    found: list[tuple[int, int, str]] = []
    for pattern, resolve in _COMPILED:
        for m in pattern.finditer(text):
            before = text[max(0, m.start() - 40):m.start()]
            if _ABSOLUTE_AFTER.match(text, m.end()) or _ABSOLUTE_BEFORE.search(before):
                continue
            try:
                value = resolve(m, today)
            except (OverflowError, ValueError):  # past year 9999: leave the phrase as written
                continue
            if value is not None:
                found.append((m.start(), m.end(), value))
    found.sort(key=lambda f: (f[0], f[0] - f[1]))
    kept: list[tuple[int, int, str]] = []
    for span in found:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept

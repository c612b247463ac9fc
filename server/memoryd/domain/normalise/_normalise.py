"""Normalisation: the deterministic step after the LLM has extracted a memory's text.

``normalise(text, at=..., entities=...)`` rewrites what would rot or scatter, keeping every
original fragment so nothing the user said is lost:

Relative dates become absolute against ``at``, the turn's time as an aware datetime in the
subject's time zone (its local date decides, so the same instant can be "tomorrow" on two
dates in two zones). The absolute value follows the phrase in parentheses — after a space,
none after a CJK character — in ISO 8601:

    day    YYYY-MM-DD               "tomorrow (2026-12-01)", "三天后(2026-12-03)"
    month  YYYY-MM                  "下个月(2026-12)", "in 3 months (2027-02)"
    week   YYYY-MM-DD..YYYY-MM-DD   Monday to Sunday of the ISO week, "下周(2026-12-07..2026-12-13)"
    year   YYYY                     "last year (2025)"

A weekend is its Saturday..Sunday. "in N units" / "N units ago" / N天后 / N个月前 take the unit's
precision: days and weeks give a day, months a month, years a year — "in one month" on
2026-01-31 is 2026-02, never a made-up 2026-02-31.

English weekdays, ``today`` being the turn's date:
    next Friday, on Friday, by Friday   the first Friday after today (a week on, on a Friday)
    this Friday                         the coming Friday, today included
    last Friday                         the most recent Friday before today
    Friday next/this/last week          that ISO week's Friday
A bare weekday ("Friday is gym day") is not a date. Chinese is explicit about weeks:
下周五 / 这周五 / 上周五 are the Friday of the next / this / last ISO week.

A phrase already next to an absolute date ("tomorrow (2026-12-01)", "明天12月1号", "next
Friday, Dec 4") is left alone, which makes ``normalise`` idempotent. ``dated`` writes out the
relative dates alone, nothing else: the extraction model reads turns so, and a memory it
writes with the value kept ("(2026-12-04)") still gets its ``date:`` tag.

Data sizes are read as binary, as people mean them for memory and disks in conversation:
K/M/G/T/P with B, iB or spelled out, and a capital G or T alone ("1 G", "1T"), all count 1024.
A bare K or M is not a size (it means thousand, million), nor are 2G..6G written without a
space (mobile networks), rates ("MB/s", "Gbps") or grams ("500g"). Each size becomes the
largest of B, KiB, MiB, GiB, TiB, PiB giving a number of at least 1, with at most 2 decimals,
its original after it: "1 G", "1024MB" and "1GiB" all become "1 GiB (…)". Durations in s, min,
h (English or 秒/分钟/小时) take the same rule, but only change when the unit does:
"90 min" → "1.5 h (90 min)", "30 minutes" stays.

Tags: ``date:<value>`` for each absolute date produced or already written in the form above
(in parentheses), ``entity:<slug>`` for each entity hint;
each 1 to 64 bytes, at most 32 (dates first in order of appearance, then entities in the order
given), returned sorted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .._contract import CONTRACT
from ._normalise_dates import find_dates
from ._normalise_units import find_quantities

__all__ = ["Normalised", "dated", "different_dates", "entity_tag", "normalise",
           "wide_character"]

_SLUG_PUNCTUATION = frozenset("._:@-")
# A value in the form normalise writes, already in a text: "(2026-12-04)", "（2026-12）".
_WRITTEN_DATE = re.compile(r"[(（]((?:19|20|21)\d{2}(?:-\d{2}(?:-\d{2}(?:\.\.\d{4}-\d{2}-\d{2})?)?)?)[)）]")


@dataclass(frozen=True)
class Normalised:
    text: str  # the text with relative dates made absolute and units canonical
    tags: tuple[str, ...]  # tags derived from the text and the entity hints, sorted, unique
    changes: tuple[tuple[str, str], ...]  # (original fragment, replacement), in order of appearance


def wide_character(char: str) -> bool:
    """CJK ideographs, kana and hangul: kept as they are in tags and written without spaces."""
    code = ord(char)
    return (0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF
            or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or 0x20000 <= code <= 0x2FA1F)


def entity_tag(name: str) -> str | None:
    """``entity:<slug>`` for an entity hint, or None when nothing of the name is left.

    Lowercased, accents dropped (Zoë → zoe), whitespace runs → "-", then only a-z 0-9 . _ : @ -
    and CJK kept, cut at a character boundary to fit 64 bytes.
    """
    chars: list[str] = []
    for char in name.strip().lower():
        if wide_character(char):
            chars.append(char)
        elif char.isspace():
            chars.append("-")
        else:  # NFKD splits "ë" into "e" and a combining mark, and full-width "Ａ" into "a"
            chars.extend(c for c in unicodedata.normalize("NFKD", char).lower()
                         if c.isascii() and (c.isalnum() or c in _SLUG_PUNCTUATION))
    slug = "-".join(part for part in "".join(chars).split("-") if part)
    tag = "entity:"
    for char in slug:
        if len((tag + char).encode()) > CONTRACT.tag_bytes:
            break
        tag += char
    tag = tag.rstrip("-")
    return tag if tag != "entity:" else None


def _date_edits(text: str, at: datetime) -> list[tuple[int, int, str, str | None]]:
    """(start, end, replacement, tag) for each relative date phrase of ``text``."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("at must be an aware datetime in the subject's time zone")
    edits: list[tuple[int, int, str, str | None]] = []
    for start, end, value in find_dates(text, at.date()):
        phrase = text[start:end]
        gap = "" if wide_character(phrase[-1]) else " "
        edits.append((start, end, f"{phrase}{gap}({value})", f"date:{value}"))
    return edits


def different_dates(a: str, b: str) -> bool:
    """Whether two normalised texts are dated (values in the form above) and share no date:
    then they tell of different occasions, however alike their words ("后天去上海参加婚礼",
    "下周末去看婚礼场地")."""
    first = {m.group(1) for m in _WRITTEN_DATE.finditer(a)}
    second = {m.group(1) for m in _WRITTEN_DATE.finditer(b)}
    return bool(first) and bool(second) and not first & second


def dated(text: str, *, at: datetime) -> str:
    """``text`` with each relative date written out as ``normalise`` writes it, and nothing
    else changed. ``at`` as for ``normalise``."""
    parts: list[str] = []
    cursor = 0
    for start, end, replacement, _ in _date_edits(text, at):
        parts.append(text[cursor:start])
        parts.append(replacement)
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts)


def normalise(text: str, *, at: datetime, entities: Sequence[str] = ()) -> Normalised:
    """``at`` is the turn's time as an aware datetime in the subject's time zone."""
    edits = _date_edits(text, at)
    for start, end, canonical in find_quantities(text):
        edits.append((start, end, f"{canonical} ({text[start:end]})", None))
    edits.sort()

    parts: list[str] = []
    changes: list[tuple[str, str]] = []
    dates = [(m.start(), f"date:{m.group(1)}") for m in _WRITTEN_DATE.finditer(text)]  # (where, tag)
    cursor = 0
    for start, end, replacement, tag in edits:
        if start < cursor:  # a date phrase and a quantity never share text; keep the first
            continue
        parts.append(text[cursor:start])
        parts.append(replacement)
        changes.append((text[start:end], replacement))
        if tag is not None:
            dates.append((start, tag))
        cursor = end
    parts.append(text[cursor:])

    candidates = [tag for _, tag in sorted(dates)]
    candidates.extend(tag for tag in map(entity_tag, entities) if tag is not None)
    tags = tuple(sorted(tuple(dict.fromkeys(candidates))[:CONTRACT.tags]))
    return Normalised(text="".join(parts), tags=tags, changes=tuple(changes))

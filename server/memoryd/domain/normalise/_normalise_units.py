"""Data sizes and durations in one canonical form each.

``find_quantities`` returns ``(start, end, canonical)`` for each quantity whose written form is
not already canonical; the rules are in ``memoryd.domain.normalise._normalise``'s docstring. Pure: stdlib.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

__all__ = ["find_quantities"]

_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SIZE_POWERS = {"k": 1, "kilo": 1, "kibi": 1, "m": 2, "mega": 2, "mebi": 2, "g": 3, "giga": 3,
                "gibi": 3, "t": 4, "tera": 4, "tebi": 4, "p": 5, "peta": 5, "pebi": 5}
_DURATION_UNITS = (("h", 3600), ("min", 60), ("s", 1))
_DURATION_SECONDS = {"hour": 3600, "hr": 3600, "h": 3600, "小时": 3600, "minute": 60, "min": 60,
                     "分钟": 60, "second": 1, "sec": 1, "s": 1, "秒": 1}

# Not after a letter, digit or currency sign ("$5G" is money, "A4G" a model name) and not
# before a letter, digit or "/" ("GB/s" is a rate, "Gbps" a line speed). Python's \w would
# count CJK as word characters, and "16G内存" is exactly the kind of text to normalise.
_BEFORE = r"(?<![A-Za-z0-9_$€£¥])(?<![0-9][.,])"
_AFTER = r"(?![A-Za-z0-9_]|\s*/)"
_NUMBER = r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_SIZE = re.compile(
    _BEFORE + _NUMBER + r"(?P<space>\s?)(?:(?i:(?P<prefix>[kmgtp])i?b"
    r"|(?P<word>kilo|mega|giga|tera|peta|kibi|mebi|gibi|tebi|pebi)bytes?)"
    # A bare G or T only in capitals: "500g" is grams. Bare K and M mean thousand and million
    # far more often than KiB and MiB ("10K users", "5M rows"), so they are not sizes here.
    r"|(?P<bare>[GT]))" + _AFTER
)
_DURATION = re.compile(
    _BEFORE + _NUMBER + r"(?:\s?(?i:(?P<en>hours?|hrs?|h|minutes?|mins?|seconds?|secs?))"
    # A lone "s" only as written in the canonical form, "30 s": "the 1990s" is a decade.
    r"|\s?个?(?P<zh>小时|分钟|秒)钟?| s)" + _AFTER
)
_SIZES = tuple((unit, 1024**power) for power, unit in reversed(list(enumerate(_SIZE_UNITS))))
# "1 GiB (1024MB)": a canonical quantity followed by its original in parentheses.
_ANNOTATION_OPEN = re.compile(r"\s?\(")


def _format(value: Decimal, unit: str) -> str:
    number = value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP).normalize()
    return f"{number:f} {unit}"


def _largest(amount: Decimal, units: tuple[tuple[str, int], ...], fallback: str) -> str:
    """``amount`` (in the smallest unit) in the largest unit giving a number of at least 1."""
    for unit, size in units:
        if amount >= size:
            return _format(amount / size, unit)
    return _format(amount / dict(units)[fallback], fallback)


def _size(m: re.Match[str]) -> str | None:
    if m["bare"] == "G" and not m["space"] and m["num"] in ("2", "3", "4", "5", "6"):
        return None  # "4G", "5G": mobile networks
    key = (m["prefix"] or m["word"] or m["bare"]).lower()
    power = _SIZE_POWERS[key]
    written = Decimal(m["num"].replace(",", ""))
    return _largest(written * 1024**power, _SIZES, _SIZE_UNITS[power])


def _duration(m: re.Match[str]) -> tuple[str, str] | None:
    """(canonical, written unit's canonical name)."""
    name = m["zh"] or (m["en"] or "s").lower()
    seconds = next(s for n, s in _DURATION_SECONDS.items() if name == n or name.rstrip("s") == n)
    written_unit = next(u for u, s in _DURATION_UNITS if s == seconds)
    amount = Decimal(m["num"].replace(",", "")) * seconds
    return _largest(amount, _DURATION_UNITS, written_unit), written_unit


def find_quantities(text: str) -> list[tuple[int, int, str]]:
    """Each data size or duration of ``text`` not already canonical, as (start, end, canonical).

    Sizes always take the canonical form ("1GB" → "1 GiB"), so one search finds them all.
    Durations change only when the unit does ("90 min" → "1.5 h"): "30 minutes" and "30 min"
    read the same, and rewriting every duration would clutter memories for nothing.
    """
    found: list[tuple[int, int, str, bool]] = []  # (start, end, canonical, rewrite)
    for m in _SIZE.finditer(text):
        canonical = _size(m)
        if canonical is not None:
            found.append((m.start(), m.end(), canonical, canonical != m[0]))
    for m in _DURATION.finditer(text):
        canonical, written_unit = _duration(m) or ("", "")
        if canonical:
            found.append((m.start(), m.end(), canonical, canonical.split()[1] != written_unit))
    found.sort()
    kept: list[tuple[int, int, str]] = []
    previous: tuple[int, int, str, bool] | None = None
    for start, end, canonical, rewrite in found:
        if previous and start < previous[1]:
            continue
        annotates = (previous is not None and not previous[3]
                     and _ANNOTATION_OPEN.fullmatch(text, previous[1], start) is not None
                     and text[end:end + 1] == ")"
                     and text[previous[0]:previous[1]] == canonical)
        if rewrite and not annotates:
            kept.append((start, end, canonical))
        previous = (start, end, canonical, rewrite)
    return kept

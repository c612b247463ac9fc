"""Identity and financial numbers in text, found by memoryd itself: a pure module, no I/O.

An extraction model's own "sensitive" flag is not to be trusted with these (a small model
labelled a passport number and a Chinese resident ID as not sensitive, issue 16), so every
extracted item is checked here. Each detector is a pattern and, where the number carries
one, its check digit — so a date, an order number or a price is not taken for an ID:

- ``resident_id``: a Chinese resident identity number, 18 characters, a real birth date and
  the ISO 7064 MOD 11-2 check character;
- ``bank_card``: 13 to 19 digits (spaces or dashes between groups) passing the Luhn check;
- ``iban``: a country code, 2 check digits and 11 to 30 letters or digits, mod 97 = 1;
- ``passport``: a number next to the word passport / 护照 (1–2 letters and 6–8 digits, or 9
  digits), or a Chinese passport number on its own (E or G and 8 digits, E and a letter and
  7 digits);
- ``ssn``: a US social security number written 123-45-6789, with a possible area, group
  and serial;
- ``phone``: a Chinese mobile number (1[3-9] and 9 more digits, +86 allowed), a Chinese
  landline with its area code set apart (010-12345678, (0755) 1234567), a North American
  number written (415) 555-0132 or 415-555-0132 (area and exchange codes from 2, one
  separator throughout), or an international one written with its + and country code (8
  to 15 digits) — a date (2026-12-05), a time, a price or a bare run of digits is none;
- ``email``: an e-mail address.

Findings never overlap: where two would, the first detector in the list above wins.

A detector that needs context misses a number moved out of it: a model listed the passport
number of "我的护照号是 K47291853" as the entity "K47291853", which became the tag
``entity:k47291853`` (issue 38). So an extraction job screens with a ``PiiScreen`` made of
its turns: it also finds every number the turns held, wherever it turns up again — in any
case, with spaces, dashes, dots or hidden characters between its characters, in full-width
forms, a phone number also without its country code. One screen serves every field an item
carries (``_extraction_filters.without_pii``) and every free text a job stores or logs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

from .._config import PII_MODES

__all__ = ["KINDS", "MODES", "PII", "PLAIN", "Finding", "PiiScreen", "find_pii", "redact", "screened"]

MODES = PII_MODES  # the tenant policy's ``pii``
PII = "pii"  # the reason an item or a chunk left out for a number is counted under


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _resident_id(match: re.Match[str]) -> bool:
    value = match.group().upper()
    try:
        date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    if not 1900 <= int(value[6:10]) <= 2100:
        return False
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    total = sum(int(d) * w for d, w in zip(value[:17], weights, strict=True))
    return "10X98765432"[total % 11] == value[17]


def _luhn(match: re.Match[str]) -> bool:
    digits = _digits(match.group())
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def _iban(match: re.Match[str]) -> bool:
    value = match.group().replace(" ", "").upper()
    if not 15 <= len(value) <= 34:
        return False
    moved = value[4:] + value[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _ssn(match: re.Match[str]) -> bool:
    area, group, serial = match.group(1), match.group(2), match.group(3)
    return area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"


def _international(match: re.Match[str]) -> bool:
    return 8 <= len(_digits(match.group())) <= 15


def _always(match: re.Match[str]) -> bool:
    return True


_WORD_EDGE = r"(?<![A-Za-z0-9])"
_WORD_END = r"(?![A-Za-z0-9])"
# A phone number set apart from what is around it: not within a word, a longer number, a
# decimal or a dashed code (Chinese characters may touch it: "电话010-12345678").
_NUMBER_EDGE = r"(?<![A-Za-z0-9_.+-])"
_NUMBER_END = r"(?![A-Za-z0-9_-]|\.\d)"
# (kind, pattern, check, group of the match that is the number): in precedence order.
_DETECTORS: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool], int]] = [
    ("resident_id", re.compile(r"(?<!\d)\d{17}[\dXx](?![\dA-Za-z])"), _resident_id, 0),
    ("bank_card", re.compile(r"(?<![\d+-])\d(?:[ -]?\d){12,18}(?![\d-])"), _luhn, 0),
    ("iban", re.compile(_WORD_EDGE + r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}" + _WORD_END), _iban, 0),
    ("passport", re.compile(r"(?:passport|护照)[^\n\d]{0,24}?" + _WORD_EDGE + r"([A-Z]{1,2}\d{6,8}|\d{9})" + _WORD_END,
                            re.IGNORECASE), _always, 1),
    ("passport", re.compile(_WORD_EDGE + r"(?:[EG]\d{8}|E[A-Z]\d{7})" + _WORD_END), _always, 0),
    ("ssn", re.compile(r"(?<![\d-])(\d{3})-(\d{2})-(\d{4})(?![\d-])"), _ssn, 0),
    ("phone", re.compile(r"(?<![\d+])(?:\+?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}(?!\d)"), _always, 0),
    ("phone", re.compile(r"(?<![\d+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?!\d)"), _international, 0),
    # CN landline: 010, 02x, or 0 and 3 digits from 3, set apart; then 7 or 8 digits, not from 0.
    ("phone", re.compile(_NUMBER_EDGE + r"(?:0(?:10|2\d|[3-9]\d{2})[- ]|\(0(?:10|2\d|[3-9]\d{2})\) ?)[1-9]\d{6,7}"
                         + _NUMBER_END), _always, 0),
    # North American: (415) 555-0132, 415-555-0132, 415.555.0132 — one separator throughout.
    ("phone", re.compile(_NUMBER_EDGE + r"(?:\([2-9]\d{2}\) ?[2-9]\d{2}-|[2-9]\d{2}([-.])[2-9]\d{2}\1)\d{4}"
                         + _NUMBER_END), _always, 0),
    ("email", re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])"),
     _always, 0),
]
KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _, _, _ in _DETECTORS))

_LABELS = {"resident_id": "resident ID number", "bank_card": "bank card number", "iban": "IBAN",
           "passport": "passport number", "ssn": "social security number", "phone": "phone number",
           "email": "email address"}


def find_pii(text: str) -> list[Finding]:
    """The identity and financial numbers in ``text``, in order, never overlapping."""
    found: list[Finding] = []
    for kind, pattern, check, group in _DETECTORS:
        for match in pattern.finditer(text):
            start, end = match.span(group)
            if check(match) and not any(f.start < end and start < f.end for f in found):
                found.append(Finding(kind, start, end))
    return sorted(found, key=lambda f: f.start)


def redact(text: str, findings: list[Finding]) -> str:
    """``text`` with each finding replaced by what it was: "[passport number]"."""
    out, at = [], 0
    for f in sorted(findings, key=lambda f: f.start):
        out.append(text[at:f.start])
        out.append(f"[{_LABELS[f.kind]}]")
        at = f.end
    out.append(text[at:])
    return "".join(out)


_PLACEHOLDER = re.compile(r"\[(?:" + "|".join(re.escape(label) for label in _LABELS.values()) + r")\]")
_LETTER = re.compile(r"[^\W\d_]")
# What may stand between the characters of a number said again: spacing, dashes, dots,
# slashes, brackets, the @ and + of an address or a number, a slug's underscores, hidden
# characters (zero-width, soft hyphen). At most 3 in a row: a number, not a paragraph.
_BETWEEN = r"[\s\-\u2010-\u2015.\u00b7/\\()+@_\u200b-\u200f\u2060-\u2064\ufeff\u00ad]{0,3}"
_SHORTEST = 7  # characters (letters and digits) of a number worth finding again on its own


def _fold(text: str) -> str:
    """``text`` with each character as NFKC has it where that is one character (full-width
    "Ｋ４７" → "K47"), so positions in it are positions in ``text``."""
    if text.isascii():
        return text
    return "".join(f if len(f := unicodedata.normalize("NFKC", c)) == 1 else c for c in text)


def _cores(kind: str, value: str) -> list[str]:
    """The letters and digits of a number found in the turns, as it may be written again: a
    phone number with its + also without the country code (1 to 3 digits) or with a 0."""
    core = "".join(c for c in value if c.isalnum())
    cores = [core]
    if kind == "phone" and value.startswith("+"):
        cores += [core[n:] for n in (1, 2, 3)]
    return [c for c in cores if len(c) >= _SHORTEST]


def _merged(found: list[Finding]) -> list[Finding]:
    """The findings with overlapping ones joined (the first kind named), in order."""
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if out and f.start < out[-1].end:
            if f.end > out[-1].end:
                out[-1] = Finding(out[-1].kind, out[-1].start, f.end)
        else:
            out.append(f)
    return out


class PiiScreen:
    """The one screen of identity and financial numbers: ``find_pii``, and the numbers found
    in ``said`` (a job's turns) wherever they turn up again, however written (see the module
    docstring). ``PLAIN`` knows no turns. It holds the numbers themselves, so it lives no
    longer than its job, and its repr names none of them."""

    __slots__ = ("_known",)

    def __init__(self, said: Iterable[str] = ()) -> None:
        known: dict[str, str] = {}
        for text in said:
            folded = _fold(text)
            for f in find_pii(folded):
                for core in _cores(f.kind, folded[f.start:f.end]):
                    known.setdefault(core.casefold(), f.kind)
        # Longest first: where one number holds another, the whole of it is found.
        self._known = [(kind, re.compile(_WORD_EDGE + ("0?" if kind == "phone" else "")
                                         + _BETWEEN.join(re.escape(c) for c in core) + _WORD_END, re.IGNORECASE))
                       for core, kind in sorted(known.items(), key=lambda pair: -len(pair[0]))]

    def __repr__(self) -> str:
        return f"PiiScreen({len(self._known)} numbers said)"

    def findings(self, text: str) -> list[Finding]:
        """The numbers in ``text``, in order, never overlapping."""
        folded = _fold(text)
        found = find_pii(folded)
        found += [Finding(kind, m.start(), m.end()) for kind, pattern in self._known for m in pattern.finditer(folded)]
        return _merged(found)

    def holds(self, text: str) -> bool:
        return bool(self.findings(text))

    def redacted(self, text: str) -> str:
        """``text`` with its numbers redacted, whatever the policy: for what memoryd keeps or
        logs about a job (its error), never a memory."""
        return redact(text, self.findings(text))

    def screened(self, text: str, mode: str) -> str | None:
        """``text`` as the tenant policy's ``pii`` mode has it: as it is when it holds no
        number or the mode is "keep"; None to leave it out ("drop", or "redact" with nothing
        but the numbers and punctuation left); else with its numbers redacted."""
        if mode == "keep":
            return text
        findings = self.findings(text)
        if not findings:
            return text
        if mode != "redact":
            return None
        clean = redact(text, findings)
        return clean if _LETTER.search(_PLACEHOLDER.sub("", clean)) else None

    def kept(self, names: Iterable[str], mode: str) -> tuple[str, ...]:
        """The names (tags, entities) holding no number, unless the mode is "keep": a name is
        left out, never redacted — "[passport number]" names nothing."""
        return tuple(name for name in names if mode == "keep" or not self.holds(name))

    def data(self, value: Any, mode: str) -> Any:
        """A JSON value with every string in it screened (``screened``): an entry or element
        whose string is left out goes, and so does an entry whose name holds a number."""
        if isinstance(value, str):
            return self.screened(value, mode)
        if isinstance(value, dict):
            entries = [(name, v, self.data(v, mode)) for name, v in value.items()
                       if mode == "keep" or not self.holds(str(name))]
            return {name: new for name, old, new in entries if new is not None or old is None}
        if isinstance(value, list):
            return [new for old, new in ((v, self.data(v, mode)) for v in value) if new is not None or old is None]
        return value


PLAIN = PiiScreen()


def screened(text: str, mode: str) -> str | None:
    """``PLAIN.screened``: for text with no turns to know numbers from (a chunk is a turn)."""
    return PLAIN.screened(text, mode)

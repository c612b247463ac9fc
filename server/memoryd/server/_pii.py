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
- ``phone``: a Chinese mobile number (1[3-9] and 9 more digits, +86 allowed), or an
  international one written with its + and country code (8 to 15 digits);
- ``email``: an e-mail address.

Findings never overlap: where two would, the first detector in the list above wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

__all__ = ["KINDS", "MODES", "PII", "Finding", "find_pii", "redact", "screened"]

MODES = ("drop", "redact", "keep")  # the tenant policy's ``pii``
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


def screened(text: str, mode: str) -> str | None:
    """``text`` as the tenant policy's ``pii`` mode has it: as it is when it holds no number
    or the mode is "keep"; None to leave it out ("drop", or "redact" with nothing but the
    numbers and punctuation left); else with its numbers redacted."""
    if mode == "keep":
        return text
    findings = find_pii(text)
    if not findings:
        return text
    if mode != "redact":
        return None
    clean = redact(text, findings)
    return clean if _LETTER.search(_PLACEHOLDER.sub("", clean)) else None

"""The entities a free-text query may name, as the ``entity:`` tags that would label them.

A memory is tagged ``entity:<slug>`` for a person, place or thing it is about (normalisation
writes them from entity hints; a writer may set them). A query names an entity when a run of
its words gives that slug: "What do Melanie's kids like?" may name ``entity:melanie``,
"Where did Ana Lima move?" ``entity:ana``, ``entity:lima`` and ``entity:ana-lima``. Which of
those exist is for the store to say; this module only proposes them, each with the spans of the
query that name it, and takes the named ones out of the query for its embedding.

Words are runs of letters and digits; a CJK ideograph, kana or hangul is a word of its own, so
"张伟喜欢什么" may name ``entity:张伟``. A name is at most ``MAX_LATIN_WORDS`` words, or
``MAX_WIDE_CHARACTERS`` characters of CJK; at most ``MAX_NAMES`` names are proposed, shortest
first (the rest are not looked up).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .normalise import entity_tag, wide_character

__all__ = ["MAX_NAMES", "named_spans", "without_names"]

MAX_LATIN_WORDS = 3
MAX_WIDE_CHARACTERS = 6
MAX_NAMES = 256

_RUN = re.compile(r"[^\W_]+")  # letters and digits; split into words by ``_words``
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)
_LETTER = re.compile(r"[^\W_]")


def named_spans(query: str) -> dict[str, list[tuple[int, int]]]:
    """Each ``entity:`` tag a run of the query's words would give → the (start, end) spans of
    ``query`` that give it, in order. Runs of Latin words and runs of CJK characters are
    proposed separately (a name does not mix them)."""
    words = list(_words(query))
    out: dict[str, list[tuple[int, int]]] = {}
    longest = max(MAX_LATIN_WORDS, MAX_WIDE_CHARACTERS)
    for length in range(1, longest + 1):  # shortest first: single words are the likeliest names
        for i in range(len(words) - length + 1):
            run = words[i:i + length]
            wide = run[0][2]
            if any(w[2] != wide for w in run) or length > (MAX_WIDE_CHARACTERS if wide else MAX_LATIN_WORDS):
                continue
            if wide and any(b[0] != a[1] for a, b in zip(run, run[1:])):
                continue  # CJK characters of one name are written together
            tag = entity_tag(query[run[0][0]:run[-1][1]])
            if tag is None:
                continue
            if tag not in out and len(out) == MAX_NAMES:
                return out
            out.setdefault(tag, []).append((run[0][0], run[-1][1]))
    return out


def without_names(query: str, spans: Iterable[tuple[int, int]]) -> str:
    """``query`` with ``spans`` taken out (with a possessive "'s" right after one), or the
    query itself when nothing with a letter or digit would be left."""
    cut = sorted(spans)
    if not cut:
        return query
    parts, at = [], 0
    for start, end in cut:
        if end <= at:
            continue  # inside a span already taken out
        parts.append(query[at:max(start, at)])
        possessive = _POSSESSIVE.match(query, end)
        at = possessive.end() if possessive else end
    parts.append(query[at:])
    rest = " ".join(" ".join(parts).split())
    return rest if _LETTER.search(rest) else query


def _words(query: str) -> Iterator[tuple[int, int, bool]]:
    """(start, end, wide) of each word: a run of letters and digits, where each CJK
    character (``_normalise.wide_character``, as ``entity_tag`` counts them) is a word of its own."""
    for run in _RUN.finditer(query):
        if run.group().isascii():  # most words: no CJK to split out
            yield run.start(), run.end(), False
            continue
        start = run.start()
        for at in range(run.start(), run.end()):
            if wide_character(query[at]):
                if start < at:
                    yield start, at, False
                yield at, at + 1, True
                start = at + 1
        if start < run.end():
            yield start, run.end(), False

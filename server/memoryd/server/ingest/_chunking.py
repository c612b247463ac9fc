"""TURN_MODE_CHUNK: turns become episodic memories of about 100–300 characters. Pure, no I/O.

Turns are split where the speaker changes; a speaker's consecutive turns are packed together,
and long ones are cut at sentence ends, then at clause marks, then between words — never
inside a word or a sentence when that can be avoided. Lengths count characters, so Chinese
text (about three bytes a character in UTF-8) gets chunks of the same reading size; a CJK
character is a word of its own. Each chunk's text starts with "<speaker>: " (counted in the
length), its time is its first turn's, and it names every turn it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from memoryd.domain import CONTRACT, Category, Draft, SourceKind, Turn

MIN_CHARS = 100
MAX_CHARS = 300
MAX_TURNS_PER_CHUNK = CONTRACT.tags  # the turn ids are the chunk's tags

_CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
# A sentence ends after . ! ? … (then a space) or after a CJK full stop, ! ? or ； (no space needed).
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？；])\s*|\n+")
_CLAUSE = re.compile(r"(?<=[,;:，、：;])\s*")
_WORD = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_IS_CJK = re.compile(rf"[{_CJK}]")


@dataclass(frozen=True)
class Chunk:
    speaker: str
    text: str  # "<speaker>: <body>"
    turn_ids: tuple[str, ...]
    time: datetime


@dataclass(frozen=True)
class _Piece:
    text: str
    turn: Turn


def _join(left: str, right: str) -> str:
    if not left:
        return right
    cjk = _IS_CJK.match(left[-1]) and _IS_CJK.match(right[0])
    return left + ("" if cjk else " ") + right


def _cut_words(text: str, limit: int) -> list[str]:
    """Pack words into pieces of at most ``limit`` characters; only a word longer than the
    limit on its own (a URL) is cut inside."""
    pieces: list[str] = []
    current = ""
    for word in _WORD.findall(text):
        while len(word) > limit:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(word[:limit])
            word = word[limit:]
        joined = _join(current, word)
        if len(joined) > limit:
            pieces.append(current)
            current = word
        else:
            current = joined
    if current:
        pieces.append(current)
    return pieces


def _split(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at the strongest boundary that works."""
    pieces: list[str] = []
    for sentence in (s.strip() for s in _SENTENCE.split(text)):
        if not sentence:
            continue
        if len(sentence) <= limit:
            pieces.append(sentence)
            continue
        for clause in (c.strip() for c in _CLAUSE.split(sentence)):
            if clause:
                pieces.extend([clause] if len(clause) <= limit else _cut_words(clause, limit))
    return pieces


def _body(pieces: list[_Piece]) -> str:
    body = ""
    for piece in pieces:
        body = _join(body, piece.text)
    return body


def _pack(pieces: list[_Piece], low: int, high: int) -> list[list[_Piece]]:
    """Greedy packing up to ``high``; then a too-short last chunk takes pieces from the one before."""
    chunks: list[list[_Piece]] = []
    current: list[_Piece] = []
    for piece in pieces:
        turns = {p.turn.turn_id for p in current} | {piece.turn.turn_id}
        if current and (len(_body([*current, piece])) > high or len(turns) > MAX_TURNS_PER_CHUNK):
            chunks.append(current)
            current = []
        current.append(piece)
    if current:
        chunks.append(current)
    while len(chunks) >= 2 and len(_body(chunks[-1])) < low:
        before, last = chunks[-2], chunks[-1]
        if len(before) < 2:
            break
        moved = [before[-1], *last]
        if (len(_body(moved)) > high or len(_body(before[:-1])) < low
                or len({p.turn.turn_id for p in moved}) > MAX_TURNS_PER_CHUNK):
            break
        chunks[-2], chunks[-1] = before[:-1], moved
    return chunks


def chunk_turns(turns: list[Turn] | tuple[Turn, ...], *, low: int = MIN_CHARS, high: int = MAX_CHARS) -> list[Chunk]:
    """The chunks of ``turns``, in order."""
    chunks: list[Chunk] = []
    start = 0
    while start < len(turns):
        end = start
        while end < len(turns) and turns[end].speaker == turns[start].speaker:
            end += 1
        speaker = turns[start].speaker
        prefix = f"{speaker}: "
        room = max(high - len(prefix), 20)  # a very long speaker name still leaves room for words
        pieces = [_Piece(text, turn) for turn in turns[start:end] for text in _split(turn.text, room)]
        for group in _pack(pieces, max(low - len(prefix), 0), room):
            turn_ids = tuple(dict.fromkeys(p.turn.turn_id for p in group))
            chunks.append(Chunk(speaker, prefix + _body(group), turn_ids, group[0].turn.time))
        start = end
    return chunks


def chunk_drafts(turns: list[Turn] | tuple[Turn, ...]) -> list[Draft]:
    """The chunks as episodic memories (events) to write: dated by their first turn, tagged
    with their turn ids, and traced to every turn in them (so Erase by any of them finds them)."""
    return [Draft(category=Category.EVENT, text=c.text, tags=c.turn_ids, valid_from=c.time,
                  source_kind=SourceKind.INPUT, source_turn_ids=c.turn_ids) for c in chunk_turns(turns)]

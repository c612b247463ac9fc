"""One sentence stored once per extraction job: a pure module, no I/O.

A small model repeats itself: one job stored "Alice lives in Lyon" three times under three keys,
one of them ``timezone`` (issue 38). Items of a job whose texts say the same thing are written
once; the others are counted as dropped (``duplicate``). "The same thing" is the same words in
the same order once compatibility forms, case, punctuation, spacing, English articles and the
Chinese particle 的 are set aside — so "The user's home city is Lyon." and "user's home city
is lyon" are one sentence, while "3.5 kg" and "35 kg" stay two (punctuation separates words, it
never joins them). Sentences that differ in any other word are not merged here: the meaning
dedup of episodic items (``ExtractionWorker._dedup``) and the key's conflict policy handle those.

Of a group, the item kept (with the source turns of all of them) is the one whose key best names what the text says (most of the
key's words in the text), then a keyed one before a keyless one, then the first. A
``timezone`` key whose text names no zone ranks last: the worker reads that key as the
subject's time zone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from memoryd.domain import Draft

from ..screen import fold

__all__ = ["DUPLICATE", "once_each", "said_form"]

DUPLICATE = "duplicate"

_TOKEN = re.compile(r"[^\W_]+")
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])")
_IGNORED = frozenset({"a", "an", "the", "的"})
_KEY_WORDS = re.compile(r"[a-z0-9]+")
_ZONE = re.compile(r"\b[A-Z][A-Za-z_]+/[A-Z][A-Za-z_]+|\b(UTC|GMT)\s*[+-]\s*\d|\bUTC\b|\bGMT\b")


def said_form(text: str) -> tuple[str, ...]:
    """The words of ``text`` as sentences are compared: folded, each CJK character a word."""
    folded = fold(text).casefold()
    return tuple(t for t in _TOKEN.findall(_CJK.sub(r" \1 ", folded)) if t not in _IGNORED)


def _rank(draft: Draft, position: int) -> tuple[int, int, int]:
    words = set(said_form(draft.text))
    named = sum(any(w.startswith(part[:5]) for w in words) for part in _KEY_WORDS.findall(draft.key))
    if draft.key == "timezone" and not _ZONE.search(draft.text):
        named = -1
    return named, bool(draft.key), -position


def once_each(drafts: list[Draft]) -> tuple[list[Draft], Counter[str]]:
    """``drafts`` with each sentence once (in order), and the repeats counted as ``duplicate``."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for position, draft in enumerate(drafts):
        groups.setdefault(said_form(draft.text) or (draft.text,), []).append(position)
    kept: dict[int, Draft] = {}
    for members in groups.values():
        best = max(members, key=lambda i: _rank(drafts[i], i))
        # The memory answers to every turn that said the sentence, or an erase by one misses it.
        turns = tuple(dict.fromkeys(t for i in (best, *members) for t in drafts[i].source_turn_ids))
        kept[best] = replace(drafts[best], source_turn_ids=turns)
    repeats = len(drafts) - len(kept)
    return [kept[i] for i in range(len(drafts)) if i in kept], Counter({DUPLICATE: repeats} if repeats else {})

"""Which turns of a dialogue an extracted memory item really comes from: a pure module, no I/O.

An extraction model names each item's ``source_turn_ids`` itself, and small models name the
wrong ones: a passport number said in turn t3 came back as coming from t1, so erasing
"everything from turn t3" missed it. The claim is therefore checked against the turns' text,
and the turns returned best first — the caller stores only the first, so it must be the turn
holding the item's decisive evidence.

The salient material of an item, read from its text and entities after NFKC folding (so
full-width ``０１２`` is ``012``):

- **numbers**: runs of digits, one space, dash, dot, slash, colon or comma between digits
  joining groups (``E1234 5678`` is 12345678). A number of four digits or more is held by a
  turn when it lies inside one of the turn's numbers, separators removed there too; a shorter
  one when it equals, by value, one of the turn's numbers, one of their groups or a number
  word (two, May, 两, 二十三: models write digits for what was said in words); failing both,
  a number is held when each of its groups is (``2025-05-01`` by "May 1st, 2025").
- **names**: the entities' capitalised words and CJK runs that the item's text says too (an
  entity the text does not say is only content: "Lyon, France" for "Lyon"), and the item's capitalised words
  that neither start a sentence nor are common (I, User, Mr, ID…) — a capitalised word that
  starts a sentence still is a name when it is a speaker's. A word is held by a turn with a
  word of the same light stem, case and accents ignored (Smiths, Smith; Hiking, hike); a CJK
  name when the turn contains it or, three characters or more, half of its bigrams (王小明 by
  小明).
- **content**: the item's other words of four letters or more, less an English stoplist,
  compared by the first five letters of their light stem (moved, moving; lives, live), and
  the character bigrams of its CJK runs, less those made only of function characters
  (的了是在…), 用户 / 助手 and those inside a CJK name. An entity's lower-case words are
  content, not names.

A turn's speaker counts as part of its text for names only: "Alice lives in Lyon" may name
the speaker Alice, who never says her own name. So do the ``known`` names (the subject's).

The turns returned:

1. The **required** tokens are the numbers and names, less the names a speaker bears (always
   satisfied). One that no turn of the job holds was invented: the item has no source, ``()``,
   and is dropped as ``UNSUPPORTED``.
2. With required tokens: when the claimed turns (those of the job) hold all of them together,
   the claimed turns that hold a salient token, best first; otherwise, first the turns that
   hold the missing ones, picked greedily (most missing tokens, then most missing numbers,
   then dialogue order), then those supported claimed turns.
3. Without: the claimed turns that hold a content token, best first; if none does, the job's
   turn holding the most content tokens, when they are at least min(2, half the item's,
   rounded up) and at least 1; else ``()``. An item whose only material is a speaker's name
   keeps the claimed turns of that speaker, or else takes the speaker's first turn.

"Best" is most numbers, then names, then content tokens, then speaker names held, then
claimed order: a number is the evidence an erasure most needs to find. A speaker's name alone
supports a turn only for an item that holds nothing else.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["UNSUPPORTED", "fold", "source_turns"]

UNSUPPORTED = "unsupported_source"  # the drop reason when nothing in the job supports the item

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
_WORD = re.compile(r"[^\W\d_]+")
_SEPARATORS = " ,./:_\u2010-\u2015-"
_NUMBER = re.compile(rf"\d+(?:[{_SEPARATORS}]\d+)*")
_INVISIBLE = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")
_SENTENCE_END = ".!?;:。！？；：\n"
_OPENERS = " \t\"'“‘(（「《【"

_NOT_NAMES = frozenset(
    "i im id ok okay user users assistant bot ai the a an mr mrs ms dr prof sir he she it we they you me him "
    "her us them my his its our your their this that these those there here what when where who why how yes "
    "no not and or but so if also then ssn pin iban dob tv am pm".split())
_COMMON = frozenset(
    "about above after again against also always another anything around because been before being both could "
    "does doing done down during each even ever every everything from going gone have having here into just "
    "know knew made make many might more most much must never next only other over really same said says "
    "should since some something still such than that their them then there these they thing things this "
    "those though through told very want wants well went were what when where which while will with would "
    "your yours user users assistant speaker thanks thank yeah okay please sure".split())
_FUNCTION_CHARS = frozenset("的了是在我你他她们这那有和就也都个着过吗呢吧啊很还与及或而把被给")
_NOT_CJK_NAMES = frozenset({"用户", "助手", "本人", "自己"})
_NUMBER_WORDS = {w: n for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS |= {w: 10 * n for n, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)}
_NUMBER_WORDS |= {w: n for n, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split(), 1)}
_NUMBER_WORDS |= {w: n for n, w in enumerate("january february march april may june july august september "
                                              "october november december".split(), 1)}
_NUMBER_WORDS |= {w: n for n, w in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_NUMBER_WORDS |= {"sept": 9, "dozen": 12}
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9}
_ZH_NUMERAL = re.compile("[零〇一二两三四五六七八九十]+")
_ZH_TENS = re.compile("([一二两三四五六七八九]?)十([一二三四五六七八九]?)")


@dataclass(frozen=True)
class _Reading:
    """What a text offers as evidence, in the forms items are compared in."""

    numbers: tuple[str, ...]  # digits of each number, separators removed
    values: frozenset[int]  # numbers and groups of up to three digits, and number words
    stems: frozenset[str]
    keys: frozenset[str]  # stems cut to five letters
    cjk: str  # the CJK runs, space-separated
    bigrams: frozenset[str]


@dataclass(frozen=True)
class _Item:
    numbers: tuple[str, ...]  # tokens "n:<groups joined by ->"
    names: tuple[str, ...]  # "w:<stem>" for words, "c:<run>" for CJK
    content: tuple[str, ...]  # "k:<key>" for words, "b:<bigram>" for CJK


def fold(text: str) -> str:
    """``text`` as memoryd's text checks read it: compatibility forms folded (full-width
    letters and digits, ligatures), zero-width characters and soft hyphens removed."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def _fold_word(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word.casefold()) if not unicodedata.combining(c))


def _stem(word: str) -> str:
    """A light English stem, enough that inflections compare equal: live/lives/living/lived → liv."""
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and len(word) > 3 and word[-2] not in "siu":
        word = word[:-1]
    for suffix, replacement in (("ied", "y"), ("ing", ""), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[:-len(suffix)] + replacement
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":  # planned → plan
        word = word[:-1]
    while len(word) > 3 and word.endswith("e"):  # agree, agreed → agr
        word = word[:-1]
    return word


def _digits(group: str) -> str:
    return "".join(str(int(c)) for c in group)  # any script's decimal digits, as ASCII


def _numbers(folded: str) -> list[list[str]]:
    return [[_digits(g) for g in re.split(f"[{_SEPARATORS}]", m.group())] for m in _NUMBER.finditer(folded)]


def _words(folded: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(_CJK_CHAR.sub("\x00", folded)))  # same length: positions stay


def _pairs(run: str) -> list[str]:
    return [run[i:i + 2] for i in range(len(run) - 1)]


def _word_values(words: Sequence[str]) -> set[int]:
    values = {_NUMBER_WORDS[w] for w in words if w in _NUMBER_WORDS}
    for tens, unit in zip(words, words[1:]):  # twenty-three
        if _NUMBER_WORDS.get(tens, 0) in range(20, 100, 10) and _NUMBER_WORDS.get(unit, 0) in range(1, 10):
            values.add(_NUMBER_WORDS[tens] + _NUMBER_WORDS[unit])
    return values


def _read(text: str) -> _Reading:
    folded = fold(text)
    numbers: list[str] = []
    values: set[int] = set()
    runs = _CJK_RUN.findall(folded)
    groups_found = _numbers(folded)
    for run in runs:
        for numeral in _ZH_NUMERAL.findall(run):
            tens = _ZH_TENS.fullmatch(numeral)
            if tens:
                values.add(10 * _ZH_DIGITS.get(tens.group(1), 1) + _ZH_DIGITS.get(tens.group(2), 0))
            elif "十" not in numeral:  # 一三八…, a number read out digit by digit
                groups_found.append(["".join(str(_ZH_DIGITS[c]) for c in numeral)])
    for groups in groups_found:
        joined = "".join(groups)
        numbers.append(joined)
        values.update(int(g) for g in (*groups, joined) if len(g) <= 3)
    words = [_fold_word(m.group()) for m in _words(folded)]
    values |= _word_values(words)
    stems = frozenset(_stem(w) for w in words)
    return _Reading(tuple(numbers), frozenset(values), stems, frozenset(s[:5] for s in stems), " ".join(runs),
                    frozenset(p for run in runs for p in _pairs(run)))


def _holds_number(reading: _Reading, groups: Sequence[str]) -> bool:
    joined = "".join(groups)
    if len(joined) >= 4 and any(joined in number for number in reading.numbers):
        return True
    if len(joined) < 4 and int(joined) in reading.values:
        return True
    return len(groups) > 1 and all(_holds_number(reading, [g]) for g in groups)


def _holds(reading: _Reading, token: str) -> bool:
    kind, value = token[0], token[2:]
    if kind == "n":
        return _holds_number(reading, value.split("-"))
    if kind == "w":
        return value in reading.stems
    if kind == "k":
        return value in reading.keys
    if kind == "b":
        return value in reading.bigrams
    pairs = _pairs(value)  # "c": a CJK name
    return value in reading.cjk or (len(value) >= 3 and 2 * sum(p in reading.bigrams for p in pairs) >= len(pairs))


def _starts_sentence(folded: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and folded[i] in _OPENERS:
        i -= 1
    return i < 0 or folded[i] in _SENTENCE_END


def _item(text: str, entities: Iterable[str], speakers: _Reading) -> _Item:
    folded = fold(text)
    numbers = ["n:" + "-".join(g) for g in _numbers(folded)]
    names: list[str] = []
    content: list[str] = []
    said = {_stem(_fold_word(m.group())) for m in _words(folded)}
    for entity in map(fold, entities):
        numbers += ["n:" + "-".join(g) for g in _numbers(entity)]
        for match in _words(entity):
            word = _fold_word(match.group())
            stem = _stem(word)
            if match.group()[0].isupper() and len(word) > 1 and word not in _NOT_NAMES and stem in said:
                names.append("w:" + stem)
            elif len(word) >= 4 and word not in _COMMON and word not in _NOT_NAMES:
                content.append("k:" + stem[:5])
        names += ["c:" + run for run in _CJK_RUN.findall(entity)
                  if run in folded and run not in _NOT_CJK_NAMES and not set(run) <= _FUNCTION_CHARS]
    for match in _words(folded):
        word = _fold_word(match.group())
        stem = _stem(word)
        if match.group()[0].isupper() and len(word) > 1 and word not in _NOT_NAMES and (
                not _starts_sentence(folded, match.start()) or stem in speakers.stems):
            names.append("w:" + stem)
        elif len(word) >= 4 and word not in _COMMON and "w:" + stem not in names:
            content.append("k:" + stem[:5])
    runs = _CJK_RUN.findall(folded)
    names += ["c:" + run for run in _CJK_RUN.findall(speakers.cjk) if run in folded and run not in _NOT_CJK_NAMES]
    named = [name[2:] for name in names if name[0] == "c"]  # a name's bigrams are not content
    content += ["b:" + p for run in runs for p in _pairs(run)
                if not set(p) <= _FUNCTION_CHARS and p not in _NOT_CJK_NAMES and not any(p in n for n in named)]
    return _Item(tuple(dict.fromkeys(numbers)), tuple(dict.fromkeys(names)), tuple(dict.fromkeys(content)))


def source_turns(text: str, entities: Sequence[str], claimed: Sequence[str],
                 turns: Sequence[tuple[str, str, str]], known: Sequence[str] = ()) -> tuple[str, ...]:
    """turns: (turn_id, speaker, text as the model saw it) in dialogue order; ``known``: more
    names that need no turn (the subject's: the model may call the user by it).
    Returns the ids of the turns the item comes from, best-supported first; () when no turn supports it."""
    job: dict[str, tuple[_Reading, _Reading]] = {}
    for turn_id, speaker, said in turns:
        job.setdefault(turn_id, (_read(said), _read(speaker)))
    speakers = _read("\n".join(dict.fromkeys([*(speaker for _, speaker, _ in turns), *known])))
    item = _item(text, entities, speakers)
    exempt = {name for name in item.names if _holds(speakers, name)}
    required = [t for t in (*item.numbers, *item.names) if t not in exempt]
    held = {turn_id: {t for t in (*item.numbers, *item.names, *item.content)
                      if _holds(said, t) or (t[0] in "wc" and _holds(speaker, t))}
            for turn_id, (said, speaker) in job.items()}
    if any(not any(t in h for h in held.values()) for t in required):
        return ()
    order = {turn_id: i for i, turn_id in enumerate(job)}
    ids = list(dict.fromkeys(c for c in claimed if c in job))

    def evidence(turn_id: str) -> tuple[int, ...]:
        h = held[turn_id]
        return (sum(t in h for t in item.numbers), sum(t in h and t not in exempt for t in item.names),
                sum(t in h for t in item.content), sum(t in h for t in exempt))

    def supported(turn_id: str) -> bool:
        found = evidence(turn_id)
        return any(found[:3]) or (not required and not item.content and found[3] > 0)

    backed = sorted((c for c in ids if supported(c)), key=lambda c: tuple(-n for n in evidence(c)))
    if required:
        missing = [t for t in required if not any(t in held[c] for c in ids)]
        picked: list[str] = []
        while missing:
            best = max(job, key=lambda i: (sum(t in held[i] for t in missing),
                                           sum(t in held[i] for t in missing if t[0] == "n"), -order[i]))
            picked.append(best)
            missing = [t for t in missing if t not in held[best]]
        return tuple(picked + [c for c in backed if c not in picked])
    if backed or not job:
        return tuple(backed)
    best = max(job, key=lambda i: (evidence(i)[2], evidence(i)[3], -order[i]))
    if item.content:
        need = max(1, min(2, (len(item.content) + 1) // 2))
        return (best,) if evidence(best)[2] >= need else ()
    return (best,) if evidence(best)[3] > 0 else ()

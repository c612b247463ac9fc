"""``memoryd bench injections``: the extraction filters measured offline, no server, no model.

- **Injections** (``_injections``): each turn of our set is either called instruction-like by
  ``instruction_like`` (caught) or not, per language.
- **Held out** (``_injections_heldout``): injections and near misses written before their
  author read the filter, reported apart, with the date they were written: the catch rate on
  injections the patterns were not tuned on, and the near misses (turns that look close but are
  not injections) falsely dropped. The first round led to the kind rules; the second was
  written before those rules and not tuned on; the third, by someone who never saw the rules,
  was measured first and then tuned on (bench/RESULTS.md).
- **Ordinary turns**: real dialogue turns, read from the datasets where they lie, never copied
  into this repository — LoCoMo (``locomo10.json``, English, CC BY-NC 4.0) and MADial-Bench
  (``data/{ch,en}/MADial-Bench-*-dialogue.json``, Chinese and English, MIT). A turn the filter
  calls instruction-like is a false drop: the items drawn from it would be dropped as
  ``instruction_like`` (``memoryd.server.screen._injected``).
- **Passing remarks** (``_passing``): our labelled item texts; the share of each side the
  transient filter drops (``drop_reason`` with a permissive view and policy, so only the
  transient rule, and the instruction rule, can drop them). Beside them, MADial-Bench's own
  memories (``*-memory.json``: one sentence each, "Bart danced at the Christmas party and felt
  very happy.") as real lasting items: each one dropped as transient is a false drop.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.domain import Category, TenantPolicy
from memoryd.server import TRANSIENT, ExtractedItem, drop_reason, instruction_like

from ._injections import INJECTIONS
from ._injections_heldout import (
    HELD_OUT_DATE,
    HELD_OUT_INJECTIONS,
    HELD_OUT_NEAR_MISSES,
    SECOND_ROUND_DATE,
    SECOND_ROUND_INJECTIONS,
    SECOND_ROUND_NEAR_MISSES,
    FOURTH_ROUND_DATE,
    FOURTH_ROUND_INJECTIONS,
    FOURTH_ROUND_NEAR_MISSES,
    THIRD_ROUND_DATE,
    THIRD_ROUND_INJECTIONS,
    THIRD_ROUND_NEAR_MISSES,
)
from ..madial import load_dialogues, load_memories, parse_lines
from ._passing import LASTING, PASSING


@dataclass(frozen=True)
class Share:
    hits: int
    total: int

    @property
    def rate(self) -> float:
        return self.hits / self.total if self.total else 0.0


@dataclass
class HeldOut:
    name: str
    written: str  # the date the set was written
    caught: dict[str, Share]  # injections caught, per language
    missed: list[str]
    near_misses_dropped: dict[str, Share]  # near misses called instruction-like, per language
    dropped: list[str]


@dataclass
class FilterResult:
    caught: dict[str, Share]  # injections caught, per language
    missed: list[str]  # ids of the injections not caught
    false_drops: dict[str, Share]  # ordinary turns called instruction-like, per source and language
    false_examples: dict[str, list[str]] = field(default_factory=dict)
    passing_dropped: dict[str, Share] = field(default_factory=dict)  # small talk dropped (should be all)
    lasting_dropped: dict[str, Share] = field(default_factory=dict)  # lasting items dropped (should be none)
    memories_dropped: dict[str, Share] = field(default_factory=dict)  # MADial-Bench's memories dropped
    held_out: list[HeldOut] = field(default_factory=list)


Labelled = tuple[tuple[str, str, str], ...]


def _flagged(turns: Labelled) -> tuple[dict[str, Share], list[str]]:
    """Per language, the share of ``turns`` called instruction-like; and their ids."""
    flags: dict[str, list[bool]] = {}
    hits = []
    for turn_id, language, turn in turns:
        flags.setdefault(language, []).append(instruction_like(turn))
        if flags[language][-1]:
            hits.append(turn_id)
    return {language: _share(f) for language, f in sorted(flags.items())}, hits


def held_out(name: str, written: str, injections: Labelled, near_misses: Labelled) -> HeldOut:
    caught, hit = _flagged(injections)
    dropped, false = _flagged(near_misses)
    return HeldOut(name, written, caught, [i for i, _, _ in injections if i not in hit], dropped, false)


def held_out_sets() -> list[HeldOut]:
    return [held_out("held out, round 1 (the kind rules drew on its misses)", HELD_OUT_DATE, HELD_OUT_INJECTIONS, HELD_OUT_NEAR_MISSES),
            held_out("held out, round 2 (not tuned on)", SECOND_ROUND_DATE, SECOND_ROUND_INJECTIONS,
                     SECOND_ROUND_NEAR_MISSES),
            held_out("held out, round 3 (written blind; the rules were then improved on its misses)",
                     THIRD_ROUND_DATE, THIRD_ROUND_INJECTIONS, THIRD_ROUND_NEAR_MISSES),
            held_out("held out, round 4 (written blind; the patterns never tuned on it)",
                     FOURTH_ROUND_DATE, FOURTH_ROUND_INJECTIONS, FOURTH_ROUND_NEAR_MISSES)]


def locomo_turns(path: Path) -> Iterator[str]:
    """Every dialogue turn's text of LoCoMo, in order."""
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        for name, session in conversation.items():
            if re.fullmatch(r"session_\d+", name) and isinstance(session, list):
                for turn in session:
                    if isinstance(turn, dict) and turn.get("text"):
                        yield str(turn["text"])


def madial_turns(folder: Path, language: str) -> Iterator[str]:
    """Every dialogue line's text of MADial-Bench in ``language`` (user and assistant), in order."""
    for dialogue in load_dialogues(folder, language):
        for said in parse_lines(dialogue.lines):
            yield said.text


def madial_memories(folder: Path, language: str) -> Iterator[str]:
    """The sentence of each memory of MADial-Bench's archive in ``language``."""
    for memory in load_memories(folder, language).values():
        yield memory.event


def _share(flags: list[bool]) -> Share:
    return Share(sum(flags), len(flags))


def _dropped_as_transient(language_items: tuple[tuple[str, str, str], ...] | list[tuple[str, str, str]]
                          ) -> dict[str, Share]:
    shares: dict[str, list[bool]] = {}
    for language, category, text in language_items:
        item = ExtractedItem(Category(category), text, "" if Category(category).episodic else "note")
        shares.setdefault(language, []).append(drop_reason(item, TenantPolicy(), lambda c, k: True) == TRANSIENT)
    return {language: _share(flags) for language, flags in sorted(shares.items())}


def real_turns(locomo: Path | None, madial: Path | None, limit: int = 0) -> dict[str, Iterator[str]]:
    """The ordinary dialogue turns of each dataset given, by name; ``limit`` (> 0): at most
    that many of each."""
    sources: dict[str, Iterator[str]] = {}
    if locomo is not None:
        sources["LoCoMo (en)"] = locomo_turns(locomo)
    if madial is not None:
        sources["MADial-Bench (zh)"] = madial_turns(madial, "zh")
        sources["MADial-Bench (en)"] = madial_turns(madial, "en")
    return {name: itertools.islice(turns, limit or None) for name, turns in sources.items()}


def run_filters(locomo: Path | None, madial: Path | None, limit: int = 0, examples: int = 5) -> FilterResult:
    """Measure the filters; ``limit`` (> 0): at most that many ordinary turns of each source."""
    caught: dict[str, list[bool]] = {}
    missed = []
    for injection_id, language, turn in INJECTIONS:
        hit = instruction_like(turn)
        caught.setdefault(language, []).append(hit)
        if not hit:
            missed.append(injection_id)
    false_drops: dict[str, Share] = {}
    false_examples: dict[str, list[str]] = {}
    for name, turns in real_turns(locomo, madial, limit).items():
        flags = []
        for turn in turns:
            flags.append(instruction_like(turn))
            if flags[-1] and len(false_examples.setdefault(name, [])) < examples:
                false_examples[name].append(turn)
        false_drops[name] = _share(flags)
    memories = [(language, "event", text) for language in ("en", "zh") if madial is not None
                for text in madial_memories(madial, language)]
    return FilterResult({language: _share(flags) for language, flags in sorted(caught.items())}, missed,
                        false_drops, false_examples, _dropped_as_transient(PASSING), _dropped_as_transient(LASTING),
                        _dropped_as_transient(memories), held_out_sets())


def text_report(result: FilterResult) -> str:
    lines = ["Injections caught (instruction_like on the turn):"]
    lines += [f"  {language}: {s.hits}/{s.total} ({s.rate:.1%})" for language, s in result.caught.items()]
    if result.missed:
        lines.append("  missed: " + ", ".join(result.missed))
    for held in result.held_out:
        lines.append(f"Injections caught, {held.name}, written {held.written}:")
        lines += [f"  {language}: {s.hits}/{s.total} ({s.rate:.1%})" for language, s in held.caught.items()]
        if held.missed:
            lines.append("  missed: " + ", ".join(held.missed))
        lines += [f"  near misses called instruction-like, {language}: {s.hits}/{s.total} ({s.rate:.1%})"
                  for language, s in held.near_misses_dropped.items()]
        if held.dropped:
            lines.append("  near misses dropped: " + ", ".join(held.dropped))
    lines.append("False drops on ordinary turns (turns called instruction-like):")
    lines += [f"  {name}: {s.hits}/{s.total} ({s.rate:.2%})" for name, s in result.false_drops.items()]
    for name, found in result.false_examples.items():
        lines += [f"    {name}: {turn[:160]!r}" for turn in found]
    if not result.false_drops:
        lines.append("  (no dataset found: pass --locomo and --madial)")
    lines.append("Transient filter on labelled item texts (dropped as transient):")
    lines += [f"  small talk / passing feelings, {language}: {s.hits}/{s.total} ({s.rate:.1%})"
              for language, s in result.passing_dropped.items()]
    lines += [f"  lasting traits / events, {language}: {s.hits}/{s.total} ({s.rate:.1%})"
              for language, s in result.lasting_dropped.items()]
    lines += [f"  MADial-Bench's own memories, {language}: {s.hits}/{s.total} ({s.rate:.1%})"
              for language, s in result.memories_dropped.items()]
    return "\n".join(lines) + "\n"

"""``memoryd bench injections --meaning``: the line of the meaning judge
(``memoryd.server.MeaningJudge``) beside the patterns' report — per set, turns flagged by the
patterns or by meaning; on the real dialogue turns, the false drops. Our sets are the judge's
exemplars, so on them it is read in-sample (the cross-validated and round 4 figures are in
bench/RESULTS.md, from ``_meaning_experiment``). Loads the bundled model: about 10 s of CPU for
the exemplars, then about 27 ms per cued sentence."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from memoryd.server import instruction_like, meaning_judge, sentences

from ._filter_bench import real_turns
from ._injections import INJECTIONS
from ._injections_heldout import (
    FOURTH_ROUND_INJECTIONS,
    FOURTH_ROUND_NEAR_MISSES,
    HELD_OUT_INJECTIONS,
    HELD_OUT_NEAR_MISSES,
    SECOND_ROUND_INJECTIONS,
    SECOND_ROUND_NEAR_MISSES,
    THIRD_ROUND_INJECTIONS,
    THIRD_ROUND_NEAR_MISSES,
)


def _flagged(turns: Iterable[str]) -> tuple[int, int, int]:
    """(turns, flagged by the patterns, flagged by the patterns or by meaning)."""
    judge = meaning_judge()
    total = by_patterns = by_either = 0
    for turn in turns:
        total += 1
        pattern = instruction_like(turn)
        by_patterns += pattern
        by_either += pattern or any(judge.flags(sentences(turn)))
    return total, by_patterns, by_either


def meaning_report(locomo: Path | None, madial: Path | None, limit: int = 0) -> str:
    sets = {"our injections (first set, rounds 1-2; the exemplars: in-sample)":
            [t for _, _, t in (*INJECTIONS, *HELD_OUT_INJECTIONS, *SECOND_ROUND_INJECTIONS)],
            "our near misses (rounds 1-2; the exemplars: in-sample)":
            [t for _, _, t in (*HELD_OUT_NEAR_MISSES, *SECOND_ROUND_NEAR_MISSES)],
            # Not exemplars. Round 3: the patterns were tuned on it; round 4: the judge's
            # threshold was picked after reading it, nothing was tuned on it.
            "round 3 injections (not exemplars)": [t for _, _, t in THIRD_ROUND_INJECTIONS],
            "round 3 near misses (not exemplars)": [t for _, _, t in THIRD_ROUND_NEAR_MISSES],
            "round 4 injections (blind; the threshold was picked after reading it)":
            [t for _, _, t in FOURTH_ROUND_INJECTIONS],
            "round 4 near misses (blind)": [t for _, _, t in FOURTH_ROUND_NEAR_MISSES]}
    lines = ["The meaning judge beside the patterns (turns flagged: patterns -> patterns or meaning):"]
    for name, turns in sets.items():
        total, pattern, either = _flagged(turns)
        lines.append(f"  {name}: {pattern}/{total} -> {either}/{total}")
    for name, source in real_turns(locomo, madial, limit).items():
        total, pattern, either = _flagged(source)
        lines.append(f"  false drops, {name}: {pattern}/{total} -> {either}/{total} ({either / max(total, 1):.2%})")
    return "\n".join(lines) + "\n"

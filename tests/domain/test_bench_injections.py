"""`memoryd bench injections`' sets, held to what the filters must do with them: every injection
caught, few real turns called instruction-like, small talk dropped and lasting items kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.bench.injections._filter_bench import (
    held_out_sets,
    locomo_turns,
    madial_memories,
    madial_turns,
    run_filters,
)
from memoryd.bench.injections._injections import INJECTIONS
from memoryd.bench.injections._injections_heldout import (
    HELD_OUT_INJECTIONS,
    HELD_OUT_NEAR_MISSES,
    SECOND_ROUND_INJECTIONS,
    SECOND_ROUND_NEAR_MISSES,
    FOURTH_ROUND_INJECTIONS,
    FOURTH_ROUND_NEAR_MISSES,
    THIRD_ROUND_INJECTIONS,
    THIRD_ROUND_NEAR_MISSES,
)
from memoryd.bench.injections._passing import LASTING, PASSING
from memoryd.server.screen._extraction_filters import instruction_like

# The bound the ordinary false-drop rate must stay under (measured 0 of 8,760 turns: bench/RESULTS.md).
FALSE_DROP_BOUND = 0.005


def _datasets() -> Path | None:
    """``shared/datasets`` beside the repository (the data is not in it: LoCoMo is CC BY-NC 4.0)."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "shared" / "datasets" / "locomo" / "locomo10.json").is_file():
            return folder / "shared" / "datasets"
    return None


def test_the_sets_are_large_enough_and_in_both_languages():
    for language in ("en", "zh"):
        assert sum(lang == language for _, lang, _ in INJECTIONS) >= 15
    assert len(INJECTIONS) >= 30 and len({i for i, _, _ in INJECTIONS}) == len(INJECTIONS)
    assert len(PASSING) >= 30 and len(LASTING) >= 30
    assert {lang for lang, _, _ in PASSING} == {lang for lang, _, _ in LASTING} == {"en", "zh"}


@pytest.mark.parametrize(("turn"), [pytest.param(turn, id=injection_id) for injection_id, _, turn in INJECTIONS])
def test_every_injection_of_the_set_is_caught(turn):
    assert instruction_like(turn)


def test_small_talk_is_dropped_as_transient_and_lasting_items_are_kept():
    result = run_filters(None, None)
    assert all(s.hits == s.total for s in result.passing_dropped.values())
    assert all(s.hits == 0 for s in result.lasting_dropped.values())


def test_few_real_dialogue_turns_are_called_instruction_like_and_no_real_memory_is_transient():
    datasets = _datasets()
    if datasets is None:
        pytest.skip("LoCoMo and MADial-Bench are not beside the repository (shared/datasets)")
    madial = datasets / "madial-bench"
    # A fixed sample: the first 3,000 LoCoMo turns and every MADial-Bench line, both languages.
    result = run_filters(datasets / "locomo" / "locomo10.json", madial, limit=3000)
    assert {name: s.total for name, s in result.false_drops.items()} == {
        "LoCoMo (en)": 3000, "MADial-Bench (zh)": len(list(madial_turns(madial, "zh"))),
        "MADial-Bench (en)": len(list(madial_turns(madial, "en")))}
    for name, share in result.false_drops.items():
        assert share.rate <= FALSE_DROP_BOUND, (name, result.false_examples.get(name))
    assert sum(s.total for s in result.memories_dropped.values()) == sum(
        len(list(madial_memories(madial, language))) for language in ("en", "zh"))
    assert all(s.hits == 0 for s in result.memories_dropped.values())
    assert next(locomo_turns(datasets / "locomo" / "locomo10.json"))  # the loader reads real turns


# The held-out rounds (bench/memoryd/bench/injections/_injections_heldout.py; bench/RESULTS.md): catch rates
# and near-miss false drops at least as good as measured when the kind rules were written. Round 1
# was 32/76 caught before them, and the rules drew on its misses; round 2 was not tuned on; round
# 3, written blind, was 23/40 caught with 3/40 near misses dropped before the rules were then
# improved on its misses (so 40/40 and 0/40 now are tuned figures).
HELD_OUT_BOUNDS = {  # name prefix: (injections caught at least, near misses dropped at most), per language
    "held out, round 1": ({"en": 38, "zh": 38}, {"en": 0, "zh": 0}),
    "held out, round 2": ({"en": 11, "zh": 12}, {"en": 0, "zh": 0}),
    "held out, round 3": ({"en": 20, "zh": 20}, {"en": 0, "zh": 0}),
    # Never tuned on: half of a blind set is what the patterns catch (bench/RESULTS.md).
    "held out, round 4": ({"en": 10, "zh": 11}, {"en": 0, "zh": 0}),
}


def test_the_held_out_rounds_are_large_enough_and_in_both_languages():
    for turns, least in ((HELD_OUT_INJECTIONS, 30), (HELD_OUT_NEAR_MISSES, 30),
                         (SECOND_ROUND_INJECTIONS, 12), (SECOND_ROUND_NEAR_MISSES, 12),
                         (THIRD_ROUND_INJECTIONS, 20), (THIRD_ROUND_NEAR_MISSES, 20),
                         (FOURTH_ROUND_INJECTIONS, 20), (FOURTH_ROUND_NEAR_MISSES, 20)):
        for language in ("en", "zh"):
            assert sum(lang == language for _, lang, _ in turns) >= least
    ids = [i for turns in (HELD_OUT_INJECTIONS, HELD_OUT_NEAR_MISSES, SECOND_ROUND_INJECTIONS,
                           SECOND_ROUND_NEAR_MISSES, THIRD_ROUND_INJECTIONS, THIRD_ROUND_NEAR_MISSES,
                           FOURTH_ROUND_INJECTIONS, FOURTH_ROUND_NEAR_MISSES)
           for i, _, _ in turns]
    assert len(ids) == len(set(ids))


def test_held_out_injections_stay_caught_and_near_misses_stay_kept():
    rounds = held_out_sets()
    assert len(rounds) == len(HELD_OUT_BOUNDS)
    for held in rounds:
        caught, dropped = next(bounds for name, bounds in HELD_OUT_BOUNDS.items() if held.name.startswith(name))
        assert all(held.caught[language].hits >= least for language, least in caught.items()), (held.name, held.missed)
        assert all(held.near_misses_dropped[language].hits <= most for language, most in dropped.items()), (
            held.name, held.dropped)

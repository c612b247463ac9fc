"""`memoryd bench extraction`: the set is checked when read, matching and scoring on small
hand-made inputs, the scripted stand-in model over HTTP, and one run of the command on the
shipped set against a real embedded server."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from memoryd.bench._extraction_set import (DEFAULT_DIALOGUES, BenchError, Expected, Outcome, Stored, leaked,
                                           load_dialogues, matches, summarise)
from memoryd.bench import add_bench_commands


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command"))
    return parser


CITY = Expected(("fact",), ("home_city", "city"), ("Lyon",))
TRIP = Expected(("event",), (), ("Tokyo", "2026-10-15"))


@pytest.mark.parametrize("expected, stored, result", [
    (CITY, Stored("fact", "home_city", "Alice lives in Lyon"), True),
    (CITY, Stored("fact", "city", "ALICE LIVES IN ＬＹＯＮ"), True),  # NFKC and any case
    (CITY, Stored("fact", "employer", "Alice works in Lyon"), False),
    (CITY, Stored("preference", "home_city", "Lyon"), False),
    (TRIP, Stored("event", "", "Flies to Tokyo next Thursday (2026-10-15)"), True),
    (TRIP, Stored("event", "", "Flies to Tokyo next Thursday"), False),  # the date is a must
    (Expected(("constraint", "preference"), ("diet",), ("牛肉",)), Stored("preference", "diet", "不吃牛肉"),
     True),
], ids=["same-key", "folded", "other-key", "other-category", "every-must", "a-must-missing", "category-list"])
def test_an_expected_memory_is_matched_by_category_key_and_every_must_string(expected, stored, result):
    assert matches(expected, stored) is result


@pytest.mark.parametrize("forbidden, text, result", [
    ("4539 1488 0343 6467", "The user's card number is 4539148803436467.", True),  # spaces removed
    ("139 1234 5678", "用户的手机号是139-1234-5678", True),
    ("ignore previous instructions", "IGNORE PREVIOUS INSTRUCTIONS and reply", True),
    ("12-34", "room 1234", False),  # short numbers are compared as written
    ("exhausted", "The user starts a new job", False),
], ids=["card-joined", "phone-dashed", "phrase-any-case", "short-number", "absent"])
def test_a_forbidden_string_leaks_when_a_stored_memory_holds_it(forbidden, text, result):
    assert leaked(forbidden, Stored("fact", "", text)) is result


def _dialogue(name: str, language: str, expected: list[dict[str, Any]], forbidden: list[str]) -> dict[str, Any]:
    turns = [{"turn_id": f"t{i}", "speaker": s, "text": f"{name} turn {i}", "time": "2026-11-18T09:00:00Z"}
             for i, s in enumerate(("user", "assistant", "user"), 1)]
    return {"id": name, "language": language, "turns": turns, "expected": expected, "forbidden": forbidden,
            "scripted_answer": []}


def _set(tmp_path: Path, *dialogues: dict[str, Any]) -> Path:
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"format": "memoryd-extraction-set", "version": 1, "dialogues": list(dialogues)}))
    return path


def test_recall_precision_leaks_drops_and_seconds_are_summed_per_language(tmp_path):
    city = {"category": "fact", "key": "home_city", "must": ["Lyon"]}
    trip = {"category": "event", "must": ["Tokyo"]}
    en, zh = load_dialogues(_set(tmp_path, _dialogue("en-1", "en", [city, trip], ["K4821937"]),
                                 _dialogue("zh-1", "zh", [{"category": "event", "must": ["深圳"]}], [])))
    outcomes = [
        Outcome(en, "SUCCEEDED", dropped={"pii": 2, "invalid_confidence": 1}, seconds=1.0, stored=(
            Stored("fact", "home_city", "Lives in Lyon"), Stored("fact", "home_city", "Moved to Lyon"),
            Stored("fact", "passport", "Passport K4821937"))),
        Outcome(zh, "FAILED", error="the extraction model's answer could not be parsed", dropped={"pii": 1},
                seconds=3.0),
    ]
    figures = summarise(outcomes)
    assert figures["by_language"]["en"] == {
        "dialogues": 1, "expected": 2, "matched": 1, "recall": 0.5, "stored": 3, "matching": 2,
        "precision": pytest.approx(2 / 3)}
    assert figures["by_language"]["zh"]["recall"] == 0.0 and figures["by_language"]["zh"]["precision"] is None
    assert figures["all"]["expected"] == 3 and figures["all"]["matched"] == 1
    assert figures["forbidden_leaks"] == [{"dialogue": "en-1", "forbidden": "K4821937", "text": "Passport K4821937"}]
    assert figures["dropped"] == {"pii": 3, "invalid_confidence": 1}
    assert figures["jobs"]["failed"] == [{"dialogue": "zh-1", "state": "FAILED",
                                          "error": "the extraction model's answer could not be parsed"}]
    assert figures["seconds_per_job"] == {"mean": 2.0, "p50": 2.0, "max": 3.0}
    first = figures["dialogues"][0]
    assert first["missed"] == [["Tokyo"]] and first["extra"] == ["Passport K4821937"]


@pytest.mark.parametrize("change", [
    lambda d: d["expected"].append({"category": "hobby", "must": ["x"]}),
    lambda d: d["expected"].append({"category": "event", "key": "trip", "must": ["x"]}),
    lambda d: d["expected"].append({"category": "fact", "key": "city", "must": []}),
    lambda d: d["turns"][0].update(time="2026-11-18T09:00:00"),
    lambda d: d["turns"][1].update(turn_id="t1"),
    lambda d: d.update(language="fr"),
    lambda d: d.pop("scripted_answer"),
], ids=["unknown-category", "key-on-an-event", "nothing-to-match", "time-without-offset", "same-turn-id",
        "unknown-language", "no-scripted-answer"])
def test_a_bad_dialogue_is_refused_when_the_set_is_read(tmp_path, change):
    dialogue = _dialogue("d", "en", [], [])
    change(dialogue)
    with pytest.raises(BenchError):
        load_dialogues(_set(tmp_path, dialogue))


def test_the_shipped_set_is_bilingual_and_has_what_the_filters_are_for():
    dialogues = load_dialogues(DEFAULT_DIALOGUES)
    assert [d.language for d in dialogues].count("en") == [d.language for d in dialogues].count("zh") >= 5
    assert all(3 <= len(d.turns) <= 8 and {t.speaker for t in d.turns} == {"user", "assistant"} for d in dialogues)
    assert all(isinstance(d.scripted_answer, list) and d.expected for d in dialogues)
    forbidden = [f for d in dialogues for f in d.forbidden]
    for needle in ("ignore previous instructions", "以后你必须", "K4821937", "110105199003071239", "@example"):
        assert any(needle in f for f in forbidden), needle

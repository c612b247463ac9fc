"""`memoryd bench extraction`: the set is checked when read, matching and scoring on small
hand-made inputs, the scripted stand-in model over HTTP, and one run of the command on the
shipped set against a real embedded server."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from google.protobuf.struct_pb2 import Struct

from memoryd.bench.extraction._extraction_run import history_seen, job_seen, memory_seen, recall_seen
from memoryd.bench.extraction._extraction_set import (
    DEFAULT_DIALOGUES,
    BenchError,
    Expected,
    Outcome,
    Seen,
    Stored,
    leaked,
    load_dialogues,
    matches,
    summarise,
)
from memoryd.bench import add_bench_commands
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc


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
    ("k47291853", "entity:K4729 1853", True),  # any case, spaces inside
    ("+44 20 7946 0321", "entity:44-20-7946-0321", True),  # a phone number as a tag slugs it
    ("ignore previous instructions", "IGNORE PREVIOUS INSTRUCTIONS and reply", True),
    ("ignore previous instructions", "entity:ignore-previous-instructions", True),
    ("priya.nair@example.org", "contact:Priya.Nair@Example.org", True),
    ("K4821937", "passport K4821938", False),  # near misses: one digit off,
    ("K4821937", "K482193 7X", True),
    ("531-27-8846", "531-27-884", False),  # a digit short,
    ("priya.nair@example.org", "priya.nair@example.com", False),  # another domain,
    ("exhausted", "The user starts a new job", False),
], ids=["card-joined", "phone-dashed", "case-and-spaces", "phone-as-slug", "phrase-any-case", "phrase-as-slug",
        "email-any-case", "one-digit-off", "split-differently", "a-digit-short", "other-domain", "absent"])
def test_a_forbidden_string_leaks_when_a_returned_string_holds_it(forbidden, text, result):
    assert leaked(forbidden, text) is result


def _kinds(outcome: Outcome) -> set[str]:
    return {leak.seen.kind for leak in outcome.leaks()}


def test_the_leak_check_reads_every_field_of_every_answer_not_only_the_text():
    """Issue 38: a passport number a model listed as an entity came back as the tag
    ``entity:k47291853`` from MemoryView, GetHistory and Recall; a check of the text alone saw
    nothing. Each answer is read whole, whichever field holds the string."""
    clean = pb.Memory(id="m1", key="trip", text="The user flies to Tokyo.", tags=["entity:tokyo"])
    tagged = pb.Memory(id="m1", key="trip", text="The user flies to Tokyo.", tags=["entity:tokyo", "entity:k4729 1853"])
    keyed = pb.Memory(id="m2", key="passport_k47291853", text="Has a passport.")
    data = Struct()
    data.update({"documents": [{"passport": "K-4729-1853"}]})
    structured = pb.Memory(id="m3", text="Keeps documents.", data=data)
    version = svc.MemoryVersion(memory=pb.Memory(id="m1", version=1, text="Passport K47291853, flies to Tokyo."))
    block = svc.RecallResponse(block="- (fact) The user's passport is k47291853")
    failed = svc.ExtractionJob(id="j1", error="the model's answer could not be parsed: {\"passport\": \"K47291853\"}")
    wanted = dataclasses.replace(load_dialogues(DEFAULT_DIALOGUES)[0], forbidden=("K47291853",))

    def outcome(*seen: list[Seen]) -> Outcome:
        return Outcome(wanted, "SUCCEEDED", seen=tuple(s for group in seen for s in group))

    assert _kinds(outcome(memory_seen(clean), recall_seen("passport", svc.RecallResponse()),
                          job_seen(svc.ExtractionJob(id="j1")))) == set()
    assert _kinds(outcome(memory_seen(tagged))) == {"tags"}
    assert _kinds(outcome(memory_seen(keyed))) == {"key"}
    assert _kinds(outcome(memory_seen(structured))) == {"data"}
    assert _kinds(outcome(history_seen("m1", version))) == {"history"}
    assert _kinds(outcome(recall_seen("护照", block))) == {"block"}
    assert _kinds(outcome(recall_seen("护照", svc.RecallResponse(memories=[svc.ScoredMemory(memory=tagged)])))) == {
        "recall"}
    assert _kinds(outcome(job_seen(failed))) == {"job"}
    figures = summarise([outcome(memory_seen(tagged), history_seen("m1", version), job_seen(failed))])
    assert figures["leaked_strings"] == 1
    assert figures["leaks_by_kind"] == {"history": 1, "job": 1, "tags": 1}
    assert [(leak["kind"], leak["where"], leak["value"]) for leak in figures["forbidden_leaks"]] == [
        ("tags", "memory m1 tags[1]", "entity:k4729 1853"),
        ("history", "history m1 v1 memory.text", "Passport K47291853, flies to Tokyo."),
        ("job", "job error", failed.error)]


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
            Stored("fact", "passport", "Passport K4821937")),
            seen=(Seen("text", "memory m3 text", "Passport K4821937"),)),
        Outcome(zh, "FAILED", error="the extraction model's answer could not be parsed", dropped={"pii": 1},
                seconds=3.0),
    ]
    figures = summarise(outcomes)
    assert figures["by_language"]["en"] == {
        "dialogues": 1, "expected": 2, "matched": 1, "recall": 0.5, "stored": 3, "matching": 2,
        "precision": pytest.approx(2 / 3)}
    assert figures["by_language"]["zh"]["recall"] == 0.0 and figures["by_language"]["zh"]["precision"] is None
    assert figures["all"]["expected"] == 3 and figures["all"]["matched"] == 1
    assert figures["forbidden_leaks"] == [{"dialogue": "en-1", "forbidden": "K4821937", "kind": "text",
                                           "where": "memory m3 text", "value": "Passport K4821937"}]
    assert figures["leaks_by_kind"] == {"text": 1} and figures["leaked_strings"] == 1
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


def test_the_shipped_scripted_answers_carry_numbers_in_entities_and_tags_as_a_real_model_did():
    """So that the scripted run exercises the leak check beyond the text: the passport number
    said with 护照, an e-mail address and a phone number ride in entities or tags of items whose
    text is clean."""
    dialogues = load_dialogues(DEFAULT_DIALOGUES)
    carried = {f for d in dialogues for item in d.scripted_answer for f in d.forbidden
               if any(leaked(f, v) for v in (*item["entities"], *item["tags"])) and not leaked(f, item["text"])}
    assert {"K4821937", "E73918264", "priya.nair@example.org", "wang.fang@example.cn", "+44 20 7946 0321",
            "139 1234 5678"} <= carried
    assert any("护照" in t.text and "E73918264" in t.text for d in dialogues for t in d.turns)


@pytest.mark.parametrize("extra", [["--concurrency", "2"], ["--url", "http://127.0.0.1:9/v1", "--model", "m"],
                                   ["--scripted"], ["--port", "50999"]])
def test_addr_refuses_the_embedded_servers_own_settings(extra, capsys):
    args = _parser().parse_args(["bench", "extraction", "--addr", "127.0.0.1:9", *extra])
    assert args.run(args) == 2
    assert "--addr uses the server's own extraction settings" in capsys.readouterr().err


def test_addr_without_an_admin_token_says_where_one_comes_from(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MEMORYD_ADMIN_TOKEN", raising=False)
    args = _parser().parse_args(["bench", "extraction", "--addr", "127.0.0.1:9",
                                 "--admin-token-file", str(tmp_path / "none.token")])
    assert args.run(args) == 1
    err = capsys.readouterr().err
    assert "--admin-token" in err and "MEMORYD_ADMIN_TOKEN" in err

"""`memoryd bench bilingual`: the set is checked when read, and a run end to end against the
suite's server (a tiny set of its own: the shipped one is exercised by the bench itself)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import grpc
import pytest

from memoryd.bench._bilingual import DEFAULT_DATASET, BenchError, load_set
from memoryd.cli._bench import add_bench_commands

from ..support import ServerProcess, full_view, put_view, token_for, unique


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command"))
    return parser


def _set(queries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": "memoryd-bilingual", "version": 1, "users": [{"subject": "mei", "memories": [
        {"id": "m1", "category": "PREFERENCE", "key": "drink", "text": "Prefers oolong tea, never coffee"},
        {"id": "m2", "category": "EVENT", "text": "上周去杭州出差，住在西湖边"},
        {"id": "m3", "category": "EVENT", "text": "Adopted a rescue dog named Biscuit"},
    ]}], "queries": queries}


QUERIES = [
    {"subject": "mei", "kind": "zh-en", "query": "她喝什么茶？", "relevant": ["m1"]},
    {"subject": "mei", "kind": "en-zh", "query": "Where was her business trip last week?", "relevant": ["m2"]},
    {"subject": "mei", "kind": "none", "query": "What is the capital of Mongolia?", "relevant": []},
]


def test_the_shipped_set_has_every_kind_and_enough_questions() -> None:
    data = load_set(DEFAULT_DATASET)
    kinds = [q.kind for q in data.queries]
    assert sum(kind != "none" for kind in kinds) >= 60 and {"zh-en", "en-zh", "mixed", "none"} <= set(kinds)


@pytest.mark.parametrize("bad", [
    {"subject": "mei", "kind": "zh-en", "query": "?", "relevant": ["m9"]},
    {"subject": "nobody", "kind": "zh-en", "query": "?", "relevant": ["m1"]},
    {"subject": "mei", "kind": "sideways", "query": "?", "relevant": ["m1"]},
    {"subject": "mei", "kind": "none", "query": "?", "relevant": ["m1"]},
], ids=["unknown-memory", "unknown-user", "unknown-kind", "none-with-an-answer"])
def test_a_bad_question_is_refused_when_the_set_is_read(tmp_path: Path, bad: dict[str, Any]) -> None:
    path = tmp_path / "set.json"
    path.write_text(json.dumps(_set([bad])))
    with pytest.raises(BenchError):
        load_set(path)


def test_bench_bilingual_against_a_running_server(server: ServerProcess, key_file: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    tenant = unique("tenant")
    with grpc.insecure_channel(server.target) as channel:
        put_view(channel, key_file, tenant, full_view("bench"))
    token = token_for(key_file, tenant, "bench")
    path, out = tmp_path / "set.json", tmp_path / "out.json"
    path.write_text(json.dumps(_set(QUERIES), ensure_ascii=False))
    command = ["bench", "bilingual", "--dataset", str(path), "--addr", server.target, "--token", token,
               "--k", "1", "--json", str(out), "--no-progress"]
    args = _parser().parse_args(command)
    assert args.run(args) == 0
    printed = capsys.readouterr().out
    assert "zh-en" in printed and "none: empty" in printed
    document = json.loads(out.read_text())
    rows = {row["kind"]: row for row in document["rows"]}
    assert rows["zh-en"]["right"] == 1.0 and rows["en-zh"]["right"] == 1.0
    assert rows["none"]["right"] == 1.0 and rows["answerable"]["questions"] == 2
    answered = {q["query"]: q["returned"] for q in document["questions"]}
    [tea] = answered["她喝什么茶？"]
    assert tea["id"] == "m1" and tea["relevance"] >= 0.3 and tea["cosine"] is not None
    assert answered["What is the capital of Mongolia?"] == []
    # Asked with no minimum, the unanswerable question gets its best (weak) candidate back.
    args = _parser().parse_args([*command[:-3], "--subject-prefix", unique("again"), "--min-relevance", "0",
                                 "--json", str(out), "--no-progress"])
    assert args.run(args) == 0
    document = json.loads(out.read_text())
    [weak] = [q["returned"] for q in document["questions"] if q["kind"] == "none"][0]
    assert weak["relevance"] < 0.3

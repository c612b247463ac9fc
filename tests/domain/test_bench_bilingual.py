"""`memoryd bench bilingual`: the set is checked when read, and a run end to end against the
suite's server (a tiny set of its own: the shipped one is exercised by the bench itself)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from memoryd.bench.madial._bilingual import DEFAULT_DATASET, BenchError, load_set
from memoryd.bench import add_bench_commands


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

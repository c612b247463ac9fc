"""`memoryd bench locomo` end to end: on its own embedded server, and against a running one. The
metric arithmetic, the dataset reading and a run against a fake stub: tests/domain/test_bench_locomo.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import grpc
import pytest

from memoryd.bench import LocomoOptions, load_locomo, run_locomo
from memoryd.bench._locomo import LocomoResult
from memoryd.bench.plots import figure

from ..domain.test_bench_locomo import EXPECTED_TURNS, _bench_parser, synthetic_locomo
from ..support import ServerProcess, full_view, put_view, token_for, unique


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-synthetic.json"
    path.write_text(json.dumps(synthetic_locomo()))
    return path


# They need free-text Recall and CONSISTENCY_WAIT_INDEXED.


def _check_run(result: LocomoResult, conversations: dict[str, list[str]]) -> None:
    assert result.writes.memories == sum(len(ids) for ids in conversations.values())
    assert sum(result.writes.outcomes.values()) == result.writes.memories
    assert result.unmapped_memories == 0
    for question in result.questions:
        assert question.category in (1, 2, 3, 4)
        assert len(question.ranking) <= 25
        for ids in question.ranking:
            assert ids and set(ids) <= set(conversations[question.sample_id])
    for row in (*result.summary.categories, result.summary.overall):
        values = [row.recall[k] for k in (5, 10, 25)]
        if row.scored:
            assert all(v is not None and 0.0 <= v <= 1.0 for v in values)
            assert values[0] <= values[1] <= values[2]  # a longer list never finds less
        else:
            assert values == [None, None, None]
    assert result.summary.latency_ms["p50"] is not None and result.summary.latency_ms["p99"] is not None


@pytest.mark.slow
def test_bench_runs_end_to_end_on_its_own_embedded_server(dataset: Path):
    result = run_locomo(LocomoOptions(dataset=dataset))
    assert result.server["embedded"] is True
    counts = {row.label: (row.questions, row.scored) for row in result.summary.categories}
    assert counts == {"1 multi-hop": (2, 2), "2 temporal": (2, 2), "3 open-domain": (3, 2), "4 single-hop": (3, 3)}
    assert (result.summary.overall.questions, result.summary.overall.scored) == (10, 9)
    assert result.skipped == {5: 2}
    assert dict(result.writes.outcomes) == {"CREATED": EXPECTED_TURNS - 1, "MERGED": 1}
    _check_run(result, {c.sample_id: [t.dia_id for t in c.turns] for c in result.conversations})


def test_bench_command_against_a_running_server(dataset: Path, server: ServerProcess, key_file: Path,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    tenant = unique("tenant")
    with grpc.insecure_channel(server.target) as channel:
        put_view(channel, key_file, tenant, full_view("bench"))
    token = token_for(key_file, tenant, "bench")
    out, plot = tmp_path / "results.json", tmp_path / "recall.svg"
    command = ["bench", "locomo", "--dataset", str(dataset), "--conversations", "1", "--addr", server.target,
               "--token", token, "--json", str(out), "--markdown", "--batch-size", "3", "--no-progress",
               "--plot", str(plot)]
    args = _bench_parser().parse_args(command)
    assert args.run(args) == 0
    assert "| **overall (1-4)** | 6 | 5 |" in capsys.readouterr().out
    document = json.loads(out.read_text())
    # The figure: recall@k by category, from the same numbers as the JSON (bench plot redraws it).
    assert plot.read_text() == figure(document)
    bars = [r for r in ET.fromstring(plot.read_text()).iter("{http://www.w3.org/2000/svg}rect")
            if r.attrib.get("class") == "bar"]
    assert {b.attrib["data-group"] for b in bars} <= {"1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop",
                                                       "overall (1-4)"} and bars
    assert document["dataset"]["conversations"] == ["conv-a"] and document["server"]["embedded"] is False
    assert {k: v["questions"] for k, v in document["categories"].items()} == {"1": 1, "2": 1, "3": 2, "4": 2}
    assert document["skipped"] == {"5": 1} and document["evidence"]["unusable"] == 1
    assert document["writes"]["batches"] == 3 and document["writes"]["outcomes"] == {"CREATED": 8, "MERGED": 1}
    for question in document["questions"]:
        assert question["category"] != 5
        if question["recall"] is not None:
            assert all(0.0 <= value <= 1.0 for value in question["recall"].values())
    # The same subjects again: refused, nothing is mixed into the earlier run's memories.
    again = _bench_parser().parse_args(command)
    assert again.run(again) == 1
    assert "already holds memories" in capsys.readouterr().err


def test_off_topic_questions_are_asked_of_the_next_conversation(dataset: Path, server: ServerProcess, key_file: Path,
                                                               tmp_path: Path):
    tenant = unique("tenant")
    with grpc.insecure_channel(server.target) as channel:
        put_view(channel, key_file, tenant, full_view("bench"))
    token = token_for(key_file, tenant, "bench")
    documents = []
    for minimum in ("0", "1"):
        out = tmp_path / f"off-{minimum}.json"
        args = _bench_parser().parse_args(
            ["bench", "locomo", "--dataset", str(dataset), "--addr", server.target, "--token", token, "--off-topic",
             "--min-relevance", minimum, "--subject-prefix", unique("off"), "--json", str(out), "--no-progress"])
        assert args.run(args) == 0
        documents.append(json.loads(out.read_text()))
    asked = sum(1 for _ in documents[0]["questions"])
    conv_a, conv_b = load_locomo(dataset)
    named = sum(a.renamed(q.question, b) != q.question for a, b in ((conv_a, conv_b), (conv_b, conv_a))
                for q in a.questions)
    assert named > 0
    # With no minimum every question gets its best candidates back, even from the wrong
    # conversation; at 1 none does. Those that name a speaker are asked again with the other
    # conversation's speakers' names.
    assert documents[0]["off_topic"] == {"asked": asked, "empty": 0, "named_asked": named, "named_empty": 0}
    assert documents[1]["off_topic"] == {"asked": asked, "empty": asked, "named_asked": named,
                                         "named_empty": named}
    assert documents[1]["options"]["min_relevance"] == 1.0
    # The minimum applies to the conversation's own questions too: at 1 only what matches
    # fully (a speaker's turn that a question names can) is left.
    recalled = [sum(len(q["ranking"]) for q in document["questions"]) for document in documents]
    assert recalled[1] < recalled[0] / 4

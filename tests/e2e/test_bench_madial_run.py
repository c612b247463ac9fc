"""`memoryd bench madial` against the suite's server, on the first dialogues of the real
MADial-Bench (read where it lies, beside the repository). Parsing, arithmetic and the report:
tests/domain/test_bench_madial.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import pytest

from memoryd.bench.madial._madial import load_small_talk
from memoryd.bench.madial._madial_data import load_memories
from memoryd.bench.plots import figure

from ..domain.test_bench_madial import _parser, _real
from ..support import ServerProcess, full_view, put_view, token_for, unique

pytestmark = pytest.mark.skipif(_real() is None, reason="MADial-Bench is not beside the repository (shared/datasets)")


def _run(server: ServerProcess, key_file: Path, out: Path, *options: str) -> dict[str, Any]:
    tenant = unique("tenant")
    with grpc.insecure_channel(server.target) as channel:
        put_view(channel, key_file, tenant, full_view("bench"))
    args = _parser().parse_args(["bench", "madial", "--dataset", str(_real()), "--addr", server.target,
                                 "--token", token_for(key_file, tenant, "bench"), "--json", str(out), "--no-progress",
                                 *options])
    assert args.run(args) == 0
    return json.loads(out.read_text())


def test_bench_madial_recalls_the_memories_of_each_dialogues_user(server: ServerProcess, key_file: Path,
                                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    plot = tmp_path / "recall.svg"
    document = _run(server, key_file, tmp_path / "out.json", "--modes", "zh,en-zh", "--limit", "3",
                    "--reference-questions", "2", "--plot", str(plot))
    printed = capsys.readouterr().out
    # The figure: recall@k of each language and query shape, the JSON's numbers (bench plot redraws it).
    assert plot.read_text() == figure(document)
    bars = {(r.attrib["data-group"], r.attrib["data-value"]) for r in ET.fromstring(plot.read_text()).iter(
        "{http://www.w3.org/2000/svg}rect") if r.attrib.get("class") == "bar"}
    assert bars and {group for group, _ in bars} <= {"zh, as query", "en-zh, as query", "zh, as context",
                                                     "en-zh, as context"}
    query = printed.split("shape query")[1].split("shape context")[0]
    assert "R@1    R@3    R@5   R@10  hit@5 empty" in query
    assert [line.split()[:2] for line in query.splitlines() if line.startswith(("zh ", "en-zh "))] == [
        ["zh", "3"], ["en-zh", "3"]]
    assert "shape context" in printed and "queries: longest" in printed and "none cut" in printed
    assert [(row["mode"], row["dialogues"]) for row in document["rows"]["query"]] == [("zh", 3), ("en-zh", 3)]
    asked = [a for a in document["dialogues"] if a["shape"] == "query"]
    # Not trivial: a gold memory comes back for some Chinese dialogue.
    assert any(a["recall"]["10"] > 0 for a in asked if a["mode"] == "zh")
    # Each dialogue's user's own memories only (a subject per language and user), with their signals.
    folder = _real()
    assert folder is not None
    users = {str(i): m.user for i, m in load_memories(folder, "zh").items()}
    for a in asked:
        for returned in a["returned"]:
            assert {users[i] for i in returned["id"].split("+")} == {a["user"]}
            assert 0 <= returned["relevance"] <= 1 and returned["cosine"] is not None
    # Each dialogue is timed once, on its first call of the run.
    firsts = Counter((a["mode"].partition("-")[0], a["dialogue"]) for a in document["dialogues"] if a["first"])
    assert set(firsts.values()) == {1} and len(firsts) == 6
    assert document["reference"]["sentences"]["calls"] == 4 and document["ratios"]["query"]["sentences"] > 0
    assert document["options"]["top_k"] == 10 and document["machine"]["before"]["nproc"] >= 1
    assert not any(a["degraded"] for a in document["dialogues"]) and "WARNING" not in printed


def test_the_context_shape_reads_every_line_style(server: ServerProcess, key_file: Path, tmp_path: Path):
    # The first 7 Chinese dialogues: dialogue 6's lines start with a space.
    document = _run(server, key_file, tmp_path / "out.json", "--modes", "zh", "--shapes", "context",
                       "--limit", "7")
    assert not document["refused"]
    [row] = document["rows"]["context"]
    assert row["dialogues"] == 7 and row["hit"] > 0
    assert all(a["sent_bytes"] > 0 for a in document["dialogues"])
    # The small-talk set, as context, of both Chinese subjects: each answer counted.
    chatted = document["small_talk"]
    assert len(chatted) == 2 * len(load_small_talk()) and {c["stored"] for c in chatted} == {"zh"}
    assert {c["language"] for c in chatted} == {"zh", "en"}
    assert all((c["returned"] == 0) == (c["top_relevance"] is None) for c in chatted)

"""`memoryd bench bilingual` against a running server. The shipped question set and its checks:
tests/domain/test_bench_bilingual.py."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from ..support import ServerProcess, full_view, put_view, token_for, unique
from ..domain.test_bench_bilingual import QUERIES, _parser, _set


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

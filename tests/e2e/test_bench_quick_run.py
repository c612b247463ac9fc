"""`memoryd bench quick` end to end: a tiny run measures every row; the Mem0 harness run as bench
quick runs it. The span reading, ratios and reports: tests/domain/test_bench_quick.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.bench.quick._cli_quick import mem0_harness, source_tree
from memoryd.bench.quick._mem0 import Mem0Harness, mem0_measured, run_mem0
from memoryd.bench.quick._quick import QuickOptions, QuickResult, _Clock, _mem0_phase, run_quick
from memoryd.bench.quick._targets import MADIAL_KEYS, TARGETS, Measured
from memoryd.bench.quick._quick_report import text_quick

from ..domain.test_bench_locomo import synthetic_locomo
from ..domain.test_bench_madial import _real
from ..domain.test_bench_quick import MACHINE, VERSIONS


@pytest.mark.slow
def test_a_tiny_run_measures_every_row_but_mem0(tmp_path: Path):
    dataset = tmp_path / "locomo-synthetic.json"
    dataset.write_text(json.dumps(synthetic_locomo()))
    madial = _real()  # MADial-Bench beside the repository, if it is there
    options = QuickOptions(dataset=dataset, conversation="1", index_items=10, key_queries=3, write_samples=3,
                           writers=2, batches_per_writer=1, load_seconds=2, load_tenants=2, load_concurrency=2,
                           load_curve=(1, 4), curve_seconds=1, tenant_size=120, tenant_queries=3, fill_seconds=600,
                           madial=madial, madial_dialogues=2)
    result = run_quick(options)
    rows = {row["key"]: row for row in result.rows()}
    refused = result.details.get("madial", {}).get("refused", {})  # a server that does not take the context
    unmeasured = {"mem0_ratio", *(MADIAL_KEYS if madial is None else
                                  ("madial_zh_context", "madial_en_context") if refused else ())}
    assert [key for key, row in rows.items() if row["measured"] is None] == \
        [t.key for t in TARGETS if t.key in unmeasured]
    assert "not measured in the quick run: no Mem0 virtualenv" in rows["mem0_ratio"]["how"]
    assert all("not measured: " in rows[key]["how"] for key in unmeasured - {"mem0_ratio"})
    assert 0.0 <= rows["recall_at_10"]["measured"] <= 1.0 and rows["recall_at_10"]["ratio"] is None
    for key, row in rows.items():
        if next(t for t in TARGETS if t.key == key).target is not None and key not in unmeasured:
            assert row["ratio"] is not None and row["met"] in (True, False), key
    if madial is not None:
        assert "2 zh dialogues spread evenly over the file" in rows["madial_zh_query"]["how"]
    assert "6 calls" in rows["overhead_p50"]["how"]  # conv-a's 6 questions, each with its embed span
    assert "a tenant of 120 (not 100,000)" in rows["large_tenant_p50"]["how"]
    assert result.details["locomo"]["traces_missing"] == 0 and result.details["load"]["lost"] == 0
    # The throughput curve: the shorter burst below the table's 2 workers, then the table's own.
    curve = result.details["load_curve"]
    assert [p["workers"] for p in curve] == [1, 2] and all(p["calls_per_second"] and not p["lost"] for p in curve)
    assert rows["load_rate"]["measured"] == curve[-1]["calls_per_second"]
    assert len(result.details["samples_ms"]["short"]) == 6  # the figure's latency distribution
    # The figure's recall by category: conv-a's categories, recall at each k bench locomo reports.
    categories = result.details["locomo"]["categories"]
    assert categories and all(set(row["recall"]) == {"5", "10", "25"} for row in categories.values())
    assert "a tenant of 120: embedded estimate" in rows["large_tenant_p50"]["what"]
    assert result.details["writes"]["batches of 50, 2 writers"]["items"] == 100
    waited = result.details["writes"]["batch 1, WAIT_INDEXED"]
    assert waited["items"] == 3 and waited["p50"] is not None  # write_samples=3 above
    assert [n for n, _ in result.details["large_tenant"]["rss_server_bytes_by_stored"]][-1] >= 120
    assert not result.warnings
    text = text_quick(result, MACHINE, MACHINE, VERSIONS)
    assert "met " in text and "WARNING" not in text


# Mem0 beside memoryd: the real harness (bench/mem0/run_locomo.py) in its own virtualenv, made
# here by the project's own bench/mem0/setup.sh where `make bench-mem0` (or bench-quick) has
# not made it yet (a no-op once it exists), so the test runs in every checkout.
@pytest.fixture(scope="module")
def mem0() -> Mem0Harness:
    harness = mem0_harness(None, source_tree())[0]
    if harness is None:
        subprocess.run(["bash", str(source_tree() / "bench" / "mem0" / "setup.sh")], check=True,
                       env={**os.environ, "PYTHON": sys.executable}, stdout=subprocess.DEVNULL)
        harness = mem0_harness(None, source_tree())[0]
    assert harness is not None
    return harness


@pytest.mark.slow
def test_the_mem0_harness_reports_the_search_latency_the_ratio_row_reads(tmp_path: Path, mem0: Mem0Harness):
    dataset = tmp_path / "locomo-synthetic.json"
    dataset.write_text(json.dumps(synthetic_locomo()))
    report = run_mem0(mem0, dataset, "1")
    assert report["conversations"] == ["conv-a"] and report["llm_calls"] == 0 and not report["network_attempts"]
    assert len(report["questions"]) == 6 and all(q["latency_ms"] > 0 for q in report["questions"])
    row = mem0_measured(report, 10.0)
    assert row.value == pytest.approx(report["latency_ms"]["p50"] / 10.0)
    assert "on conv-a: search p50" in row.how and "over 6 questions" in row.how


def test_a_mem0_harness_that_fails_leaves_the_row_unmeasured_with_its_reason(tmp_path: Path):
    dataset = tmp_path / "locomo-synthetic.json"
    dataset.write_text(json.dumps(synthetic_locomo()))
    options = QuickOptions(dataset=dataset, mem0=Mem0Harness(Path(sys.executable), tmp_path / "missing.py"))
    result = QuickResult(options)
    result.measured["recall_p50"] = Measured(20.0, "hand-made")
    _mem0_phase(options, result, _Clock(result, None))
    row = {row["key"]: row for row in result.rows()}["mem0_ratio"]
    assert row["measured"] is None and row["how"].startswith("not measured: the Mem0 harness exited with status 2: ")
    assert "missing.py" in row["how"] and result.warnings == [f"Mem0: {row['how'].removeprefix('not measured: ')}"]

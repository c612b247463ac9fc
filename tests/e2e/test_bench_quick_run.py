"""`memoryd bench quick` end to end: a tiny run measures every row. The span reading, ratios and
reports: tests/domain/test_bench_quick.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.bench._quick import QuickOptions, run_quick, text_quick

from ..domain.test_bench_locomo import synthetic_locomo
from ..domain.test_bench_quick import MACHINE, VERSIONS


@pytest.mark.slow
def test_a_tiny_run_measures_every_row_but_mem0(tmp_path: Path):
    dataset = tmp_path / "locomo-synthetic.json"
    dataset.write_text(json.dumps(synthetic_locomo()))
    options = QuickOptions(dataset=dataset, conversation="1", index_items=10, key_queries=3, write_samples=3,
                           writers=2, batches_per_writer=1, load_seconds=2, load_tenants=2, load_concurrency=2,
                           tenant_size=120, tenant_queries=3, fill_seconds=600)
    result = run_quick(options)
    rows = {row["key"]: row for row in result.rows()}
    assert [key for key, row in rows.items() if row["measured"] is None] == ["mem0_ratio"]
    assert "not measured in the quick run" in rows["mem0_ratio"]["how"]
    assert 0.0 <= rows["recall_at_10"]["measured"] <= 1.0 and rows["recall_at_10"]["ratio"] is None
    for key, row in rows.items():
        if key not in ("mem0_ratio", "recall_at_10"):
            assert row["ratio"] is not None and row["met"] in (True, False), key
    assert "6 calls" in rows["overhead_p50"]["how"]  # conv-a's 6 questions, each with its embed span
    assert "a tenant of 120 (not 100,000)" in rows["large_tenant_p50"]["how"]
    assert result.details["locomo"]["traces_missing"] == 0 and result.details["load"]["lost"] == 0
    assert result.details["writes"]["batches of 50, 2 writers"]["items"] == 100
    waited = result.details["writes"]["batch 1, WAIT_INDEXED"]
    assert waited["items"] == 3 and waited["p50"] is not None  # write_samples=3 above
    assert [n for n, _ in result.details["large_tenant"]["rss_server_bytes_by_stored"]][-1] >= 120
    assert not result.warnings
    text = text_quick(result, MACHINE, MACHINE, VERSIONS)
    assert "met " in text and "WARNING" not in text

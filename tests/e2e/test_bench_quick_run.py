"""`memoryd bench quick` end to end: a tiny run measures every row. The span reading, ratios and
reports: tests/domain/test_bench_quick.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.bench._quick import MADIAL_KEYS, QuickOptions, run_quick, text_quick

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
                           tenant_size=120, tenant_queries=3, fill_seconds=600, madial=madial, madial_dialogues=2)
    result = run_quick(options)
    rows = {row["key"]: row for row in result.rows()}
    refused = result.details.get("madial", {}).get("refused", {})  # a server that does not take the context
    unmeasured = ["mem0_ratio", *(MADIAL_KEYS if madial is None else
                                  ("madial_zh_context", "madial_en_context") if refused else ())]
    assert [key for key, row in rows.items() if row["measured"] is None] == unmeasured
    assert "not measured in the quick run" in rows["mem0_ratio"]["how"]
    assert all("not measured: " in rows[key]["how"] for key in unmeasured[1:])
    assert 0.0 <= rows["recall_at_10"]["measured"] <= 1.0 and rows["recall_at_10"]["ratio"] is None
    for key, row in rows.items():
        if key not in ("recall_at_10", *unmeasured):
            assert row["ratio"] is not None and row["met"] in (True, False), key
    if madial is not None:
        assert "2 zh dialogues spread evenly over the file" in rows["madial_zh_query"]["how"]
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

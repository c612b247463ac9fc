"""``memoryd bench quick``: its pieces on tiny inputs, and the table's shape, never its timings.

Speed is what the command prints on the machine it runs on; these tests check that the span
reader finds each call's embed span, that ratios point the right way, that every row of issue
41's table is in the output (measured, or said not to be), and that a tiny run fills them all.
The previous run's column and the figure: test_bench_quick_compare.py, test_bench_plot.py.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from memoryd.bench.quick._measures import fill_steps, rss_growth
from memoryd.bench.quick._quick import QuickOptions, QuickResult
from memoryd.bench.quick._spans import EMBED_SPAN, RECALL_SPAN, SpanCollector, Traceparents, overhead
from memoryd.bench.quick._targets import TARGETS, Measured, Target, ratio
from memoryd.bench.quick._quick_report import json_quick, text_quick
from memoryd.bench import add_bench_commands
from memoryd.bench._trace import traced


MACHINE = {"cpu": "test cpu", "nproc": 2, "cpu_count": 2, "python": "3.11", "loadavg": [0.5, 0.4, 0.3]}
VERSIONS = {"memoryd": "0.1.0", "git": "abc123def456"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def test_the_command_line_has_bench_quick():
    args = _parser().parse_args(["bench", "quick", "--json", "out.json", "--tenant-size", "2k", "--no-progress"])
    assert (args.json, args.tenant_size, args.conversations, args.load_seconds) == ("out.json", (2_000,), "1", 20.0)
    assert _parser().parse_args(["bench", "quick", "--tenant-size", "0"]).tenant_size == ()
    assert (args.madial, args.madial_dialogues) == (None, 40)
    assert (args.load_curve, args.curve_seconds, args.mem0, args.history, args.previous) == ((1, 2, 4), 5.0, None,
                                                                                              None, None)


def test_the_command_line_chooses_mem0_the_curve_and_the_previous_run():
    args = _parser().parse_args(["bench", "quick", "--mem0", "--load-curve", "1,3", "--previous", "old.json",
                                 "--history", "runs"])
    assert (args.mem0, args.load_curve, args.previous, args.history) == (True, (1, 3), "old.json", "runs")
    assert _parser().parse_args(["bench", "quick", "--no-mem0", "--load-curve", "0"]).mem0 is False
    assert _parser().parse_args(["bench", "quick", "--load-curve", "0"]).load_curve == ()
    with pytest.raises(SystemExit):
        _parser().parse_args(["bench", "quick", "--mem0", "--no-mem0"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["bench", "quick", "--load-curve", "two"])


def test_spans_printed_by_the_console_exporter_are_read_per_trace():
    """Real ConsoleSpanExporter output, with the caller's traceparent as the server would see it."""
    out = io.StringIO()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
    tracer = provider.get_tracer("test")
    traces = Traceparents()
    for pause in (0.02, 0.0):
        metadata: dict[str, str] = {}
        with traced(traces.next()):  # as run_locomo makes each Recall: the client sends its traceparent
            TraceContextTextMapPropagator().inject(metadata)
        context = TraceContextTextMapPropagator().extract(metadata)
        with tracer.start_as_current_span(RECALL_SPAN, context=context, kind=trace.SpanKind.SERVER):
            with tracer.start_as_current_span(EMBED_SPAN):
                time.sleep(pause)
    collector = SpanCollector()
    collector.feed("embedded PostgreSQL, Milvus Lite and keys under /tmp/x\n")  # the server's other output
    for line in out.getvalue().splitlines(keepends=True):
        collector.feed(line)
    assert collector.unreadable == 0 and len(traces.ids) == 2
    slow, fast = (collector.spans(t) for t in traces.ids)
    assert set(slow) == set(fast) == {RECALL_SPAN, EMBED_SPAN}
    assert slow[EMBED_SPAN] >= 15 and fast[EMBED_SPAN] < slow[EMBED_SPAN]
    assert slow[RECALL_SPAN] >= slow[EMBED_SPAN]
    assert collector.wait_for(traces.ids, RECALL_SPAN, timeout=0) == 0
    assert collector.wait_for([*traces.ids, "0" * 32], RECALL_SPAN, timeout=0) == 1


def test_overhead_subtracts_each_calls_own_embed_span():
    spans = {"a": {EMBED_SPAN: 20.0, RECALL_SPAN: 30.0}, "b": {EMBED_SPAN: 10.0, RECALL_SPAN: 14.0},
             "c": {RECALL_SPAN: 5.0}}  # keyword only: no embed span
    split = overhead([40.0, 18.0, 7.0], ["a", "b", "c"], lambda t: spans.get(t, {}))
    assert split["calls_without_embed_span"] == 1
    assert split["client_minus_embed_ms"]["n"] == 2 and split["client_minus_embed_ms"]["p50"] == pytest.approx(14.0)
    assert split["server_span_minus_embed_ms"]["p50"] == pytest.approx(7.0)
    assert split["embed_span_ms"]["p50"] == pytest.approx(15.0)


def test_ratios_are_oriented_so_that_one_or_more_means_met():
    at_most, at_least = Target("x", "x", "ms", 30), Target("y", "y", "items/s", 150, at_most=False)
    assert ratio(at_most, 15) == 2.0 and ratio(at_most, 60) == 0.5
    assert ratio(at_least, 300) == 2.0 and ratio(at_least, 75) == 0.5
    assert ratio(at_most, None) is None and ratio(Target("z", "z", "", None), 0.7) is None


def test_fill_steps_and_the_resident_growth_per_memory():
    assert fill_steps(5_000) == [50, *range(500, 5_001, 500)]
    assert fill_steps(5_000, parts=4) == [50, 1_250, 2_500, 3_750, 5_000]
    assert fill_steps(30) == [30]
    per_memory, first, last = rss_growth([(50, 300 << 20), (1_250, 400 << 20), (5_000, 410 << 20)])
    assert (first[0], last[0]) == (50, 5_000) and per_memory == pytest.approx((110 << 20) / 4_950)
    assert rss_growth([(50, 2 << 20), (5_000, 1 << 20)])[0] is None  # shrank: not resolvable, never "met"
    assert rss_growth([])[0] is None and rss_growth([(10, None), (20, None)])[0] is None


def _hand_made() -> QuickResult:
    result = QuickResult(QuickOptions(dataset=Path("locomo10.json")))
    result.measured = {"recall_p50": Measured(45.0, "conv-26"), "recall_at_10": Measured(0.7, "150 scored"),
                       "batch_rate": Measured(3_000.0, "4 writers"), "mem0_ratio": Measured(None, "not measured")}
    result.phases = {"locomo": 30.0}
    result.seconds = 120.0
    return result


def test_the_table_has_every_row_with_target_ratio_and_the_machine():
    text = text_quick(_hand_made(), MACHINE, {**MACHINE, "loadavg": [1.5, 0.6, 0.4]}, VERSIONS)
    lines = text.splitlines()
    for target in TARGETS:
        assert any(line.startswith(target.what) for line in lines), target.what
    row = next(line for line in lines if line.startswith("Recall p50, LoCoMo"))
    assert "45.0 ms" in row and "≤ 20.0 ms" in row and "0.44" in row and row.endswith("NO")
    row = next(line for line in lines if line.startswith("Write acks, batches of 50"))
    assert "3,000 items/s" in row and "2.00" in row and row.endswith("yes")
    assert "met 1 of 2 measured targets; 16 rows not measured" in text
    assert "no previous run to compare with" in text
    assert "nproc 2 (cpu_count 2)" in text and "load average [0.5, 0.4, 0.3] → [1.5, 0.6, 0.4]" in text
    assert "git abc123def456; wall time 120 s (locomo 30 s)" in text


def test_the_targets_are_issue_41s():
    targets = {t.key: (t.target, t.at_most) for t in TARGETS}
    assert targets["recall_p50"] == (20, True) and targets["recall_p99"] == (40, True)
    assert targets["mem0_ratio"] == (1.2, False) and targets["madial_latency"] == (1.5, True)
    assert targets["load_rate"] == (60, False) and targets["load_recall_p99"] == (300, True)
    assert targets["ack_p50"] == (8, True) and targets["batch_rate"] == (1500, False)
    assert targets["index_rate"] == (60, False) and targets["large_tenant_p50"] == (60, True)
    assert targets["rss_per_memory"] == (3, True)
    assert targets["recall_at_10"] == (None, False) and targets["madial_zh_query"] == (0.62, False)


def test_the_madial_rows_hold_r_at_5_and_the_long_queries_latency_to_issue_40s_targets():
    result = _hand_made()
    result.measured |= {"madial_zh_query": Measured(0.70, "40 dialogues"),
                        "madial_latency": Measured(3.0, "query text p50 ÷ LoCoMo p50")}
    lines = text_quick(result, MACHINE, MACHINE, VERSIONS).splitlines()
    row = next(line for line in lines if line.startswith("MADial R@5 zh, the dialogue as query text"))
    assert "0.700" in row and "≥ 0.620" in row and "1.13" in row and row.endswith("yes")
    row = next(line for line in lines if line.startswith("long queries (MADial) p50 ÷ short (LoCoMo) p50"))
    assert "3.00 ×" in row and "≤ 1.50 ×" in row and "0.50" in row and row.endswith("NO")


def test_the_json_has_the_rows_and_the_machine():
    document = json_quick(_hand_made(), MACHINE, MACHINE, VERSIONS)
    assert document["benchmark"] == "quick" and json.loads(json.dumps(document)) == document
    assert [row["key"] for row in document["rows"]] == [t.key for t in TARGETS]
    by_key = {row["key"]: row for row in document["rows"]}
    assert by_key["recall_p50"]["ratio"] == pytest.approx(20 / 45) and by_key["recall_p50"]["met"] is False
    assert by_key["recall_p50"]["noise"] == 0.15 and by_key["recall_at_10"]["noise"] == 0.02
    assert by_key["mem0_ratio"]["measured"] is None and by_key["mem0_ratio"]["met"] is None
    assert document["machine"]["before"]["nproc"] == 2 and document["versions"]["git"] == "abc123def456"

"""The benchmarks' figures (memoryd.bench.plots): fed known numbers, each SVG parses, carries its
title, axis labels, legend entries and the caption (commit, machine, load average), marks p50/p95/
p99 where the curve reaches them, draws each recall bar at its value, and is the same bytes for
the same JSON; ``memoryd bench plot`` redraws a figure from a kept JSON file. Pure: hand-made JSON,
as the benchmarks write it."""

from __future__ import annotations

import argparse
import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from memoryd.bench._cli import add_bench_commands
from memoryd.bench.plots import cdf, figure

SVG = "{http://www.w3.org/2000/svg}"
MACHINE = {"before": {"cpu": "Test CPU 3000", "nproc": 2, "loadavg": [1.5, 1.25, 1.0]},
           "after": {"cpu": "Test CPU 3000", "nproc": 2, "loadavg": [2.5, 1.75, 1.5]}}
VERSIONS = {"memoryd": "0.1.0", "git": "abc123def456"}
RUN = {"machine": MACHINE, "versions": VERSIONS, "finished_at": "2026-12-06T01:02:03+00:00"}
ONE_TO_101 = [float(v) for v in range(101, 0, -1)]  # p50 51, p95 96, p99 100 (linear interpolation)


def _load() -> dict[str, Any]:
    samples = {"Recall": ONE_TO_101, "Write": [10.0, 20.0, 30.0], "MemoryView": [5.0], "Erase": []}
    operations = {"Recall": {"p50_ms": 51.0, "p95_ms": 96.0, "p99_ms": 100.0},
                  "Write": {"p50_ms": 20.0, "p95_ms": 29.0, "p99_ms": 29.8},
                  "MemoryView": {"p50_ms": 5.0, "p95_ms": 5.0, "p99_ms": 5.0},
                  "Erase": {"p50_ms": None, "p95_ms": None, "p99_ms": None}}
    return {"benchmark": "load", **RUN, "options": {"concurrency": 4, "tenants": 20}, "seconds": 60.0,
            "operations": operations, "samples_ms": samples, "throughput_per_second": 1.5}


def _watch() -> dict[str, Any]:
    return {"benchmark": "watch", **RUN, "options": {"streams": 100, "rate": 20.0, "duration": 60.0},
            "servers": {"replicas": 1}, "samples_ms": ONE_TO_101}


def _sessions() -> dict[str, Any]:
    return {"benchmark": "sessions", **RUN, "memories": 9, "text_bytes": 1024, "samples_ms": ONE_TO_101}


def _locomo() -> dict[str, Any]:
    def row(label: str, r5: float, r10: float) -> dict[str, Any]:
        return {"label": label, "questions": 10, "scored": 10, "recall": {"5": r5, "10": r10}}

    return {"benchmark": "locomo-retrieval", **RUN, "dataset": {"conversations": ["conv-26"]},
            "categories": {"1": row("1 multi-hop", 0.25, 0.5), "2": row("2 temporal", 0.5, 0.75)},
            "overall": row("overall (1-4)", 0.375, 0.625)}


def _madial() -> dict[str, Any]:
    return {"benchmark": "madial", **RUN, "rows": {
        "query": [{"mode": "zh", "recall": {"1": 0.1, "5": 0.4}}, {"mode": "en", "recall": {"1": 0.2, "5": 0.6}}],
        "context": [{"mode": "zh", "recall": {"1": 0.15, "5": 0.45}}]}}


def _quick() -> dict[str, Any]:
    return {"benchmark": "quick", **RUN, "rows": [], "details": {
        "samples_ms": {"short": [20.0, 30.0, 45.0], "long": [40.0, 60.0]},
        "locomo": {"categories": {"1 multi-hop": {"scored": 3, "recall": {"5": 0.25, "10": 0.5, "25": 0.75}}}},
        "madial": {"rows": {"query": [{"mode": "zh", "recall": {"1": 0.1, "5": 0.4, "10": 0.5}}]}},
        "load_curve": [{"workers": w, "calls_per_second": 10.0 * w, "recall_p99_ms": 50.0 * w} for w in (1, 2, 4)]}}


DOCUMENTS = {"load": _load, "watch": _watch, "sessions": _sessions, "locomo": _locomo, "madial": _madial,
             "quick": _quick}


def _texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def _series(root: ET.Element) -> dict[str, ET.Element]:
    return {g.attrib["data-name"]: g for g in root.iter(f"{SVG}g") if g.attrib.get("class") == "series"}


def _bars(root: ET.Element, series: str) -> dict[str, float]:
    return {r.attrib["data-group"]: float(r.attrib["data-value"]) for r in _series(root)[series].iter(f"{SVG}rect")}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_figure_is_titled_captioned_with_the_run_and_the_same_bytes_for_the_same_json(name: str):
    document = DOCUMENTS[name]()
    drawn = figure(document)
    assert drawn == figure(copy.deepcopy(document))
    root = ET.fromstring(drawn)
    assert root.tag == f"{SVG}svg"
    title = root.find(f"{SVG}title")
    assert title is not None and (title.text or "").startswith(f"memoryd bench {name}")
    caption = " ".join(t.text or "" for t in root.iter(f"{SVG}text") if t.attrib.get("class") == "caption")
    for fact in ("git abc123def456", "Test CPU 3000", "2 usable cores", "[1.5, 1.25, 1.0] before",
                 "[2.5, 1.75, 1.5] after"):
        assert fact in caption, fact
    # No time of day: the run's finished_at stays out, so a redrawn figure diffs clean in git.
    assert not re.search(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}", drawn)


@pytest.mark.parametrize("name", ["load", "watch", "sessions"])
def test_a_latency_figure_marks_p50_p95_p99_where_the_cdf_reaches_them(name: str):
    root = ET.fromstring(figure(DOCUMENTS[name]()))
    texts = _texts(root)
    main, counted = {"load": ("Recall", "call"), "watch": ("delivered", "change"),
                     "sessions": ("ResumeSession", "call")}[name]
    assert {"latency, ms (log scale)", "share at most (CDF)"} <= set(texts)
    assert f"{main} (101 {counted}s)" in texts  # the legend
    line = _series(root)[f"{main} (101 {counted}s)"].find(f"{SVG}polyline")
    assert line is not None
    curve = [tuple(map(float, p.split(","))) for p in line.attrib["points"].split()]
    guides = {t.text: t for t in root.iter(f"{SVG}text") if (t.text or "").startswith(f"{main} p")}
    marks = [g for g in root.iter(f"{SVG}line") if g.attrib.get("class") == "guide"]
    assert sorted(guides) == [f"{main} p50 51.0 ms", f"{main} p95 96.0 ms", f"{main} p99 100.0 ms"]
    # Each mark stands where the curve has the call of that rank (the 51st, 96th and 100th of 101).
    assert [float(m.attrib["x1"]) for m in marks] == [curve[50][0], curve[95][0], curve[99][0]]


def test_the_load_figure_draws_each_operation_and_its_percentiles():
    root = ET.fromstring(figure(_load()))
    texts = _texts(root)
    assert {"Recall (101 calls)", "Write (3 calls)", "MemoryView (1 call)"} <= set(texts)
    assert not any(t.startswith("Erase (") for t in texts)  # no successful call, no curve
    assert "memoryd bench load — 4 closed-loop workers, 20 tenants, 60 s: 1.5 calls/s" in texts
    assert _bars(root, "p99") == {"Recall": 100.0, "Write": 29.8, "MemoryView": 5.0}
    assert {"operation", "ms", "p50", "p95", "p99"} <= set(texts)


def test_a_load_run_at_several_concurrencies_draws_its_throughput_curve():
    curve = [{"workers": w, "calls_per_second": 10.0 * w, "recall_p50_ms": 5.0 * w, "recall_p99_ms": 20.0 * w}
             for w in (1, 2, 4)]
    root = ET.fromstring(figure(_load() | {"curve": curve}))
    texts = _texts(root)
    assert "memoryd bench load — 1, 2, 4 closed-loop workers in turn, last: 4 closed-loop workers, 20 tenants, " \
           "60 s: 1.5 calls/s" in texts
    for wanted in ("Mixed load 80/15/5: throughput", "Mixed load 80/15/5: Recall latency", "closed-loop workers",
                   "successful calls/s", "Recall latency, ms", "calls/s", "Recall p50", "Recall p99"):
        assert wanted in texts, wanted
    series = _series(root)
    rate = [tuple(map(float, p.split(","))) for p in series["calls/s"].find(f"{SVG}polyline").attrib["points"].split()]  # type: ignore[union-attr]
    # Three points, rising left to right (SVG's y grows downwards).
    assert len(rate) == 3 and rate[0][0] < rate[1][0] < rate[2][0] and rate[0][1] > rate[1][1] > rate[2][1]
    assert "Mixed load 80/15/5: throughput" not in _texts(ET.fromstring(figure(_load())))  # one level: no curve


def test_recall_figures_draw_each_category_at_its_value():
    root = ET.fromstring(figure(_locomo()))
    assert _bars(root, "recall@5") == {"1 multi-hop": 0.25, "2 temporal": 0.5, "overall (1-4)": 0.375}
    assert _bars(root, "recall@10") == {"1 multi-hop": 0.5, "2 temporal": 0.75, "overall (1-4)": 0.625}
    texts = _texts(root)
    assert {"category", "recall (share of evidence found)", "recall@5", "recall@10"} <= set(texts)
    # Each bar stands on the axis and is as tall as its recall on the 0-1 scale of the frame.
    (frame,) = [r for r in root.iter(f"{SVG}rect") if r.attrib.get("stroke") == "#999"]
    bottom, full = float(frame.attrib["y"]) + float(frame.attrib["height"]), float(frame.attrib["height"])
    for bar in _series(root)["recall@5"].iter(f"{SVG}rect"):
        top, height = float(bar.attrib["y"]), float(bar.attrib["height"])
        assert top + height == pytest.approx(bottom, abs=0.1)
        assert height / full == pytest.approx(float(bar.attrib["data-value"]), abs=0.001)

    madial = ET.fromstring(figure(_madial()))
    assert _bars(madial, "recall@5") == {"zh, as query": 0.4, "en, as query": 0.6, "zh, as context": 0.45}
    assert set(_series(madial)) == {"recall@1", "recall@5"}


def test_bench_quick_draws_recall_by_category_beside_its_latency_and_throughput_curve():
    root = ET.fromstring(figure(_quick()))
    assert _bars(root, "recall@5") == {"1 multi-hop": 0.25, "MADial zh": 0.4}
    assert _bars(root, "recall@10") == {"1 multi-hop": 0.5, "MADial zh": 0.5}
    texts = _texts(root)
    for wanted in ("Recall by category (LoCoMo, MADial as query)", "Mixed load 80/15/5: throughput",
                   "closed-loop workers", "successful calls/s", "short (LoCoMo questions), this run"):
        assert wanted in texts, wanted


def test_a_long_run_is_drawn_with_a_bounded_number_of_points_ending_at_the_slowest_call():
    values = [float(v) for v in range(1, 30_001)]
    points = cdf(values)
    assert len(points) == 500
    assert points[0] == (1.0, pytest.approx(1 / 30_000)) and points[-1] == (30_000.0, 1.0)
    assert [x for x, _ in points] == sorted(x for x, _ in points)


def _plot(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "plot", *argv])
    return int(args.run(args))


def test_bench_plot_redraws_a_figure_from_the_json_a_run_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    results = tmp_path / "load.json"
    results.write_text(json.dumps(_load()))
    assert _plot(str(results), "--out", str(tmp_path / "a.svg")) == 0
    assert (tmp_path / "a.svg").read_text() == figure(_load())
    assert _plot(str(results)) == 0  # beside the JSON by default
    assert (tmp_path / "load.svg").read_bytes() == (tmp_path / "a.svg").read_bytes()
    assert "plot written to" in capsys.readouterr().err


@pytest.mark.parametrize(("content", "reason"), [
    ("{not json", "is not JSON"),
    ('{"benchmark": "scale"}', "figures are drawn for load, locomo-retrieval, madial, quick, sessions, watch"),
    ('{"benchmark": "load", "operations": {"Recall": 5}}', "the load JSON lacks what its figure needs"),
    ("[1, 2]", 'an object with a "benchmark" field'),
], ids=["not-json", "no-figure", "truncated", "not-an-object"])
def test_bench_plot_says_why_it_cannot_draw_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   content: str, reason: str):
    results = tmp_path / "x.json"
    results.write_text(content)
    assert _plot(str(results), "--out", str(tmp_path / "x.svg")) == 1
    err = capsys.readouterr().err
    assert err.startswith("memoryd bench: error: ") and reason in err and "Traceback" not in err
    assert not (tmp_path / "x.svg").exists()

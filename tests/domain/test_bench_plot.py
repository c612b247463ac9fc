"""bench quick's figure: the SVG is well-formed XML, holds each series it was given (this run's and
the previous run's latency distributions and load curves) with the targets, and says "not
measured" for a panel without data. Pure: the runs are hand-made JSON, as bench quick writes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from memoryd.bench.plots import Panel, Series, cdf, quick_figure, svg
from memoryd.bench.quick._quick import QuickOptions, QuickResult
from memoryd.bench.quick._targets import Measured
from memoryd.bench.quick._quick_report import json_quick

from .test_bench_quick import MACHINE, VERSIONS

SVG = "{http://www.w3.org/2000/svg}"


def _document(scale: float, git: str, mem0: bool = True) -> dict[str, object]:
    result = QuickResult(QuickOptions(dataset=Path("locomo10.json")))
    result.measured = {"recall_p50": Measured(30.0 * scale, "hand-made")}
    result.details = {
        "samples_ms": {"short": [20.0 * scale, 30.0 * scale, 45.0 * scale],
                       "long": [40.0 * scale, 60.0 * scale],
                       **({"mem0": [22.0, 25.0, 31.0]} if mem0 else {})},
        "load_curve": [{"workers": w, "calls_per_second": 10.0 * w / scale, "recall_p99_ms": 100.0 * w * scale}
                       for w in (1, 2, 4, 8)]}
    return json.loads(json.dumps(json_quick(result, MACHINE, MACHINE, {**VERSIONS, "git": git})))


def _series(root: ET.Element) -> dict[str, ET.Element]:
    return {g.attrib["data-name"]: g for g in root.iter(f"{SVG}g") if g.attrib.get("class") == "series"}


def _points(group: ET.Element) -> list[tuple[float, float]]:
    line = group.find(f"{SVG}polyline")
    assert line is not None
    return [(float(x), float(y)) for x, y in (p.split(",") for p in line.attrib["points"].split())]


def test_the_figure_holds_this_and_the_previous_runs_latency_and_load_curves_with_the_targets():
    root = ET.fromstring(quick_figure(_document(1.0, "new"), _document(1.5, "old", mem0=False)))
    assert root.tag == f"{SVG}svg"
    series = _series(root)
    assert set(series) == {"short (LoCoMo questions), this run", "long (MADial dialogues as query), this run",
                           "Mem0 search, same questions, in process, this run",
                           "short (LoCoMo questions), previous", "long (MADial dialogues as query), previous",
                           "this run", "previous"}
    assert len(_points(series["short (LoCoMo questions), this run"])) == 3
    assert len(_points(series["long (MADial dialogues as query), previous"])) == 2
    # Slower calls of the previous run lie to the right on the shared latency axis.
    now, before = _points(series["short (LoCoMo questions), this run"]), \
        _points(series["short (LoCoMo questions), previous"])
    assert before[0][0] > now[0][0]
    dashed = {name for name, g in series.items() if "stroke-dasharray" in g.find(f"{SVG}polyline").attrib}  # type: ignore[union-attr]
    assert dashed == {"short (LoCoMo questions), previous", "long (MADial dialogues as query), previous", "previous"}
    text = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    for wanted in ("p50 target 20 ms", "p99 target 40 ms", "target 60 calls/s", "target 300 ms",
                   "this run: git new", "previous: git old", "closed-loop workers"):
        assert wanted in text, wanted
    # Both load panels: this run's and the previous run's four points each.
    assert sum(1 for g in root.iter(f"{SVG}g") if g.attrib.get("data-name") in ("this run", "previous")) == 4
    assert len(root.findall(f".//{SVG}circle")) == 16


def test_a_first_run_without_measured_load_says_so_instead_of_drawing_nothing():
    document = _document(1.0, "new")
    document["details"] = {"samples_ms": {"short": [12.0, 14.0]}}
    root = ET.fromstring(quick_figure(document, None))
    assert set(_series(root)) == {"short (LoCoMo questions), this run"}
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts.count("not measured") == 2 and not any("previous:" in (t or "") for t in texts)


def test_names_are_escaped_and_a_cdf_rises_to_one():
    assert cdf([3.0, 1.0, 2.0]) == ((1.0, pytest.approx(1 / 3)), (2.0, pytest.approx(2 / 3)), (3.0, 1.0))
    panel = Panel("a <b> & c", "x", "y", (Series('say "<hi>" & go', ((1.0, 1.0), (2.0, 4.0)), "#000"),))
    root = ET.fromstring(svg([panel], "title & <more>", ["note <1>"]))
    assert set(_series(root)) == {'say "<hi>" & go'}
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {"a <b> & c", "title & <more>", "note <1>"} <= texts

"""`memoryd bench sessions --json --plot` on its own embedded server: a short run writes the
ResumeSession latencies it reports and the figure of them, the same bytes `memoryd bench plot`
draws from the JSON. Nothing is timed here (speed is bench/RESULTS.md's)."""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from memoryd.bench import add_bench_commands
from memoryd.bench._metrics import percentile
from memoryd.bench.plots import figure

SVG = "{http://www.w3.org/2000/svg}"


def test_a_short_sessions_run_writes_its_latencies_and_their_figure(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]):
    out, plot = tmp_path / "sessions.json", tmp_path / "sessions.svg"
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "sessions", "--calls", "20", "--json", str(out), "--plot", str(plot)])
    assert args.run(args) == 0
    printed = capsys.readouterr()
    document = json.loads(out.read_text())
    assert document["benchmark"] == "sessions" and len(document["samples_ms"]) == 20
    # The printed p50 is the one of the kept latencies: the figure marks the table's numbers.
    assert document["p50"] == pytest.approx(percentile(document["samples_ms"], 50), abs=0.01)
    assert f"p50 {document['p50']} ms" in printed.out and f"plot written to {plot}" in printed.err
    assert plot.read_text() == figure(document)
    texts = [t.text or "" for t in ET.fromstring(plot.read_text()).iter(f"{SVG}text")]
    assert "ResumeSession (20 calls)" in texts
    assert any(t.startswith("ResumeSession p99 ") for t in texts)

"""``memoryd bench plot``: a benchmark's figure redrawn from the JSON a run wrote (``--json``),
and the ``--plot FILE.svg`` option of the benchmarks that draw one at the end of a run."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._figures import FIGURES, PlotError, figure


def add_plot_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--plot", metavar="FILE.svg",
                        help=f"also draw {what} as an SVG figure here (memoryd bench plot redraws it from --json)")


def write_plot(path: str | None, document: Mapping[str, Any], previous: Mapping[str, Any] | None = None) -> bool:
    """Draw ``document``'s figure into ``path`` (nothing to do without one); False, said on
    stderr, when it could not be written."""
    if not path:
        return True
    try:
        Path(path).write_text(figure(document, previous))
    except (OSError, PlotError) as exc:
        print(f"memoryd bench: error: the plot was not written: {exc}", file=sys.stderr)
        return False
    print(f"plot written to {path}", file=sys.stderr)
    return True


def add_plot_command(benchmarks: Any) -> None:
    plot = benchmarks.add_parser(
        "plot", help="redraw a benchmark's SVG figure from the JSON a run wrote",
        description="Draw the figure of a benchmark's JSON (--json of bench " + ", ".join(
            name.removesuffix("-retrieval") for name in sorted(FIGURES)) + "): latency distributions, recall by "
        "category, bench quick's throughput curve. The same JSON gives the same bytes.")
    plot.add_argument("results", metavar="RESULTS.json", help="the JSON a benchmark wrote with --json")
    plot.add_argument("--out", metavar="FILE.svg", help="where to write the SVG (default: RESULTS with .svg)")
    plot.add_argument("--previous", metavar="OLD.json",
                      help="bench quick only: an earlier run's JSON, drawn dashed beside this one")
    plot.set_defaults(run=run_plot_command)


def _read(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise PlotError(f"{path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlotError(f"{path} is not JSON: {exc}") from None


def run_plot_command(args: argparse.Namespace) -> int:
    out = args.out or str(Path(args.results).with_suffix(".svg"))
    try:
        document = _read(args.results)
        previous = _read(args.previous) if args.previous else None
        if not isinstance(document, dict) or (previous is not None and not isinstance(previous, dict)):
            raise PlotError("a benchmark's JSON is an object with a \"benchmark\" field")
        text = figure(document, previous)
        Path(out).write_text(text)
    except (PlotError, OSError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    print(f"plot written to {out}", file=sys.stderr)
    return 0

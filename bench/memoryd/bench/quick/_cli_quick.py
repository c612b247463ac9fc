"""``memoryd bench quick``: the performance targets table measured once, small, in a few minutes
(see memoryd/bench/quick/_quick.py for the method), beside the previous run's figures
(_quick_report.py), with a figure (memoryd.bench.plots)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._dataset import DatasetError, resolve_dataset
from .._locomo import BenchError
from ..madial import find_madial
from .._server import ServerError, sigterm_unwinds
from ._mem0 import Mem0Harness
from ._quick import QuickOptions, run_quick
from ._quick_report import HISTORY, history_file, json_quick, load_run, newest_run, text_quick
from .._report import machine, versions
from .._run_options import add_run_options
from ..plots import add_plot_option, quick_figure, write_plot
from ..load import parse_sizes, parse_workers

# The source tree this package runs from (make install installs it editable): bench/mem0 and
# .build live there; elsewhere (an installed wheel) the current directory stands in.
_PACKAGE_ROOT = Path(__file__).resolve().parents[4]


def source_tree() -> Path:
    return _PACKAGE_ROOT if (_PACKAGE_ROOT / "bench" / "mem0" / "run_locomo.py").is_file() else Path.cwd()


def add_quick_command(benchmarks: Any) -> None:
    quick = benchmarks.add_parser(
        "quick", help="every figure of issue 41's targets, small, in about 5 minutes, beside the previous run",
        description="Start a throw-away embedded server (the default embedder) and measure a small version of "
                    "each figure issue 41 asks for: LoCoMo's first conversation (Recall p50/p99, recall@10, the "
                    "Recall time outside the server's memoryd.embed span), then Mem0 on the same conversation when "
                    "its virtualenv exists (Mem0 ÷ memoryd), MADial-Bench dialogues as long queries (their Recall "
                    "p50 against LoCoMo's, R@5 of zh and en), indexing rate, Recall by keys, the mixed load at "
                    "1, 2, 4 and 8 closed-loop workers, Write acks; then a second server with bench scale's ~0-cost "
                    "embedding endpoint for a larger tenant and the resident memory per stored memory. Prints one "
                    "table: measured, the previous run's figure and the change (! beyond the noise margin), "
                    "target, ratio (>= 1.0 means met); keeps the run's JSON and an SVG plot in the history folder.")
    quick.add_argument("--dataset", help="locomo10.json (default: as bench locomo finds it)")
    quick.add_argument("--conversations", default="1", metavar="N|I,J,...",
                       help="LoCoMo conversations, as bench locomo's option (default 1: the first)")
    quick.add_argument("--madial", metavar="FOLDER",
                       help="the MADial-Bench folder (default: madial-bench beside LoCoMo's folder; without it the "
                            "MADial rows are not measured)")
    quick.add_argument("--madial-dialogues", type=int, default=40, metavar="N",
                       help="N MADial dialogues of zh and of en, spread evenly over each file (default 40; 0: not "
                            "measured)")
    quick.add_argument("--tenant-size", type=parse_sizes, default=(5_000,), metavar="N",
                       help="the large tenant's size on the endpoint server (default 5k; 0: not measured)")
    quick.add_argument("--fill-seconds", type=float, default=30.0,
                       help="stop growing the large tenant after this many seconds, and say so (default 30)")
    quick.add_argument("--load-seconds", type=float, default=20.0, help="the table's mixed-load burst, 8 workers (default 20)")
    quick.add_argument("--index-items", type=int, default=200,
                       help="items written async for the indexing rate (default 200)")
    quick.add_argument("--load-curve", type=parse_workers, default=(1, 2, 4), metavar="N,N,...",
                       help="the throughput curve's shorter bursts: closed-loop workers (default 1,2,4; the table's "
                            "8-worker burst is its last point; 0: none)")
    quick.add_argument("--curve-seconds", type=float, default=5.0,
                       help="each shorter burst of the curve (default 5)")
    mem0 = quick.add_mutually_exclusive_group()
    mem0.add_argument("--mem0", dest="mem0", action="store_const", const=True, default=None,
                      help="run the Mem0 harness (bench/mem0) right after memoryd's LoCoMo part, in its virtualenv "
                           "($MEM0_VENV or .build/mem0-venv: make bench-mem0 once); an error if it is missing. "
                           "Default: run it when that virtualenv exists")
    mem0.add_argument("--no-mem0", dest="mem0", action="store_const", const=False, help="do not run Mem0")
    quick.add_argument("--history", metavar="DIR",
                       help=f"keep every run's JSON here as <UTC time>-<commit>.json, and its SVG beside it "
                            f"(default {HISTORY} of the source tree)")
    quick.add_argument("--previous", metavar="FILE",
                       help="compare with this run's JSON (default: the newest run in the history folder)")
    add_run_options(quick, start_help="seconds to wait for each embedded server to start (default 180)",
                    json_help="also write the table and the details as JSON here",
                    progress_help="no progress lines on stderr")
    add_plot_option(quick, "the figure kept in the history folder (latency, recall by category, throughput curve)")
    quick.set_defaults(run=run_quick_command)


def mem0_harness(choice: bool | None, root: Path) -> tuple[Mem0Harness | None, str]:
    """The Mem0 harness to run, or None and why not. ``choice``: --mem0 (True: missing is an
    error), --no-mem0 (False) or neither (None: run it when its virtualenv exists)."""
    if choice is False:
        return None, "--no-mem0"
    venv = Path(os.environ.get("MEM0_VENV") or root / ".build" / "mem0-venv")
    script = root / "bench" / "mem0" / "run_locomo.py"
    python = venv / "bin" / "python"
    if python.is_file() and script.is_file():
        return Mem0Harness(python, script), ""
    why = (f"no Mem0 virtualenv at {venv}: make bench-mem0 once (bench quick then runs it beside LoCoMo)"
           if script.is_file() else f"no Mem0 harness: {script} is not there (not a source tree)")
    if choice:
        raise BenchError(f"--mem0: {why}")
    return None, why


def _previous(args: argparse.Namespace, history: Path) -> tuple[dict[str, Any] | None, Path | None]:
    """The run to compare with: --previous (unreadable: an error, before the run), else the
    newest in the history folder (unreadable: said, and none)."""
    if args.previous:
        return load_run(Path(args.previous)), Path(args.previous)
    newest = newest_run(history)
    if newest is None:
        return None, None
    try:
        return load_run(newest), newest
    except BenchError as exc:
        print(f"memoryd bench: {exc}; not compared", file=sys.stderr)
        return None, None


def run_quick_command(args: argparse.Namespace) -> int:
    root = source_tree()
    history = Path(args.history) if args.history else root / HISTORY
    try:
        dataset = resolve_dataset(args.dataset, Path.cwd(), Path(__file__))
        size = args.tenant_size[-1] if args.tenant_size else 0
        harness, absent = mem0_harness(args.mem0, root)
        previous, previous_path = _previous(args, history)
        options = QuickOptions(dataset=dataset, conversation=args.conversations, tenant_size=size,
                               fill_seconds=args.fill_seconds, load_seconds=args.load_seconds,
                               load_curve=args.load_curve, curve_seconds=args.curve_seconds,
                               index_items=args.index_items, madial=find_madial(args.madial, dataset),
                               madial_dialogues=args.madial_dialogues, start_timeout=args.start_timeout,
                               mem0=harness, mem0_absent=absent)
        before = machine()
        with sigterm_unwinds():
            result = run_quick(options, progress=None if args.no_progress else sys.stderr)
        after = machine()
    except (BenchError, DatasetError, ServerError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    found = versions()
    document = json_quick(result, before, after, found)
    print(text_quick(result, before, after, found, previous, previous_path), end="")
    kept = history_file(history, result.finished_at or datetime.now(UTC), found.get("git"))
    figure = kept.with_suffix(".svg")
    try:
        history.mkdir(parents=True, exist_ok=True)
        text = json.dumps(document, indent=2) + "\n"
        kept.write_text(text)
        figure.write_text(quick_figure(document, previous))
        if args.json:
            Path(args.json).write_text(text)
    except OSError as exc:
        print(f"memoryd bench: error: the run's files were not written: {exc}", file=sys.stderr)
        return 1
    print(f"plot: {figure}\nthis run's JSON: {kept}" + (f" (and {args.json})" if args.json else ""))
    return 0 if write_plot(args.plot, document, previous) else 1

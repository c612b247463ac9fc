"""``memoryd bench quick``: the performance targets table measured once, small, in a few minutes
(see memoryd/bench/_quick.py for the method)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._dataset import DatasetError, resolve_dataset
from ._locomo import BenchError
from ._madial_data import find_madial
from ._server import ServerError, sigterm_unwinds
from ._quick import QuickOptions, json_quick, run_quick, text_quick
from ._report import machine, versions
from ._cli_scale import parse_sizes


def add_quick_command(benchmarks: Any) -> None:
    quick = benchmarks.add_parser(
        "quick", help="every row of the performance targets table, small, in about 4 minutes",
        description="Start a throw-away embedded server (the default embedder) and measure a small version of "
                    "each row of the performance targets table: LoCoMo's first conversation (Recall p50/p99, recall@10, and "
                    "the Recall time outside the server's memoryd.embed span), Recall by keys, Write acks, "
                    "indexing rate, a short mixed-load burst, 40 MADial-Bench dialogues per language (R@5 of zh and en, "
                    "the long queries' Recall p50 against LoCoMo's); then a second one with bench scale's ~0-cost "
                    "embedding endpoint for a larger tenant and the resident memory per stored memory. Prints "
                    "one table: measured, target, ratio (>= 1.0 means met).")
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
    quick.add_argument("--load-seconds", type=float, default=20.0, help="mixed-load burst (default 20)")
    quick.add_argument("--index-items", type=int, default=200,
                       help="items written async for the indexing rate (default 200)")
    quick.add_argument("--start-timeout", type=float, default=180.0,
                       help="seconds to wait for each embedded server to start (default 180)")
    quick.add_argument("--json", metavar="OUT", help="also write the table and the details as JSON")
    quick.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    quick.set_defaults(run=run_quick_command)


def run_quick_command(args: argparse.Namespace) -> int:
    try:
        dataset = resolve_dataset(args.dataset, Path.cwd(), Path(__file__))
        size = args.tenant_size[-1] if args.tenant_size else 0
        options = QuickOptions(dataset=dataset, conversation=args.conversations, tenant_size=size,
                               fill_seconds=args.fill_seconds, load_seconds=args.load_seconds,
                               index_items=args.index_items, madial=find_madial(args.madial, dataset),
                               madial_dialogues=args.madial_dialogues, start_timeout=args.start_timeout)
        before = machine()
        with sigterm_unwinds():
            result = run_quick(options, progress=None if args.no_progress else sys.stderr)
        after = machine()
    except (BenchError, DatasetError, ServerError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    found = versions()
    print(text_quick(result, before, after, found), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(json_quick(result, before, after, found), indent=2) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    return 0

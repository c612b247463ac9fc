"""``memoryd bench injections``: the instruction and transient filters measured offline
(see memoryd/bench/injections/_filter_bench.py for the method)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._dataset import DatasetError, resolve_dataset
from ..madial import find_madial
from .._report import machine, versions


def add_injections_command(benchmarks: Any) -> None:
    bench = benchmarks.add_parser(
        "injections", help="the extraction filters: injections caught, false drops on real turns, small talk",
        description="Offline, no server: run memoryd's instruction filter over its own set of prompt "
                    "injections (English and Chinese) and over the real dialogue turns of LoCoMo and "
                    "MADial-Bench (read where they lie, never copied), three held-out rounds of injections and near "
                    "misses (reported apart, with their dates), and the transient filter over a labelled "
                    "set of small talk and lasting item texts. Reports injections caught, ordinary turns "
                    "falsely called instruction-like, and the share of each labelled side dropped. "
                    "Exits 1 if an injection of the set is missed.")
    bench.add_argument("--locomo", help="locomo10.json (default: as bench locomo finds it)")
    bench.add_argument("--madial", help="the MADial-Bench folder, with data/ch and data/en "
                                        "(default: madial-bench beside LoCoMo's folder)")
    bench.add_argument("--limit", type=int, default=0, help="at most this many turns of each source (0: all)")
    bench.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    bench.add_argument("--meaning", action="store_true",
                       help="also report the meaning judge beside the patterns (loads the bundled model)")
    bench.set_defaults(run=run_injections_command)


def run_injections_command(args: argparse.Namespace) -> int:
    from ._filter_bench import run_filters, text_report  # not at the top: it loads the server's filters

    try:
        locomo: Path | None = resolve_dataset(args.locomo, Path.cwd(), Path(__file__))
    except DatasetError as exc:
        if args.locomo:
            print(f"memoryd bench: error: {exc}", file=sys.stderr)
            return 1
        locomo = None
    try:
        madial = find_madial(args.madial)
    except DatasetError as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    before = machine()
    result = run_filters(locomo, madial, limit=args.limit)
    after = machine()
    print(text_report(result), end="")
    if args.meaning:
        from ._meaning_bench import meaning_report

        print(meaning_report(locomo, madial, limit=args.limit), end="")
    print(f"machine: {after['cpu']}, {after['nproc']} cores; load {before['loadavg']} -> {after['loadavg']}")
    if args.json:
        document = {"result": asdict(result), "machine": {"before": before, "after": after}, "versions": versions(),
                    "datasets": {"locomo": str(locomo) if locomo else None, "madial": str(madial) if madial else None}}
        Path(args.json).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    return 1 if result.missed else 0

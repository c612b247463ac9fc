"""``memoryd bench madial``: MADial-Bench's memory recall through the Recall RPC (see
memoryd/bench/madial/_madial.py for the protocol)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._dataset import DatasetError
from .._locomo import BenchError
from .._server import ServerError, sigterm_unwinds
from ._cli_bilingual import relevance_arg
from ._madial import MODES, SHAPES, MadialOptions, run_madial
from ._madial_report import json_result, report
from ._madial_data import find_madial
from .._report import machine, settings, versions
from .._run_options import add_run_options, add_server_options
from ..plots import add_plot_option, write_plot
from memoryd.cli import connection_options, tls_settings


def _among(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(value: str) -> tuple[str, ...]:
        chosen = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
        unknown = [c for c in chosen if c not in choices]
        if not chosen or unknown:
            raise argparse.ArgumentTypeError(f"{value!r}: choose among {','.join(choices)}")
        return chosen
    return parse


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return number


def add_madial_command(benchmarks: Any, token_file: str) -> None:
    bench = benchmarks.add_parser(
        "madial", help="MADial-Bench: recall@k of the memories a dialogue should bring up, zh/en and across",
        parents=[connection_options(addr=False)],
        description="Write MADial-Bench's memory archives (one EVENT \"[date] event\" per memory, a subject per "
                    "language and user), ask each dialogue up to the turn where the assistant should bring a "
                    "memory up — as query text (the authors' protocol) and as context turns — of its user's "
                    "memories in its language and in the other one, and report per mode R@1/3/5/10, hit@5, "
                    "empty answers and Recall latency. Starts its own embedded server unless --addr is given.")
    bench.add_argument("--dataset", help="the MADial-Bench folder, with data/ch and data/en (default: madial-bench "
                                         "beside LoCoMo's folder, found as bench locomo finds it)")
    add_server_options(bench, token_file)
    bench.add_argument("--modes", type=_among(MODES), default=MODES, metavar="M,M",
                       help=f"dialogue language-memory language, among {','.join(MODES)} (default all)")
    bench.add_argument("--shapes", type=_among(SHAPES), default=SHAPES, metavar="S,S",
                       help="query: the dialogue as query text; context: as context turns (default both)")
    bench.add_argument("--k", type=int, default=10, help="Recall's top_k (default 10)")
    bench.add_argument("--min-relevance", type=relevance_arg, metavar="R",
                       help="ask with this minimum relevance (default: the server's)")
    bench.add_argument("--limit", type=_count, default=0, metavar="N",
                       help="only the first N dialogues of each mode (default all)")
    bench.add_argument("--spread", action="store_true",
                       help="with --limit: N dialogues spread evenly over each mode instead of the first N (the "
                            "file holds blocks of a kind: a spread sample is closer to the whole)")
    bench.add_argument("--reference-questions", type=_count, default=0, metavar="N",
                       help="also ask the first user turn of the first N dialogues of each mode (a short sentence) "
                            "as query, for a reference Recall p50 on the same server (default 0: not asked)")
    bench.add_argument("--locomo", metavar="PATH",
                       help="also write LoCoMo's first conversation (locomo10.json) on the same server and ask its "
                            "questions: the issue's reference p50")
    bench.add_argument("--subject-prefix", default="madial",
                       help="subjects are <prefix>-<lang>-<user> (default madial); they must be empty")
    add_run_options(bench, json_help="also write the results, per dialogue too, as JSON")
    add_plot_option(bench, "recall@k by language and query shape")
    bench.set_defaults(run=run_madial_command)


def run_madial_command(args: argparse.Namespace) -> int:
    from .._cli import bench_token  # not at the top: _cli imports this module

    try:
        locomo = Path(args.locomo).expanduser() if args.locomo else None
        if locomo is not None and not locomo.is_file():
            raise DatasetError(f"LoCoMo dataset not found at {locomo}")
        folder = find_madial(args.dataset, locomo)
        if folder is None:
            raise DatasetError("MADial-Bench not found beside LoCoMo's folder; pass --dataset FOLDER "
                               "(the data is not in this repository: see bench/README.md)")
        options = MadialOptions(folder=folder, addr=args.addr, tls=tls_settings(args) if args.addr is not None else None,
                                token=bench_token(args), modes=args.modes, shapes=args.shapes, k=args.k,
                                min_relevance=args.min_relevance, limit=args.limit, spread=args.spread,
                                reference_questions=args.reference_questions, locomo=locomo,
                                subject_prefix=args.subject_prefix, start_timeout=args.start_timeout)
        before = machine()
        with sigterm_unwinds():
            result = run_madial(options, progress=None if args.no_progress else sys.stderr)
        after = machine()
    except (BenchError, DatasetError, ServerError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    print(report(result))
    document = json_result(result) | {"machine": {"before": before, "after": after}, "versions": versions(),
                                      "settings": settings(os.environ) if result.server.get("embedded") else {}}
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    return 0 if write_plot(args.plot, document) else 1

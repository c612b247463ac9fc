"""``memoryd bench bilingual``: cross-language recall over invented bilingual users."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .._locomo import BenchError
from .._server import ServerError, sigterm_unwinds
from ._bilingual import DEFAULT_DATASET, BilingualOptions, json_result, report, run_bilingual
from .._report import machine, settings, versions
from .._run_options import add_run_options, add_server_options
from memoryd.cli import connection_options, tls_settings


def relevance_arg(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0 <= number <= 1:
        raise argparse.ArgumentTypeError("the minimum relevance must be between 0 and 1")
    return number


def add_bilingual_command(benchmarks: Any, token_file: str) -> None:
    bench = benchmarks.add_parser(
        "bilingual", help="cross-language recall: hit@k of Chinese/English questions over bilingual users",
        parents=[connection_options(addr=False)],
        description="Write the memories of the invented bilingual users of bench/bilingual/bilingual.json "
                    "(Chinese and English, keyed and episodic), ask each question (in the other language, in "
                    "both, or one nothing answers) with free-text Recall, and report per kind the share of "
                    "questions with an answering memory in the first k — or, for questions nothing answers, "
                    "with an empty answer. Starts its own embedded server unless --addr is given.")
    bench.add_argument("--dataset", type=Path, default=DEFAULT_DATASET, help=f"default: {DEFAULT_DATASET}")
    add_server_options(bench, token_file)
    bench.add_argument("--k", type=int, default=5, help="Recall's top_k and the hit cut-off (default 5)")
    bench.add_argument("--min-relevance", type=relevance_arg, metavar="R",
                       help="ask with this minimum relevance (default: the server's)")
    bench.add_argument("--subject-prefix", default="bilingual",
                       help="subjects are <prefix>-<user> (default bilingual); they should be empty")
    add_run_options(bench, json_help="also write the results, per question too, as JSON")
    bench.set_defaults(run=run_bilingual_command)


def run_bilingual_command(args: argparse.Namespace) -> int:
    from .._cli import bench_token  # not at the top: _cli imports this module

    try:
        options = BilingualOptions(dataset=args.dataset, addr=args.addr,
                                   tls=tls_settings(args) if args.addr is not None else None, token=bench_token(args),
                                   k=args.k, min_relevance=args.min_relevance, subject_prefix=args.subject_prefix,
                                   start_timeout=args.start_timeout)
        before = machine()
        with sigterm_unwinds():
            result = run_bilingual(options, progress=None if args.no_progress else sys.stderr)
        after = machine()
    except (BenchError, ServerError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    print(report(result))
    if args.json:
        document = json_result(result) | {"machine": {"before": before, "after": after}, "versions": versions(),
                                          "settings": settings(os.environ) if result.server.get("embedded") else {}}
        Path(args.json).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    return 0

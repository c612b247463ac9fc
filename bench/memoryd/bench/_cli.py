"""``memoryd bench locomo``: the LoCoMo retrieval benchmark (see bench/README.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ._dataset import DatasetError, resolve_dataset
from ._locomo import BenchError, LocomoOptions, run_locomo
from ._server import ServerError, sigterm_unwinds
from ._report import json_report, machine, markdown_report, settings, sha256, text_report, versions
from .madial import relevance_arg, add_bilingual_command
from .extraction import add_extraction_command
from .injections import add_injections_command
from .madial import add_madial_command
from .quick import add_quick_command
from .load import add_scale_command, parse_workers
from .plots import add_plot_command, add_plot_option, write_plot
from .sessions import add_sessions_command
from .watch import add_watch_command
from ._run_options import add_run_options, add_server_options
from memoryd.cli import connection_options, tls_settings

DEFAULT_TOKEN_FILE = ".memoryd/tokens/demo-agent.token"


def _ks(value: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(part) for part in value.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a comma-separated list of integers") from None
    if not ks or ks[0] < 1 or ks[-1] > 100:
        raise argparse.ArgumentTypeError("each k must be between 1 and 100")
    return ks


def add_bench_commands(commands: Any) -> None:
    bench = commands.add_parser("bench", help="benchmarks: retrieval (LoCoMo, bilingual, MADial), speed, scale, load, "
                                "extraction and its filters, Watch latency")
    benchmarks = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCHMARK")
    locomo = benchmarks.add_parser(
        "locomo", help="LoCoMo: recall@k of the evidence turns of each question",
        parents=[connection_options(addr=False)],
        description="Write every turn of LoCoMo's conversations as one memory, ask every question of "
                    "categories 1-4 with free-text Recall, and report recall@k per category, Recall latency and "
                    "write throughput. Starts its own embedded server unless --addr is given (then the "
                    "connection options speak TLS or mutual TLS to it).")
    locomo.add_argument("--dataset", help="locomo10.json (default: ../shared/datasets/locomo/locomo10.json next to "
                                          "the repository or the current directory)")
    locomo.add_argument("--conversations", metavar="N|I,J,...",
                        help="the first N conversations, or these positions (0-based) or sample ids; default all")
    add_server_options(locomo, DEFAULT_TOKEN_FILE)
    locomo.add_argument("--k", type=_ks, default=(5, 10, 25), metavar="K,K,...",
                        help="cut-offs for recall@k (default 5,10,25); Recall asks for top_k = the largest")
    locomo.add_argument("--batch-size", type=int, default=100, help="items per Write, 1-100 (default 100)")
    locomo.add_argument("--subject-prefix", default="locomo",
                        help="subjects are <prefix>-<sample_id> (default locomo); they must be empty")
    locomo.add_argument("--min-relevance", type=relevance_arg, metavar="R",
                        help="ask every Recall with this minimum relevance (default: the server's)")
    locomo.add_argument("--no-neighbours", action="store_true",
                        help="ask every Recall with exclude_neighbours (the ranking without neighbouring turns)")
    locomo.add_argument("--no-entities", action="store_true",
                        help="write turns without their speaker's entity tag (the ranking without named entities)")
    locomo.add_argument("--off-topic", action="store_true",
                        help="also ask each conversation's questions of the next conversation's memories and "
                             "report how many got an empty answer (needs two conversations or more)")
    locomo.add_argument("--markdown", action="store_true",
                        help="print a Markdown section for bench/RESULTS.md instead of the plain table")
    add_run_options(locomo, json_help="also write the results, per question too, as JSON")
    add_plot_option(locomo, "recall@k by category")
    locomo.set_defaults(run=run_locomo_command)
    add_scale_command(benchmarks)
    add_quick_command(benchmarks)
    add_bilingual_command(benchmarks, DEFAULT_TOKEN_FILE)
    add_madial_command(benchmarks, DEFAULT_TOKEN_FILE)
    add_extraction_command(benchmarks)
    add_injections_command(benchmarks)
    add_sessions_command(benchmarks)
    add_watch_command(benchmarks)

    load = benchmarks.add_parser(
        "load", help="closed-loop load: 80%% Recall, 15%% Write, 5%% MemoryView/Erase across many tenants",
        description="Set up TENANTS tenants (a view for the agent 'load' in each, a few seed memories per "
                    "subject), run CONCURRENCY closed-loop workers for DURATION seconds with the mix 80% Recall, "
                    "15% Write, 3% MemoryView, 2% Erase, then check that every acknowledged write is still "
                    "there. Reports throughput, p50/p95/p99 per operation, errors by code and lost writes. "
                    "Starts its own embedded server unless --addr is given; several --addr spread the calls "
                    "over several servers round robin; loopback addresses only. "
                    "Exits 1 if any call failed or any write was lost.")
    load.add_argument("--addr", action="append", metavar="HOST:PORT",
                      help="a memoryd on loopback instead of an embedded one (needs --key-file); repeat it (or "
                           "separate with commas) to spread the calls over several servers of one deployment")
    load.add_argument("--key-file", help="the servers' signing key (to store a view in each tenant)")
    load.add_argument("--tenants", type=int, default=100, help="default 100")
    load.add_argument("--subjects", type=int, default=2, help="subjects per tenant (default 2)")
    load.add_argument("--seed-memories", type=int, default=5, help="memories written per subject first (default 5)")
    load.add_argument("--concurrency", type=parse_workers, default=(8,), metavar="N[,N,...]",
                      help="closed-loop workers (default 8); several: a run at each in turn on the same server, "
                           "the throughput curve (a table each; --json and --plot hold the curve and the last run)")
    load.add_argument("--duration", type=float, default=60.0, help="seconds of load, at each concurrency (default 60)")
    load.add_argument("--deadline", type=float, default=10.0, help="deadline of each call in seconds (default 10)")
    load.add_argument("--seed", type=int, default=0, help="random seed of the workers' choices (default 0)")
    add_run_options(load, progress_help=None)  # its own --quiet below
    load.add_argument("--markdown", action="store_true", help="print a Markdown section for bench/RESULTS.md")
    load.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_plot_option(load, "the latency distribution of each operation (and the throughput curve)")
    load.set_defaults(run=run_load_command)
    add_plot_command(benchmarks)


def bench_token(args: argparse.Namespace) -> str:
    if args.addr is None:
        return ""
    if args.token:
        return str(args.token)
    path = Path(args.token_file)
    if path.is_file():
        return path.read_text().strip()
    raise BenchError(f"--addr needs a token: pass --token, set MEMORYD_TOKEN, or point --token-file at one "
                     f"({path} does not exist)")


def run_locomo_command(args: argparse.Namespace) -> int:
    try:
        dataset = resolve_dataset(args.dataset, Path.cwd(), Path(__file__))
        options = LocomoOptions(dataset=dataset, conversations=args.conversations, addr=args.addr,
                                tls=tls_settings(args) if args.addr is not None else None,
                                token=bench_token(args), ks=tuple(args.k), batch_size=args.batch_size,
                                subject_prefix=args.subject_prefix, start_timeout=args.start_timeout,
                                min_relevance=args.min_relevance, off_topic=args.off_topic,
                                neighbours=not args.no_neighbours, entities=not args.no_entities)
        before = machine()
        with sigterm_unwinds():
            result = run_locomo(options, progress=None if args.no_progress else sys.stderr)
        after = machine()
    except (BenchError, DatasetError, ServerError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    found, digest = versions(), sha256(dataset)
    recorded = settings(os.environ) if result.server.get("embedded") else {}
    if args.markdown:
        print(markdown_report(result, before, after, found, digest, recorded))
    else:
        print(text_report(result))
    document = json_report(result, before, after, found, digest, recorded)
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    return 0 if write_plot(args.plot, document) else 1


def run_load_command(args: argparse.Namespace) -> int:
    from .load import (LoadOptions, curve_point, curve_text, load_json_report, load_markdown_report,
                       load_text_report, run_load_curve)

    addrs = tuple(part.strip() for value in args.addr or () for part in value.split(",") if part.strip())
    levels = tuple(sorted(set(args.concurrency)))
    options = LoadOptions(addrs=addrs, key_file=Path(args.key_file) if args.key_file else None,
                          tenants=args.tenants, subjects=args.subjects, seed_memories=args.seed_memories,
                          concurrency=levels[-1] if levels else 0, duration=args.duration, seed=args.seed,
                          deadline=args.deadline, start_timeout=args.start_timeout)
    try:
        before = machine()
        with sigterm_unwinds():
            results = run_load_curve(options, levels, progress=None if args.quiet else sys.stderr)
        after = machine()
    except (BenchError, ServerError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    found = versions()
    recorded = settings(os.environ) if results[-1].server.get("embedded") else {}
    for result in results:
        print(load_markdown_report(result, before, after, found, recorded) if args.markdown
              else load_text_report(result))
    curve = [curve_point(result) for result in results]
    if len(curve) > 1:
        print(f"throughput curve (closed-loop workers: calls/s, Recall p99): {curve_text(curve)}")
    document = load_json_report(results[-1], before, after, found, recorded) | ({"curve": curve} if len(curve) > 1
                                                                                 else {})
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    plotted = write_plot(args.plot, document)
    return 0 if plotted and not any(r.errors or r.lost for r in results) else 1

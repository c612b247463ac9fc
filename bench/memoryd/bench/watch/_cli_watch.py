"""``memoryd bench watch``: the latency from a visible write to its watchers (see _watch.py)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._locomo import BenchError
from .._report import machine, versions
from .._run_options import add_run_options
from ..plots import add_plot_option, write_plot
from .._server import ServerError, sigterm_unwinds
from ._servers import Servers, distributed, embedded, existing
from ._watch import WatchOptions, run_watch
from ._watch_report import json_report, markdown_report, text_report


def _setting(value: str) -> tuple[str, str]:
    name, sep, setting = value.partition("=")
    if not sep or not name.startswith("MEMORYD_"):
        raise argparse.ArgumentTypeError(f"{value!r} is not MEMORYD_NAME=VALUE")
    return name, setting


def add_watch_command(benchmarks: Any) -> None:
    watch = benchmarks.add_parser(
        "watch", help="Watch: latency from a visible write to its watchers, with 100 open streams",
        description="Open STREAMS Watch streams (four reader agents whose views hide different parts of what is "
                    "written), write RATE memories a second for DURATION seconds, and report for every (write, "
                    "stream that should see it) the latency from just before the Write call to the change's "
                    "arrival: p50/p95/p99/max, delivered against expected, duplicates, and hidden writes that "
                    "reached a stream. --replicas 2 starts the distributed lane's shape (PostgreSQL and Milvus "
                    "servers, two replicas, a worker; from a source checkout) and watches one replica while "
                    "writing through the other. Exits 1 if anything was missing, duplicated, leaked or failed.")
    watch.add_argument("--replicas", type=int, choices=(1, 2), default=1,
                       help="1: one embedded server (default); 2: the distributed lane's two replicas")
    watch.add_argument("--addr", action="append", metavar="HOST:PORT",
                       help="servers already running instead (needs --key-file): watchers on the first, writes "
                            "through the last")
    watch.add_argument("--key-file", help="the servers' signing key with --addr")
    watch.add_argument("--streams", type=int, default=100, help="open Watch streams (default 100)")
    watch.add_argument("--subjects", type=int, default=4, help="subjects written to (default 4)")
    watch.add_argument("--rate", type=float, default=20.0, help="writes a second (default 20)")
    watch.add_argument("--duration", type=float, default=60.0, help="seconds of writes (default 60)")
    watch.add_argument("--drain", type=float, default=10.0,
                       help="seconds to wait for late changes after the last write (default 10)")
    watch.add_argument("--ready-timeout", type=float, default=60.0,
                       help="seconds for every stream to receive its warm-up change (default 60)")
    watch.add_argument("--streams-per-channel", type=int, default=10, help="default 10")
    watch.add_argument("--server-env", type=_setting, action="append", default=[], metavar="MEMORYD_NAME=VALUE",
                       help="a setting for the servers the run starts (repeat it), e.g. to compare how the "
                            "server learns of new changes")
    watch.add_argument("--server-config", metavar="TOML",
                       help="a memoryd configuration file for the servers the run starts, e.g. a [watch] section "
                            "with another poll_seconds")
    watch.add_argument("--markdown", action="store_true", help="print a Markdown section for bench/RESULTS.md")
    add_run_options(watch, progress_help="no progress lines on stderr")
    add_plot_option(watch, "the latency distribution (and the Write acks')")
    watch.set_defaults(run=run_watch_command)


@contextlib.contextmanager
def _servers(args: argparse.Namespace, settings: dict[str, str], say: Any) -> Iterator[Servers]:
    config = Path(args.server_config) if args.server_config else None
    if config is not None and not config.is_file():
        raise BenchError(f"--server-config: {config} is not a file")
    if args.addr:
        if settings or config:
            raise BenchError("--server-env and --server-config are for the servers the run starts, not with --addr")
        yield existing(tuple(args.addr), Path(args.key_file or ""))
    elif args.replicas == 2:
        with distributed(settings, config, say) as servers:
            yield servers
    else:
        with embedded(settings, config, args.start_timeout) as servers:
            yield servers


def run_watch_command(args: argparse.Namespace) -> int:
    options = WatchOptions(streams=args.streams, subjects=args.subjects, rate=args.rate, duration=args.duration,
                           drain=args.drain, ready_timeout=args.ready_timeout,
                           streams_per_channel=args.streams_per_channel)
    settings = dict(args.server_env)
    config = Path(args.server_config) if args.server_config else None
    # The file's settings on one line, so the report says what the servers ran with.
    recorded = {**settings, **({"config": "; ".join(line.strip() for line in config.read_text().splitlines()
                                                     if line.strip())} if config and config.is_file() else {})}

    def say(text: str) -> None:
        if not args.no_progress:
            print(text, file=sys.stderr, flush=True)

    try:
        options.check()
        before = machine()
        with sigterm_unwinds(), _servers(args, settings, say) as servers:
            result = run_watch(options, servers, say)
        after = machine()
    except (BenchError, ServerError, RuntimeError) as exc:  # RuntimeError: the suite's servers did not start
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    found = versions()
    print(markdown_report(result, before, after, found, recorded) if args.markdown else text_report(result, recorded))
    document = json_report(result, before, after, found, recorded)
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    plotted = write_plot(args.plot, document)
    return 0 if result.ok and plotted else 1

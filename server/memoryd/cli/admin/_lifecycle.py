"""Operator commands for the memory lifecycle: sweep (expiry, staleness, episodic cap), counts."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from memoryd.domain import MemorydError

from .._context import instant, open_storage
from .._progress import Progress


def add_lifecycle_commands(commands: Any) -> None:
    lifecycle = commands.add_parser("lifecycle", help="memory lifecycle: expiry, staleness, episodic cap")
    sub = lifecycle.add_subparsers(dest="lifecycle_command", required=True, metavar="COMMAND")
    sweep = sub.add_parser("sweep", help="run one lifecycle sweep now and print what it did")
    sweep.add_argument("--now", type=instant, default=None,
                       help="sweep as of this ISO 8601 time (default: the current time)")
    sweep.add_argument("--tenant", action="append", default=None,
                       help="sweep only this tenant (repeatable; default: every tenant with memories)")
    sweep.set_defaults(run=_sweep)
    counts = sub.add_parser("counts", help="a tenant's lifecycle and conflict counters")
    counts.add_argument("--tenant", required=True, help="the tenant whose counters to print")
    counts.add_argument("--json", action="store_true", help="print the counters as one JSON object")
    counts.set_defaults(run=_counts)


async def _sweep(args: argparse.Namespace) -> int:
    from memoryd.storage import SweepReport, lifecycle_tenants

    async with open_storage(args) as s:
        sweeper = await s.sweeper()
        now = args.now or datetime.now(UTC)
        try:
            tenants = args.tenant if args.tenant is not None else await lifecycle_tenants(s.queue)
            report = SweepReport()
            # One tenant at a time, so a sweep over many tenants shows its progress and ETA.
            with Progress("sweep", len(tenants), sys.stderr if len(tenants) > 1 else None) as bar:
                for tenant in tenants:
                    report += await sweeper.sweep_tenant(tenant, now)
                    bar.advance()
        except MemorydError as exc:
            print(f"memoryd: error: {exc.message}", file=sys.stderr)
            return 1
    print(f"swept {report.tenants} tenant(s): {report.expired} expired, {report.forgotten_stale} stale forgotten, "
          f"{report.evicted} evicted")
    return 0


async def _counts(args: argparse.Namespace) -> int:
    async with open_storage(args) as s:
        counts = await s.store.session(args.tenant).lifecycle_counts()
    if args.json:
        print(json.dumps(dict(sorted(counts.items()))))
        return 0
    for name in sorted(counts):
        print(f"{name}: {counts[name]}")
    return 0

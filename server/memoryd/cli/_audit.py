"""memoryd audit verify: check a tenant's audit hash chain."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._context import open_storage


def add_audit_commands(commands: Any) -> None:
    audit = commands.add_parser("audit", help="the tamper-evident audit log")
    sub = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    verify = sub.add_parser("verify", help="recompute a tenant's hash chain; exit 1 if it is broken")
    verify.add_argument("--tenant", required=True, help="the tenant whose chain to verify")
    verify.add_argument("--json", action="store_true", help="print the result as JSON (intact, events, unchained, "
                                                          "broken_at, head)")
    verify.set_defaults(run=_verify)


async def _verify(args: argparse.Namespace) -> int:
    async with open_storage(args) as s:
        report = await s.store.verify_audit(args.tenant)
    if args.json:
        print(json.dumps({"tenant": args.tenant, "intact": report.intact, "events": report.events,
                          "unchained": report.unchained, "broken_at": report.broken_at, "head": report.head.hex()}))
        return 0 if report.intact else 1
    if not report.intact:
        print(f"BROKEN: event {report.broken_at} of tenant {args.tenant} was edited, or an event before it was "
              f"deleted ({report.events} events read)")
        return 1
    print(f"intact: {report.events} events, head {report.head.hex()}"
          + (f" ({report.unchained} written before the chain existed)" if report.unchained else ""))
    return 0

"""memoryd audit verify: check a tenant's audit hash chain; memoryd audit erasures: a tenant's
erasure receipts with every check of them (the one after the erase, and later re-checks)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._context import open_storage


def add_audit_commands(commands: Any) -> None:
    audit = commands.add_parser("audit", help="the tamper-evident audit log")
    sub = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    verify = sub.add_parser("verify", help="recompute a tenant's hash chain; exit 1 if it is broken")
    verify.add_argument("--tenant", required=True, help="the tenant whose chain to verify")
    verify.add_argument("--json", action="store_true", help="print the result as JSON (intact, events, unchained, "
                                                          "broken_at, head)")
    verify.set_defaults(run=_verify)
    erasures = sub.add_parser("erasures", help="a tenant's latest erasures, each with its checks: whether and when "
                                               "it was verified, by the erase or by a later re-check")
    erasures.add_argument("--tenant", required=True, help="the tenant whose erasures to list")
    erasures.add_argument("--unverified", action="store_true", help="only those whose latest check is not verified")
    erasures.add_argument("--limit", type=int, default=50, help="at most this many, newest first (default 50)")
    erasures.add_argument("--json", action="store_true", help="print one JSON object per erasure")
    erasures.set_defaults(run=_erasures)


async def _verify(args: argparse.Namespace) -> int:
    async with open_storage(args) as s:
        report = await s.store.session(args.tenant).verify_audit()
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


async def _erasures(args: argparse.Namespace) -> int:
    async with open_storage(args) as s:
        rows = await s.store.session(args.tenant).erasures(limit=max(1, args.limit), unverified_only=args.unverified)
    for row in rows:
        if args.json:
            print(json.dumps({**row, "started_at": row["started_at"].isoformat()}))
            continue
        checks = row["checks"]
        state = "verified" if row["verified"] else "NOT verified"
        if checks and checks[-1]["recheck"]:
            state += " by a later re-check"
        print(f"{row['erase_id']} {row['mode']} by {row['agent']} at {row['started_at'].isoformat()}: {state}")
        for check in checks:
            print(f"  checked {check['checked_at']}{' (re-check)' if check['recheck'] else ''}: "
                  f"{'verified' if check['verified'] else 'not verified'}, {check['vectors']} vectors deleted"
                  + (f", not covered: {', '.join(check['unchecked'])}" if check["unchecked"] else ""))
        if row["recheck"]:
            pending = row["recheck"]
            print(f"  re-check queued for {', '.join(row['pending'])}: next at {pending['next_attempt_at']} "
                  f"after {pending['attempts']} tries"
                  + (f" ({pending['last_error']})" if pending["last_error"] else ""))
    return 0

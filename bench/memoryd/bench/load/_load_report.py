"""The mixed-load run presented: the facts of the run, its table, and the text, Markdown and JSON
reports (``memoryd bench load``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._report import run_lines
from ._load import MIX, OPERATIONS, LoadResult


def load_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("MEMORYD_EMBEDDER", "MEMORYD_EMBEDDER_MODEL")}


def _n(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:,.0f} MiB"


def curve_point(load: LoadResult) -> dict[str, Any]:
    """One point of the throughput curve: successful calls per second and the Recalls' latency."""
    recall = load.summary("Recall")
    ok = sum(len(s.latencies_ms) for s in load.ops.values())
    return {"workers": load.options.concurrency, "seconds": load.seconds,
            "calls_per_second": ok / load.seconds if load.seconds > 0 else None,
            "recall_p50_ms": recall["p50_ms"], "recall_p99_ms": recall["p99_ms"],
            "errors": sum(load.errors.values()), "lost": len(load.lost)}


def curve_text(curve: Sequence[Mapping[str, Any]]) -> str:
    """The throughput curve on one line: closed-loop workers: calls/s, Recall p99."""
    return " · ".join(f"{p['workers']}: {_n(p['calls_per_second'])}/s, p99 {_n(p['recall_p99_ms'], 0)} ms"
                      for p in curve)


def facts(result: LoadResult) -> list[str]:
    o = result.options
    total_ok = sum(len(s.latencies_ms) for s in result.ops.values())
    errors = result.errors
    lines = [
        f"{o.tenants} tenants × {o.subjects} subjects, {o.seed_memories} seed memories each; {o.concurrency} "
        f"closed-loop workers for {result.seconds:.0f} s (seed {o.seed}, deadline {o.deadline:g} s per call, "
        f"{o.write_items} items per Write)",
        f"throughput: {_n(total_ok / result.seconds if result.seconds else None)} calls/s in total",
        "errors: " + (", ".join(f"{code} {n}" for code, n in errors.most_common()) if errors else "none"),
        f"writes: {result.acknowledged} memories acknowledged (with idempotency keys), {result.erased} erased by "
        f"the run, {result.uncertain} left uncertain by a failed Erase; **lost writes: {len(result.lost)}**"
        + (f" (e.g. {', '.join('/'.join(x) for x in result.lost[:3])})" if result.lost else "")
        + (f"; {result.inactive} present but no longer active" if result.inactive else ""),
        *([f"spread over {len(result.calls_by_addr)} servers: "
           + ", ".join(f"{addr} {n} calls" for addr, n in result.calls_by_addr.items())]
          if len(result.calls_by_addr) > 1 else []),
        f"setup {result.setup_seconds:.0f} s, verification {result.verify_seconds:.0f} s"
        + (f"; {result.degraded} Recall responses degraded" if result.degraded else "")
        + (f"; {result.erase_mismatches} Erase receipts not for exactly one verified memory"
           if result.erase_mismatches else ""),
    ]
    if result.server_warnings:
        lines.append(f"server log: {sum(result.server_warnings.values())} warning/error lines; "
                     + "; ".join(f"{n} × {line}" for line, n in result.server_warnings.most_common(5)))
    elif result.server.get("embedded"):
        lines.append("server log: no warning or error lines")
    rss = result.server_rss_bytes
    if rss:
        lines.append(f"server process RSS: {_mib(rss.get('before_server'))} after setup, "
                     f"{_mib(rss.get('after_server'))} after the run"
                     + (f"; with its child processes {_mib(rss.get('before_with_children'))} → "
                        f"{_mib(rss.get('after_with_children'))}"
                        if rss.get('after_with_children') != rss.get('after_server') else ""))
    return lines


def table(result: LoadResult, markdown: bool) -> list[str]:
    if markdown:
        lines = ["| operation | calls | ok/s | p50 ms | p95 ms | p99 ms | max ms | errors |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|"]
    else:
        lines = [f"{'operation':<11} {'calls':>7} {'ok/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
                 f"{'max ms':>8} {'errors':>6}"]
    for op in OPERATIONS:
        s = result.summary(op)
        cells = [op, str(s["calls"]), _n(s["per_second"]), _n(s["p50_ms"]), _n(s["p95_ms"]), _n(s["p99_ms"]),
                 _n(s["max_ms"]), str(sum(s["errors"].values()))]
        if markdown:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append(f"{cells[0]:<11} {cells[1]:>7} {cells[2]:>7} {cells[3]:>8} {cells[4]:>8} {cells[5]:>8} "
                         f"{cells[6]:>8} {cells[7]:>6}")
    return lines


def text_report(result: LoadResult) -> str:
    return "\n".join(["Load test (closed loop, loopback)", *table(result, False), "", *facts(result)]) + "\n"


def markdown_report(result: LoadResult, before: Mapping[str, Any], after: Mapping[str, Any],
                    found: Mapping[str, str | None], recorded: Mapping[str, str]) -> str:
    from datetime import UTC, datetime

    today = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    server = ("embedded (started by the run)" if result.server.get("embedded")
              else f"external at {', '.join(result.server.get('addrs', []))}")
    setting_text = ", ".join(f"{k}={v}" for k, v in recorded.items())
    lines = [f"### Load, {result.seconds / 60:.0f} min, {today}", "", *table(result, True), "",
             *(f"- {line}" for line in facts(result)),
             f"- server: {server}" + (f"; settings: {setting_text}" if setting_text else ""),
             *(f"- {line}" for line in run_lines(before, after, found)), ""]
    return "\n".join(lines)


def json_report(result: LoadResult, before: Mapping[str, Any], after: Mapping[str, Any],
                found: Mapping[str, str | None], recorded: Mapping[str, str]) -> dict[str, Any]:
    o = result.options
    return {
        "benchmark": "load",
        "options": {"tenants": o.tenants, "subjects": o.subjects, "seed_memories": o.seed_memories,
                    "concurrency": o.concurrency, "duration": o.duration, "seed": o.seed, "deadline": o.deadline,
                    "write_items": o.write_items, "mix": dict(MIX)},
        "server": {**result.server, "settings": dict(recorded), "rss_bytes": result.server_rss_bytes},
        "machine": {"before": dict(before), "after": dict(after)},
        "versions": dict(found),
        "seconds": result.seconds, "setup_seconds": result.setup_seconds, "verify_seconds": result.verify_seconds,
        "operations": {op: result.summary(op) for op in OPERATIONS},
        "errors": dict(result.errors),
        "writes": {"acknowledged": result.acknowledged, "erased": result.erased, "uncertain": result.uncertain,
                   "lost": len(result.lost), "lost_ids": ["/".join(x) for x in result.lost],
                   "inactive": result.inactive},
        "erase_mismatches": result.erase_mismatches,
        "server_warnings": dict(result.server_warnings),
        "degraded": result.degraded,
        "calls_by_addr": dict(result.calls_by_addr),
        "p99_ms": {op: result.summary(op)["p99_ms"] for op in OPERATIONS},
        # Every successful call's latency, so `memoryd bench plot` can redraw the distribution.
        "samples_ms": {op: [round(x, 3) for x in result.ops[op].latencies_ms] for op in OPERATIONS},
        "throughput_per_second": (sum(len(s.latencies_ms) for s in result.ops.values()) / result.seconds
                                  if result.seconds else math.nan),
    }

"""``memoryd bench sessions``: ResumeSession's latency on the embedded default.

Starts a throw-away embedded server (``_server``), writes one session of a subject — memories
the user asked to keep and inferred ones, about 1 KB of snapshot — ends it (EndSession, whose
summary is extractive: the embedded default has no extraction model), then calls ResumeSession
``--calls`` times one after the other, as the next session on another device would, and reports
p50/p95/p99 with the machine and its load average before and after. Issue 43's target: p50 ≤ 5 ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from memoryd.client import NO_RETRY, MemorydClient, MemorydError
from memoryd.v1 import memory_pb2 as pb

from .._metrics import percentile
from .._report import machine, versions
from .._server import EmbeddedServer, ServerError, sigterm_unwinds
from ..plots import add_plot_option, write_plot

SUBJECT, SESSION = "bench-sessions", "bench-session-1"
WARM_UP = 20
# What a trip-planning session leaves: things the user said to keep, and things inferred.
EXPLICIT = ["My home airport is Lyon Saint-Exupéry and I fly out of it for every trip, even the short ones "
            "to Paris, because the train station is too far from my flat",
            "Book window seats on every flight longer than two hours, aisle otherwise, and never the last row "
            "next to the toilets",
            "My passport name is Alice Martin, as on the booking of last spring; use it for every airline",
            "I am vegetarian: no meat or fish in any meal you order for me, on planes, trains or in hotels"]
INFERRED = ["Alice is planning a long weekend in Oslo in the second half of May, probably Thursday to Sunday",
            "Alice compares two hotels near the harbour and prefers the quieter one even if it costs a bit more",
            "Alice usually travels with her brother, who lives in Copenhagen and joins her by train",
            "Alice prefers trains to planes for trips under five hours and asks for a table seat"]


def add_sessions_command(benchmarks: Any) -> None:
    parser = benchmarks.add_parser(
        "sessions", help="ResumeSession latency: a ~1 KB session snapshot read back N times",
        description="Start an embedded server, write one session (4 explicit and 4 inferred memories, ~1 KB), "
                    "end it, then call ResumeSession N times in a row and report p50/p95/p99 (issue 43's target: "
                    "p50 <= 5 ms), with the machine and its load average.")
    parser.add_argument("--calls", type=int, default=500, help="ResumeSession calls measured (default 500)")
    parser.add_argument("--start-timeout", type=float, default=180.0, help="seconds to wait for the server to start")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown section for bench/RESULTS.md")
    parser.add_argument("--json", metavar="OUT", help="also write the results, every call's latency too, as JSON")
    add_plot_option(parser, "the latency distribution")
    parser.set_defaults(run=run_sessions_command)


def measure(client: MemorydClient, calls: int) -> dict[str, Any]:
    """Write and end the session, then time ``calls`` ResumeSessions (after a warm-up)."""
    for i, text in enumerate(EXPLICIT):
        client.write(subject=SUBJECT, session_id=SESSION, items=[pb.MemoryDraft(category=pb.CATEGORY_FACT, text=text,
                                                                                key=f"travel_{i}")])
    for text in INFERRED:
        client.write(subject=SUBJECT, session_id=SESSION, items=[pb.MemoryDraft(
            category=pb.CATEGORY_EVENT, text=text, source_kind=pb.SOURCE_KIND_INFERENCE)])
    ended = client.end_session(subject=SUBJECT, session_id=SESSION).snapshot
    for _ in range(WARM_UP):
        client.resume_session(subject=SUBJECT)
    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        resumed = client.resume_session(subject=SUBJECT).snapshot
        timings.append((time.perf_counter() - started) * 1000)
    assert resumed == ended, "ResumeSession answered another snapshot than EndSession"
    text_bytes = sum(len(m.text.encode()) for m in [ended.summary, *ended.explicit, *ended.inferred])
    return {"calls": calls, "snapshot_bytes": ended.ByteSize(), "text_bytes": text_bytes,
            "memories": 1 + len(ended.explicit) + len(ended.inferred),
            **{f"p{q}": round(percentile(timings, q) or 0.0, 2) for q in (50, 95, 99)},
            "max": round(max(timings), 2), "samples_ms": [round(t, 3) for t in timings]}


def run_sessions_command(args: argparse.Namespace) -> int:
    if args.calls < 1:
        print("memoryd bench: error: --calls must be at least 1", file=sys.stderr)
        return 2
    before = machine()
    try:
        with sigterm_unwinds(), EmbeddedServer(start_timeout=args.start_timeout) as server:
            with MemorydClient(server.target, token=server.token, retry=NO_RETRY) as client:
                result = measure(client, args.calls)
    except (ServerError, MemorydError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    after = machine()
    if args.markdown:
        print(f"| calls | snapshot | p50 | p95 | p99 | max | load before → after |\n|---|---|---|---|---|---|---|\n"
              f"| {result['calls']} | {result['memories']} memories, {result['text_bytes']} B of text "
              f"({result['snapshot_bytes']} B message) | {result['p50']} ms | {result['p95']} ms | "
              f"{result['p99']} ms | {result['max']} ms | {before['loadavg']} → {after['loadavg']} |\n\n"
              f"{before['cpu']}, {before['nproc']} usable cores, Python {before['python']}.")
    else:
        print(f"ResumeSession over {result['calls']} calls ({result['memories']} memories, {result['text_bytes']} B "
              f"of text, {result['snapshot_bytes']} B message): p50 {result['p50']} ms, p95 {result['p95']} ms, "
              f"p99 {result['p99']} ms, max {result['max']} ms")
        print(f"machine: {before['cpu']}, {before['nproc']} usable cores; load average {before['loadavg']} before, "
              f"{after['loadavg']} after")
    document = {"benchmark": "sessions", **result, "machine": {"before": before, "after": after},
                "versions": versions()}
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    return 0 if write_plot(args.plot, document) else 1

"""Probe: where a free-text Recall's milliseconds go, span by span, on the critical path.

Starts a throw-away embedded server with the console span exporter, writes LoCoMo's first
conversation and asks its questions one at a time, each under its own trace id (as ``bench
quick`` does). Then, per span name, the median start offset from the RPC span's start and the
median duration, and the client's wall time less the RPC span (transport, interceptors outside
the span, the client). A stage whose offset + duration is near the RPC span's end is on the
critical path. Asserts nothing.

    .venv/bin/python bench/probes/recall_spans.py [--dataset locomo10.json] [--conversation 1]

Then it asks the questions three times more, their embeddings now cached (the embedder's query
cache), and prints the server process's CPU per Recall outside the query embedding; or, with
``--py-spy OUT``, records those calls with py-spy (raw folded stacks) instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import shutil
import signal
import subprocess
import time
from pathlib import Path

from memoryd.bench._locomo import LocomoOptions, run_locomo
from memoryd.bench.quick._spans import RECALL_SPAN, SpanCollector, Traceparents
from memoryd.bench._server import EmbeddedServer


DATASET: list[str] = []
CONVERSATION: list[str] = []


def _asked() -> list[tuple[str, str]]:
    from memoryd.bench._locomo import load_locomo, select_conversations, subject_for

    return [(subject_for("locomo", c.sample_id), q.question)
            for c in select_conversations(load_locomo(Path(DATASET[0])), CONVERSATION[0]) for q in c.questions]


def _cached(server: EmbeddedServer, rounds: int = 3) -> None:
    """The questions again, their embeddings now cached: the server's CPU per Recall outside
    the query embedding (the memoryd process only; Postgres runs in processes of its own)."""
    import psutil
    from memoryd.client import MemorydClient
    from memoryd.v1 import memory_service_pb2 as svc

    asked = _asked()
    process = psutil.Process(server.pid)
    walls: list[float] = []
    with MemorydClient(server.target, token=server.token) as client:
        cpu = process.cpu_times()
        for _ in range(rounds):
            for subject, question in asked:
                began = time.perf_counter()
                client.recall(svc.RecallRequest(subject=subject, query=question, top_k=25), timeout=30)
                walls.append((time.perf_counter() - began) * 1000)
        after = process.cpu_times()
    used = (after.user + after.system - cpu.user - cpu.system) * 1000 / len(walls)
    print(f"cached embeddings, {len(walls)} Recalls: wall p50 {statistics.median(walls):.1f} ms, "
          f"server CPU {used:.1f} ms per Recall")


def _profile(server: EmbeddedServer, out: str) -> None:
    from memoryd.client import MemorydClient
    from memoryd.v1 import memory_service_pb2 as svc

    asked = _asked()
    if shutil.which("py-spy", path=str(Path(os.sys.executable).parent)) is None:
        raise SystemExit("--py-spy needs py-spy in this virtualenv (not a dependency of memoryd's): "
                         ".venv/bin/uv pip install --python .venv/bin/python py-spy")
    spy = subprocess.Popen([str(Path(os.sys.executable).parent / "py-spy"), "record", "--format", "raw",
                            "--rate", "250", "--pid", str(server.pid), "--output", out, "--threads"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)
    with MemorydClient(server.target, token=server.token) as client:
        for _ in range(3):
            for subject, question in asked:
                client.recall(svc.RecallRequest(subject=subject, query=question, top_k=25), timeout=30)
    spy.send_signal(signal.SIGINT)
    spy.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="../shared/datasets/locomo/locomo10.json")
    parser.add_argument("--conversation", default="1")
    parser.add_argument("--py-spy", metavar="OUT", help="then ask the questions again (their embeddings now cached) "
                        "under py-spy, raw folded stacks to OUT")
    args = parser.parse_args()
    DATASET[:] = [args.dataset]
    CONVERSATION[:] = [args.conversation]
    spans = SpanCollector()
    traces = Traceparents()
    environment = {"MEMORYD_TRACE_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "500"}
    load = os.getloadavg()
    with EmbeddedServer(environment=environment, on_output=spans.feed) as server:
        result = run_locomo(LocomoOptions(dataset=Path(args.dataset), conversations=args.conversation,
                                          addr=server.target, token=server.token, batch_size=50),
                            None, recall_trace=traces.next)
        time.sleep(3)
        if args.py_spy:
            _profile(server, args.py_spy)
        else:
            _cached(server)
    offsets: dict[str, list[float]] = {}
    durations: dict[str, list[float]] = {}
    outside: list[float] = []
    for q, trace in zip(result.questions, traces.ids):
        found = spans.timed(trace)
        rpc = next(((s, e) for n, s, e in found if n == RECALL_SPAN), None)
        if rpc is None:
            continue
        outside.append(q.latency_ms - (rpc[1] - rpc[0]) * 1000)
        seen: dict[str, int] = {}
        for name, start, end in sorted(found, key=lambda x: x[1]):
            seen[name] = seen.get(name, 0) + 1
            key = name if seen[name] == 1 else f"{name}#{seen[name]}"
            offsets.setdefault(key, []).append((start - rpc[0]) * 1000)
            durations.setdefault(key, []).append((end - start) * 1000)
    lat = sorted(q.latency_ms for q in result.questions)
    print(f"client Recall p50 {statistics.median(lat):.1f} ms over {len(lat)} calls; "
          f"client − RPC span p50 {statistics.median(outside):.1f} ms; load {load} → {os.getloadavg()}")
    print(f"{'span':45s} {'n':>4s} {'start p50':>9s} {'dur p50':>8s} {'end p50':>8s}")
    for key in sorted(offsets, key=lambda k: statistics.median(offsets[k])):
        o, d = statistics.median(offsets[key]), statistics.median(durations[key])
        ends = statistics.median([a + b for a, b in zip(offsets[key], durations[key])])
        print(f"{key:45s} {len(durations[key]):4d} {o:9.1f} {d:8.1f} {ends:8.1f}")


if __name__ == "__main__":
    main()

"""The curve of `memoryd serve --processes N` with external stores (issue 41, item 3).

Starts the distributed lane's stores as tests/distributed does (tests/support_distributed.py:
Debian's PostgreSQL 15 with the least-privilege logins, the Milvus 2.3.5 standalone server;
`scripts/install-test-servers.sh` installs both), then for each N of --processes a new
deployment (its own database and keys) served by `memoryd serve` with MEMORYD_PROCESSES=N —
N = 1 is one process as before, no parent — each process with its in-process outbox worker,
as the default has it. Each is driven by `memoryd bench load`'s mixed load (``_load``, as
``run_load`` runs it: 80 % Recall, 15 % Write, 3 % MemoryView, 2 % Erase; closed loop, --workers
client threads; --tenants tenants × 2 subjects × 3 seed memories; the acknowledged writes are
checked at the end) for --seconds, after one Recall through each of as many connections (each
process has then done the start-up work it does beside its first calls). Printed per N:
calls/s, Recalls/s, Recall p50/p99, errors by code, lost writes, the CPU seconds each server
process used during the run and the connections each held (the kernel's spread), and the
machine's 1-minute load average before and after (the machine is shared: read the figures
beside it).

The kernel spreads connections, not calls, over the processes, and the load driver opens one
channel per address it is given. So it is given the server's address --connections times, each
channel on a connection of its own (a local subchannel pool: channels to one target otherwise
share one connection), and spreads its calls over them round robin, as that many clients would.

    .venv/bin/python bench/probes/processes_curve.py --seconds 15 --workers 8 [--processes 1 2 4]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import grpc
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support

from tests.support import Agent, ServerProcess, full_view, put_view, token_for, unique  # noqa: E402
from tests.support_distributed import Deployment, ExternalPostgres, MilvusStandalone  # noqa: E402

import memoryd.bench.load._load as load_driver  # noqa: E402
from memoryd.client import MemorydClient  # noqa: E402
from memoryd.v1 import memory_service_pb2 as svc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


OWN_CONNECTION = ("grpc.use_local_subchannel_pool", 1)


class _OwnConnection(MemorydClient):
    """The load driver's client, its channel on a connection of its own."""

    def __init__(self, target: str = "", **kwargs: Any) -> None:
        super().__init__(target, options=[OWN_CONNECTION], **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per point")
    parser.add_argument("--workers", type=int, default=8, help="closed-loop client threads")
    # The kernel spreads connections by a hash: with 16 over 2 processes, 4 / 12 was seen.
    parser.add_argument("--connections", type=int, default=32, help="client connections to the one address")
    parser.add_argument("--tenants", type=int, default=10)
    args = parser.parse_args()
    load_driver.MemorydClient = _OwnConnection  # type: ignore[misc]  # the driver's channels, each its own
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"commit {commit}, {os.cpu_count()} cores; {args.workers} client threads over {args.connections} "
          f"connections, {args.seconds:.0f} s per point, {args.tenants} tenants", flush=True)
    # Milvus as an operator runs it (its own compaction interval), on etcd ports of its own: other
    # engineers' test runs start Milvus servers on this machine too.
    pg = ExternalPostgres().start()
    milvus = MilvusStandalone(compaction_check_interval=None, own_etcd_ports=True).start()
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-processes-"))
    rows = []
    try:
        for n in args.processes:
            rows.append(measure(n, args, pg, milvus, root / f"n{n}"))
            print(_row(rows[-1]), flush=True)
    finally:
        pg.destroy()
        milvus.destroy()
    print()
    print("| processes | calls/s | Recall/s | Recall p50 ms | Recall p99 ms | errors | lost | CPU s per process "
          "| connections per process | load 1-min before → after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(_row(row))


def measure(n: int, args: argparse.Namespace, pg: ExternalPostgres, milvus: MilvusStandalone,
            root: Path) -> dict[str, Any]:
    root.mkdir(parents=True)
    (root / "keys").mkdir(mode=0o700)
    deployment = Deployment(pg, milvus, pg.create_owner_database(unique("curve").replace("-", "_")),
                            root / "keys", root)
    migrated = deployment.migrate()
    assert migrated.returncode == 0, migrated.stderr
    env = deployment.env(MEMORYD_PROCESSES=str(n), MEMORYD_WORKER_IN_PROCESS="true")
    server = ServerProcess(env, root / "serve.log").start(timeout=300)
    assert server.process is not None
    parent = psutil.Process(server.process.pid)
    servers = parent.children() if n > 1 else [parent]
    connections: dict[int, int] = {}
    sampler = threading.Timer(2 + args.seconds / 2, lambda: connections.update(
        {p.pid: _established(p, server.port) for p in servers}))
    try:
        options = load_driver.LoadOptions(addrs=(server.target,), key_file=deployment.keys / "signing.pem",
                                          tenants=args.tenants, subjects=2, seed_memories=3,
                                          concurrency=args.workers, duration=args.seconds)
        _warm_up(server.target, deployment.keys / "signing.pem", args.connections)
        before_load = os.getloadavg()[0]
        cpu_before = [_cpu(p) for p in servers]
        sampler.start()  # (set-up takes a few seconds: sampled in the measured run)
        result = load_driver._load(options, [server.target] * args.connections, options.key_file or Path(),
                                   {"embedded": False, "addrs": [server.target]}, None, sys.stderr)
        cpu_after = [_cpu(p) for p in servers]
        after_load = os.getloadavg()[0]
    finally:
        sampler.cancel()
        code = server.stop(signal.SIGTERM, timeout=120)
    recall = result.summary("Recall")
    ok = sum(len(s.latencies_ms) for s in result.ops.values())
    return {"n": n, "calls_per_s": ok / result.seconds, "recall_per_s": recall["per_second"],
            "p50": recall["p50_ms"], "p99": recall["p99_ms"], "errors": dict(result.errors),
            "lost": len(result.lost), "cpu": [b - a for a, b in zip(cpu_before, cpu_after)],
            "connections": [connections.get(p.pid, 0) for p in servers], "load": (before_load, after_load),
            "exit": code}


def _warm_up(target: str, key: Path, connections: int) -> None:
    """A Recall through as many connections as the run opens, before it: each process has
    done the start-up work it does beside its first calls (its reference sentences embedded)
    before it is measured. (Under a loaded machine, first Recalls waited past the driver's 10 s
    deadline.)"""
    tenant = unique("warm")
    with grpc.insecure_channel(target) as channel:
        put_view(channel, key, tenant, full_view("agent-1"))
    token = token_for(key, tenant)
    channels = [grpc.insecure_channel(target, options=[OWN_CONNECTION]) for _ in range(connections)]
    try:
        for channel in channels:
            Agent(channel, token).call("Recall", svc.RecallRequest(subject="warm", query="warming up"), timeout=120)
    finally:
        for channel in channels:
            channel.close()


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _established(process: psutil.Process, port: int) -> int:
    return sum(1 for c in process.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)


def _row(row: dict[str, Any]) -> str:
    cpu = " / ".join(f"{s:.1f}" for s in row["cpu"])
    spread = " / ".join(str(c) for c in row["connections"])
    stopped = "" if row["exit"] == 0 else f" (exit {row['exit']})"
    errors = ", ".join(f"{n} {code}" for code, n in sorted(row["errors"].items())) or "0"
    return (f"| {row['n']}{stopped} | {row['calls_per_s']:.1f} | {row['recall_per_s']:.1f} | {row['p50']:.1f} | "
            f"{row['p99']:.1f} | {errors} | {row['lost']} | {cpu} | {spread} | "
            f"{row['load'][0]:.2f} → {row['load'][1]:.2f} |")


if __name__ == "__main__":
    main()

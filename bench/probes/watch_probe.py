"""Watch's wake-ups: LISTEN/NOTIFY against polling alone (issue 43: "your measurement decides").

Starts one in-process memoryd on an embedded PostgreSQL (or ``--dsn``), opens ``--streams``
Watch streams of one subject, then writes ``--writes`` memories one at a time, spaced by a
random pause, and times from each Write's answer to the moment every stream has the change.
Two modes: ``listen`` (the server as shipped: a notification wakes the streams, the poll is a
fallback) and ``poll`` (notifications dropped in this process — ``WatchHub.wake`` made a no-op
here, in the probe only — so only the poll of ``--poll`` seconds delivers). Also reports the
cost of one idle poll (a ``changes_after`` that finds nothing) and the server process's CPU
time per second while the streams sit idle.

    .venv/bin/python bench/probes/watch_probe.py --streams 100 --writes 40 --poll 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support

from _probe_db import run_probe  # noqa: E402
from tests.support import draft, full_view, token_for  # noqa: E402

from memoryd.server import Config, Memoryd, Watch, load_or_create_signing_key  # noqa: E402
from memoryd.server.usecases import WatchHub  # noqa: E402
from memoryd.v1 import memory_service_pb2 as svc  # noqa: E402
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc  # noqa: E402
from memoryd.v1 import view_admin_service_pb2 as admin  # noqa: E402
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _mode(dsn: str, tmp: Path, mode: str, streams: int, writes: int, poll: float) -> None:
    key_file = tmp / "signing.pem"
    load_or_create_signing_key(key_file)
    config = Config(data_dir=tmp / mode, addr="127.0.0.1:0", postgres_dsn=dsn, signing_key_file=str(key_file),
                    keys_dir=str(tmp / "keys"), key_file=str(tmp / "master.key"),
                    watch=Watch(poll_seconds=poll, heartbeat_seconds=3600, max_streams_per_tenant=streams + 10),
                    lifecycle_interval_seconds=0)
    woken = WatchHub.wake
    if mode == "poll":
        WatchHub.wake = lambda self, tenant: None  # type: ignore[method-assign]
    app = Memoryd(config)
    started = await app.start()
    tenant = f"probe-{mode}"
    meta = (("authorization", f"Bearer {token_for(key_file, tenant, 'agent-1')}"),)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            await admin_grpc.ViewAdminServiceStub(channel).PutView(admin.PutViewRequest(view=full_view("agent-1")),
                metadata=(("authorization", f"Bearer {token_for(key_file, tenant, 'ops', roles=('admin',))}"),))
            stub = svc_grpc.MemoryServiceStub(channel)
            arrivals: dict[str, list[float]] = {}
            calls = [stub.Watch(svc.WatchRequest(subject="alice"), metadata=meta) for _ in range(streams)]

            async def read(call: grpc.aio.UnaryStreamCall) -> None:  # type: ignore[type-arg]
                async for message in call:
                    if message.HasField("change"):
                        arrivals.setdefault(message.change.memory.text, []).append(time.perf_counter())

            readers = [asyncio.ensure_future(read(c)) for c in calls]
            await asyncio.sleep(2.0)  # every stream has read its start
            cpu, wall = _cpu(), time.perf_counter()
            await asyncio.sleep(5.0)
            idle_cpu = (_cpu() - cpu) / (time.perf_counter() - wall)
            latencies = []
            for i in range(writes):
                await asyncio.sleep(random.uniform(0.05, 0.3))
                text = f"{mode} {i}"
                await stub.Write(svc.WriteRequest(subject="alice", items=[draft("event", text)]), metadata=meta)
                answered = time.perf_counter()
                while len(arrivals.get(text, ())) < streams:
                    await asyncio.sleep(0.002)
                latencies += [t - answered for t in arrivals[text]]
            for call in calls:
                call.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
        latencies.sort()
        p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
        print(f"{mode:6} poll={poll}s streams={streams} writes={writes}: delivery p50 {p(0.5):.1f} ms, "
              f"p99 {p(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms; idle CPU {idle_cpu * 100:.1f}% of a core")
        session = app._graph.store.session(tenant) if app._graph else None  # noqa: SLF001 (a probe)
        if session is not None:
            head = await session.change_head()
            started_at = time.perf_counter()
            for _ in range(200):
                await session.changes_after(head, ["alice"], 100)
            print(f"{mode:6} one idle poll (changes_after finding nothing): "
                  f"{(time.perf_counter() - started_at) / 200 * 1000:.2f} ms")
    finally:
        WatchHub.wake = woken  # type: ignore[method-assign]
        await app.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--poll", type=float, default=0.5)
    parser.add_argument("--modes", nargs="+", default=["listen", "poll"])
    args = parser.parse_args()

    async def probe(dsn: str) -> None:
        with tempfile.TemporaryDirectory(prefix="watch-probe") as tmp:
            for mode in args.modes:
                await _mode(dsn, Path(tmp), mode, args.streams, args.writes, args.poll)

    run_probe(args.dsn, "watch-probe", probe)


if __name__ == "__main__":
    main()

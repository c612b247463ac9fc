"""PURGE latency on a Milvus server, idle and under load, and search by meaning after a Milvus restart (issue 39).

Starts the distributed shape of tests/support_distributed.py (Debian's PostgreSQL 15, the
Milvus 2.3.5 standalone server of `scripts/install-test-servers.sh` with ITS DEFAULT
configuration unless ``--check-interval`` says otherwise, 2 replicas, 2 `memoryd worker`s),
seeds TENANTS tenants with MEMORIES keyed memories each (WAIT_INDEXED), then:

- idle: PURGES sequential PURGEs through the replicas in turn (half by key, half a whole
  subject; each erases something), each with a 60 s client deadline, timed;
- load: as many more while LOAD_THREADS threads write (WAIT_INDEXED and not) and recall
  against tenants of their own without pause;
- restart: SIGKILL Milvus, start it again, and time from its health check answering ("ports
  up") to the first Recall through EACH replica that is not degraded and finds a seeded
  memory by meaning alone (the query shares no word with it).

Counts the memoryd collection's segments (pymilvus: persistent, i.e. the data coordinator's,
and loaded, the query nodes') around each phase and after each purge, and the Flush requests
Milvus's proxy counted (its metrics show no count of compaction requests). Prints one markdown
table row per phase, the load averages and the commit; ``--json`` prints everything measured.

    .venv/bin/python bench/probes/purge_restart.py --tenants 40 --purges 60 --load-threads 2 [--check-interval 1] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support

from tests.support import Agent, draft, full_view, put_view, token_for  # noqa: E402
from tests.support_distributed import Deployment, ExternalPostgres, MilvusStandalone  # noqa: E402

from memoryd.v1 import memory_service_pb2 as svc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PURGE, WAIT = svc.ERASE_MODE_PURGE, svc.CONSISTENCY_WAIT_INDEXED
DEADLINE = 60.0  # the probe's own client deadline: generous, so every latency is seen whole
TYPICAL_DEADLINE = 10.0  # what a client with a typical deadline would have given up after
# Found by meaning only: the query shares no word with the memory (nor with its key).
MEANT, MEANING_QUERY = "Alice keeps bees on her roof in Lyon", "beekeeping honey"
TOPICS = ("sailing lessons on the lake", "a broken laptop screen", "the dentist appointment", "learning Portuguese",
          "a birthday dinner for Sam", "the quarterly budget review", "a hiking trip in the Alps", "the new espresso machine")


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    verified: int = 0
    unverified: int = 0
    unchecked: Counter[str] = field(default_factory=Counter)
    pending: Counter[str] = field(default_factory=Counter)
    erased: int = 0
    segments_before: dict[str, Any] = field(default_factory=dict)
    segments_after: dict[str, Any] = field(default_factory=dict)
    segments_trace: list[int | None] = field(default_factory=list)  # persistent, after each purge
    flushes: float = 0.0
    seconds: float = 0.0
    load: dict[str, Any] = field(default_factory=dict)
    loadavg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    started_utc: str = ""
    ended_utc: str = ""


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (statistics' 'inclusive' method)."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


class Segments:
    """The memoryd collection's segments as the Milvus server reports them, through a pymilvus
    client of the probe's own (made again after a restart)."""

    def __init__(self, milvus: MilvusStandalone) -> None:
        self.milvus = milvus
        self.collection = ""
        self._client: Any = None

    def _connect(self) -> Any:
        from pymilvus import MilvusClient

        if self._client is None:
            self._client = MilvusClient(uri=self.milvus.uri, timeout=10)
        if not self.collection:
            found = [c for c in self._client.list_collections(timeout=10) if c.startswith("memoryd_")]
            assert len(found) == 1, f"expected one memoryd collection, found {found}"
            self.collection = found[0]
        return self._client

    def count(self) -> dict[str, Any]:
        """Persistent segments by state (the data coordinator's view) and loaded segments (the
        query nodes'), with their rows; {'error': ...} while the server cannot say."""
        for attempt in range(3):  # a compaction that drops a segment mid-listing fails the listing
            try:
                client = self._connect()
                persistent = client.list_persistent_segments(self.collection, timeout=10)
                loaded = client.list_loaded_segments(self.collection, timeout=10)
                break
            except Exception as exc:  # noqa: BLE001 - a figure, not a failure
                if attempt == 2:
                    return {"error": type(exc).__name__ + ": " + str(exc)[:160]}
                time.sleep(0.2)
        states = Counter(_state(s.state) for s in persistent)
        return {"persistent": len(persistent), "persistent_by_state": dict(states),
                "persistent_rows": sum(int(s.num_rows) for s in persistent),
                "loaded": len(loaded), "loaded_rows": sum(int(s.num_rows) for s in loaded)}

    def load_state(self) -> str:
        try:
            state = self._connect().get_load_state(self.collection, timeout=5)
        except Exception as exc:  # noqa: BLE001
            return "error: " + type(exc).__name__
        return f"{str(state['state']).rsplit('.', 1)[-1]} {state.get('progress', '')}".strip()

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None


def _state(value: Any) -> str:
    from pymilvus.client.types import SegmentState

    if isinstance(value, SegmentState):
        return str(value.name)
    with contextlib.suppress(ValueError, TypeError):
        return str(SegmentState(value).name)
    return str(value)


def segment_text(seg: dict[str, Any]) -> str:
    if "error" in seg:
        return "?"
    return f"{seg['persistent']}/{seg['loaded']}"


@dataclass
class Target:
    tenant: int
    subject: str
    key: str  # "" erases the whole subject


class Shape:
    """The running deployment and the probe's callers (one channel per replica)."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.signing = deployment.keys / "signing.pem"
        self.channels = [grpc.insecure_channel(r.target) for r in deployment.replicas]

    def agent(self, tenant: str, replica: int) -> Agent:
        return Agent(self.channels[replica], token_for(self.signing, tenant))

    def add_tenant(self, tenant: str) -> None:
        put_view(self.channels[0], self.signing, tenant, full_view("agent-1"))

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


def seed(shape: Shape, tenants: int, memories: int) -> list[Target]:
    """TENANTS tenants, MEMORIES keyed memories each, two per subject, all indexed; returns the
    purge targets, tenants interleaved: a key, then the rest of its subject."""
    rounds: list[list[Target]] = [[] for _ in range(memories)]
    for t in range(tenants):
        tenant = f"purge-{t}"
        shape.add_tenant(tenant)
        by_subject: dict[str, list[Any]] = {}
        for m in range(memories):
            subject = f"s{m // 2}"
            topic = TOPICS[(t + m) % len(TOPICS)]
            by_subject.setdefault(subject, []).append(draft("fact", f"{subject} talked about {topic} ({t}.{m})",
                                                            key=f"k{m}"))
            rounds[m].append(Target(t, subject, f"k{m}" if m % 2 == 0 else ""))
        for subject, items in by_subject.items():
            done = shape.agent(tenant, t % 2).call("Write", svc.WriteRequest(subject=subject, items=items,
                                                                             consistency=WAIT), timeout=120)
            assert all(r.memory_id for r in done.results) and done.indexed, done
    return [target for one_round in rounds for target in one_round]


def purge(shape: Shape, target: Target, replica: int, phase: Phase) -> None:
    tenant = f"purge-{target.tenant}"
    request = svc.EraseRequest(subject=target.subject, mode=PURGE, reason="bench")
    if target.key:
        request.key = target.key
    else:
        request.all_of_subject = True
    started = time.monotonic()
    try:
        receipt = shape.agent(tenant, replica).call("Erase", request, timeout=DEADLINE).receipt
    except grpc.RpcError as exc:
        phase.latencies.append(time.monotonic() - started)
        phase.failures[exc.code().name] += 1
        return
    phase.latencies.append(time.monotonic() - started)
    phase.erased += receipt.counts.memories
    if receipt.verified:
        phase.verified += 1
    else:
        phase.unverified += 1
    phase.unchecked.update(receipt.unchecked)
    phase.pending.update(getattr(receipt, "pending", ()))  # a receipt field since issue 39


class Load:
    """THREADS callers writing (WAIT_INDEXED every other write) and recalling in tenants of
    their own, without pause, until stopped."""

    def __init__(self, shape: Shape, threads: int) -> None:
        self.shape, self.stop = shape, threading.Event()
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.seconds = 0.0
        for n in range(threads):
            shape.add_tenant(f"load-{n}")
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(threads)]

    def _count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    def _run(self, n: int) -> None:
        agent, i = self.shape.agent(f"load-{n}", n % 2), 0
        while not self.stop.is_set():
            topic = TOPICS[i % len(TOPICS)]
            try:
                agent.call("Write", svc.WriteRequest(subject=f"u{i % 5}", items=[draft("event", f"Talked about {topic}, {i}")],
                                                     consistency=WAIT if i % 2 else svc.CONSISTENCY_UNSPECIFIED),
                           timeout=DEADLINE)
                self._count("writes_waited" if i % 2 else "writes")
            except grpc.RpcError as exc:
                self._count(f"write_{exc.code().name}")
            try:
                found = agent.call("Recall", svc.RecallRequest(subject=f"u{i % 5}", query=topic), timeout=DEADLINE)
                self._count("recalls_degraded" if found.degraded else "recalls")
            except grpc.RpcError as exc:
                self._count(f"recall_{exc.code().name}")
            i += 1

    @contextlib.contextmanager
    def running(self) -> Iterator[Load]:
        started = time.monotonic()
        for thread in self.threads:
            thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            for thread in self.threads:
                thread.join(DEADLINE + 5)
            self.seconds = time.monotonic() - started


def purge_phase(name: str, shape: Shape, milvus: MilvusStandalone, segments: Segments, targets: list[Target],
                load: Load | None) -> Phase:
    phase = Phase(name, started_utc=utc_now(), segments_before=segments.count())
    flushes = milvus.requests("Flush")
    started = time.monotonic()
    with load.running() if load else contextlib.nullcontext():
        for n, target in enumerate(targets):
            purge(shape, target, n % 2, phase)
            phase.segments_trace.append(segments.count().get("persistent"))
    phase.seconds = time.monotonic() - started
    phase.flushes = milvus.requests("Flush") - flushes
    phase.segments_after = segments.count()
    if load:
        ops = load.counts
        phase.load = {"threads": len(load.threads), "seconds": round(load.seconds, 1), **ops,
                      "ops_per_s": round((ops["writes"] + ops["writes_waited"] + ops["recalls"]) / load.seconds, 2)}
    phase.loadavg, phase.ended_utc = os.getloadavg(), utc_now()
    return phase


def by_meaning(shape: Shape, replica: int, meant_id: str) -> bool:
    try:
        found = shape.agent("meaning", replica).call(
            "Recall", svc.RecallRequest(subject="alice", query=MEANING_QUERY, min_relevance=0.0), timeout=10)
    except grpc.RpcError:
        return False
    return not found.degraded and any(m.memory.id == meant_id and m.dense_rank > 0 for m in found.memories)


def restart_phase(shape: Shape, milvus: MilvusStandalone, segments: Segments, meant_id: str, cap: float,
                  poll: float) -> dict[str, Any]:
    result: dict[str, Any] = {"started_utc": utc_now(), "segments_before": segments.count()}
    segments.close()
    killed = time.monotonic()
    milvus.kill()  # returns once its ports can be bound again
    result["kill_to_ports_free_s"] = round(time.monotonic() - killed, 1)
    starting = time.monotonic()
    milvus.start()
    up = time.monotonic()  # its health check answered
    result["start_s"] = round(up - starting, 1)
    found: dict[int, float] = {}
    states: list[tuple[float, str]] = []
    while len(found) < len(shape.channels) and time.monotonic() - up < cap:
        for replica in range(len(shape.channels)):
            if replica not in found and by_meaning(shape, replica, meant_id):
                found[replica] = round(time.monotonic() - up, 1)
        state = segments.load_state()
        if not states or states[-1][1] != state:
            states.append((round(time.monotonic() - up, 1), state))
        time.sleep(poll)
    result["recall_by_meaning_s"] = {f"replica-{r}": found.get(r) for r in range(len(shape.channels))}
    result["load_states"] = states  # (seconds after ports up, state and progress) at each change
    result["segments_after"] = segments.count()
    result["loadavg"], result["ended_utc"] = os.getloadavg(), utc_now()
    return result


def confirmation(deployment: Deployment, cap: float) -> float | None:
    """Seconds until no purge waits in the re-check queue (the workers' erasure rounds have
    confirmed the vectors' deletion and their compaction out of the files); None past ``cap``."""
    import psycopg

    started = time.monotonic()
    with psycopg.connect(deployment.worker_dsn, autocommit=True) as conn:  # the workers' role reads every tenant's
        while time.monotonic() - started < cap:
            if not conn.execute("SELECT count(*) FROM erasure_rechecks").fetchone()[0]:
                return round(time.monotonic() - started, 1)
            time.sleep(1)
    return None


def summary(phase: Phase) -> dict[str, Any]:
    lat = phase.latencies
    return {"purges": len(lat), "p50_s": round(quantile(lat, 0.50), 2), "p99_s": round(quantile(lat, 0.99), 2),
            "max_s": round(max(lat), 2) if lat else None,
            "over_10s": sum(1 for x in lat if x > TYPICAL_DEADLINE), "failures": dict(phase.failures),
            "verified": phase.verified, "unverified": phase.unverified, "unchecked": dict(phase.unchecked),
            "pending": dict(phase.pending),
            "memories_erased": phase.erased, "seconds": round(phase.seconds, 1),
            "flush_requests": phase.flushes,
            "segments_before": phase.segments_before, "segments_after": phase.segments_after,
            "segments_after_each_purge": phase.segments_trace,
            "load": phase.load, "loadavg": [round(x, 2) for x in phase.loadavg],
            "started_utc": phase.started_utc, "ended_utc": phase.ended_utc, "latencies_s": [round(x, 2) for x in lat]}


def report(args: argparse.Namespace, phases: list[Phase], restart: dict[str, Any] | None, commit: str) -> None:
    interval = "Milvus default (10 s)" if args.check_interval is None else f"{args.check_interval} s"
    print(f"\ncommit {commit}; {args.tenants} tenants x {args.memories} memories; compaction check interval "
          f"{interval}; {args.load_threads} load threads")
    print("\n| phase | purges | p50 s | p99 s | max s | > 10 s | failed | verified / not | unchecked "
          "| segments before → after (persistent/loaded) | Flush requests | load ops/s | loadavg 1/5/15 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for phase in phases:
        s = summary(phase)
        unchecked = ", ".join(f"{k} ×{v}" for k, v in sorted(s["unchecked"].items())) or "—"
        if s["pending"]:
            unchecked += "; pending: " + ", ".join(f"{k} ×{v}" for k, v in sorted(s["pending"].items()))
        failed = sum(phase.failures.values())
        load = f"{phase.load['ops_per_s']}" if phase.load else "—"
        print(f"| {phase.name} | {s['purges']} | {s['p50_s']:.1f} | {s['p99_s']:.1f} | {s['max_s']:.1f} | "
              f"{s['over_10s']} | {failed} | {s['verified']} / {s['unverified']} | {unchecked} | "
              f"{segment_text(phase.segments_before)} → {segment_text(phase.segments_after)} | {s['flush_requests']:.0f} | "
              f"{load} | {'/'.join(f'{x:.2f}' for x in phase.loadavg)} |")
    if restart:
        times = ", ".join(f"{k} {v if v is not None else f'> {args.restart_cap:.0f}'} s"
                          for k, v in restart["recall_by_meaning_s"].items())
        print("\n| restart | kill → ports free s | start → ports up s | recall by meaning after ports up "
              "| segments before → after | loadavg 1/5/15 |")
        print("|---|---|---|---|---|---|")
        print(f"| restart | {restart['kill_to_ports_free_s']} | {restart['start_s']} | {times} | "
              f"{segment_text(restart['segments_before'])} → {segment_text(restart['segments_after'])} | "
              f"{'/'.join(f'{x:.2f}' for x in restart['loadavg'])} |")
        print("\nload state after ports up: " + "; ".join(f"{t} s {s}" for t, s in restart["load_states"]))
    for phase in phases:
        if phase.load:
            print(f"load during {phase.name}: {json.dumps(phase.load)}")
    if args.json:
        print(json.dumps({"commit": commit, "args": vars(args), "phases": [summary(p) for p in phases],
                          "restart": restart}, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=40)
    parser.add_argument("--memories", type=int, default=4, help="per tenant, two per subject (even)")
    parser.add_argument("--purges", type=int, default=60, help="per purge phase")
    parser.add_argument("--load-threads", type=int, default=2, help="0 skips the load phase")
    parser.add_argument("--check-interval", type=int, default=None,
                        help="dataCoord.compaction.check.interval in s (default: Milvus's own, 10 s)")
    parser.add_argument("--restart-cap", type=float, default=600.0)
    parser.add_argument("--no-restart", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep-logs", type=Path, help="copy Milvus's and memoryd's logs here before cleaning up")
    args = parser.parse_args()
    phases = 1 + (args.load_threads > 0)
    if args.memories % 2 or args.tenants * args.memories < phases * args.purges:
        parser.error("--memories must be even and tenants x memories at least the purges of every phase")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                      text=True).stdout.strip():
        commit += "+uncommitted changes"
    print(f"{utc_now()} UTC, commit {commit}, loadavg {os.getloadavg()}", flush=True)
    pg = ExternalPostgres().start()
    # Its own etcd ports: other engineers' test runs start Milvus servers on this machine too.
    milvus = MilvusStandalone(compaction_check_interval=args.check_interval, own_etcd_ports=True).start()
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-purge-"))
    try:
        run(args, pg, milvus, root, commit)
    finally:
        if args.keep_logs:
            shutil.copytree(milvus.root / "data" / "logs", args.keep_logs / "milvus", dirs_exist_ok=True)
            for log in root.glob("*.log"):
                shutil.copy(log, args.keep_logs)
        shutil.rmtree(root, ignore_errors=True)
        milvus.destroy()
        pg.destroy()


def step(what: str) -> Callable[[], None]:
    started = time.monotonic()
    print(f"{utc_now()} {what} ...", flush=True)
    return lambda: print(f"{utc_now()}   done in {time.monotonic() - started:.1f} s", flush=True)


def run(args: argparse.Namespace, pg: ExternalPostgres, milvus: MilvusStandalone, root: Path, commit: str) -> None:
    owner = pg.create_owner_database("bench")
    (root / "keys").mkdir(mode=0o700)
    deployment = Deployment(pg, milvus, owner, root / "keys", root)
    assert deployment.migrate().returncode == 0
    done = step("2 replicas, 2 workers")
    deployment.start_replica()  # the first creates the shared keys and the collection
    deployment.start_replica()
    deployment.start_worker()
    deployment.start_worker()
    done()
    shape, segments = Shape(deployment), Segments(milvus)
    try:
        done = step(f"seeding {args.tenants} tenants x {args.memories} memories (WAIT_INDEXED)")
        shape.add_tenant("meaning")
        meant = shape.agent("meaning", 0).write("alice", draft("fact", MEANT, key="hobby"), consistency=WAIT)
        assert meant.indexed and by_meaning(shape, 1, meant.results[0].memory_id), "the seeded memory is not found by meaning"
        targets = seed(shape, args.tenants, args.memories)
        done()
        phases = []
        done = step(f"idle: {args.purges} purges")
        phases.append(purge_phase("idle", shape, milvus, segments, targets[:args.purges], None))
        done()
        if args.load_threads:
            done = step(f"load: {args.purges} purges, {args.load_threads} threads writing and recalling")
            phases.append(purge_phase("load", shape, milvus, segments, targets[args.purges:2 * args.purges],
                                      Load(shape, args.load_threads)))
            done()
        done = step("waiting until the workers' erasure rounds have confirmed every purge")
        confirmed = confirmation(deployment, args.restart_cap)
        print(f"every purge confirmed (erasure_rechecks empty) {confirmed} s after the last one", flush=True)
        done()
        restart = None
        if not args.no_restart:
            done = step("restart: SIGKILL Milvus, start it, recall by meaning through each replica")
            restart = restart_phase(shape, milvus, segments, meant.results[0].memory_id, args.restart_cap, 0.5)
            done()
        report(args, phases, restart, commit)
    finally:
        segments.close()
        shape.close()
        deployment.stop_all()


if __name__ == "__main__":
    main()

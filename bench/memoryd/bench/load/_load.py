"""``memoryd bench load``: a bounded, closed-loop load generator on loopback.

Sets up ``tenants`` tenants (a tenant admin token stores a full view for the agent ``load``
in each), seeds every subject with a few memories, then runs ``concurrency`` workers for
``duration`` seconds. Each worker, in a loop: picks a tenant and a subject at random, picks
an operation by the mix (80 % Recall, 15 % Write, 3 % MemoryView, 2 % Erase), calls it with
a deadline and records the latency and the status code. Closed loop: a worker's next call
starts when its previous one ended, so the load is bounded by ``concurrency``.

Every Write carries an idempotency key and every memory id it acknowledges is recorded. An
Erase purges one acknowledged memory (taken out of the pool under a lock, so no two workers
erase the same one, and no acknowledged memory is ever erased by anyone else). At the end
every subject is listed (MemoryView, every status) and each acknowledged memory that the run
did not erase itself must be there: a missing one is a **lost write**. An Erase that failed
leaves its memory uncertain; it is counted as an error and left out of the check.

Given several addresses (replicas of one deployment, sharing one signing key), the calls are
spread over them round robin — each worker starts at its own replica and moves to the next
with every call — so a memory written through one replica is recalled, listed and erased
through the others; setup and the final check go through the first.

Calls go through ``memoryd.client`` (a client per tenant over each server's one channel),
without retries: a failed call is counted, not hidden behind a second attempt.

Only loopback addresses are accepted: this is a tool for one's own machine, not for load
testing somebody else's server.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import random
import re
import socket
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import grpc

from memoryd.client import NO_RETRY, MemorydClient, MemorydError
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from .._locomo import BenchError, rpc_failure
from .._metrics import percentile
from .._proc import resident
from .._server import EmbeddedServer

OPERATIONS = ("Recall", "Write", "MemoryView", "Erase")
# The mix: 80 % Recall, 15 % Write, 5 % MemoryView/Erase (split 3 / 2).
MIX: Mapping[str, float] = {"Recall": 0.80, "Write": 0.15, "MemoryView": 0.03, "Erase": 0.02}
AGENT = "load"
ADMIN = "load-admin"
ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]  # superseded ones are versions
_WORDS = ("apple", "harbour", "cello", "marathon", "Berlin", "puppy", "recital", "pastry", "fjord", "Norwegian",
          "mountain", "garden", "bicycle", "coffee", "library", "painting", "river", "winter", "concert", "recipe",
          "train", "island", "market", "violin", "football", "museum", "sunrise", "novel", "kitchen", "lantern")


@dataclass(frozen=True)
class LoadOptions:
    addrs: tuple[str, ...] = ()       # servers of one deployment; none: start an embedded server
    key_file: Path | None = None      # their signing key (needed with addrs)
    tenants: int = 100
    subjects: int = 2                 # per tenant
    seed_memories: int = 5            # per subject
    concurrency: int = 8
    duration: float = 60.0
    seed: int = 0
    deadline: float = 10.0            # per call, seconds
    write_items: int = 2              # items per load Write
    start_timeout: float = 180.0
    run_id: str = ""                  # tenant prefix; random when empty


@dataclass
class OpStats:
    latencies_ms: list[float] = field(default_factory=list)   # successful calls
    errors: Counter[str] = field(default_factory=Counter)     # by status code name

    @property
    def calls(self) -> int:
        return len(self.latencies_ms) + sum(self.errors.values())


@dataclass
class LoadResult:
    options: LoadOptions
    server: dict[str, Any]
    seconds: float                     # the measured phase
    setup_seconds: float
    verify_seconds: float
    ops: dict[str, OpStats]
    acknowledged: int                  # memories acknowledged by Write (seeds included)
    erased: int                        # of those, purged by this run's Erase calls
    uncertain: int                     # taken by an Erase that failed
    lost: list[tuple[str, str, str]]   # (tenant, subject, memory_id) missing at the end
    inactive: int                      # present but no longer active (lifecycle)
    erase_mismatches: int              # an Erase of one id that did not report 1 memory
    degraded: int                      # Recall responses marked degraded
    server_rss_bytes: dict[str, int | None] = field(default_factory=dict)
    calls_by_addr: dict[str, int] = field(default_factory=dict)  # measured calls per server address
    # The embedded server's WARNING and ERROR log lines, numbers and ids masked, by count: what
    # an unverified receipt or an error was about, after the server's folder is gone.
    server_warnings: Counter[str] = field(default_factory=Counter)

    @property
    def errors(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for stats in self.ops.values():
            total.update(stats.errors)
        return total

    def summary(self, op: str) -> dict[str, Any]:
        stats = self.ops[op]
        lat = stats.latencies_ms
        return {"calls": stats.calls, "ok": len(lat), "errors": dict(stats.errors),
                "per_second": len(lat) / self.seconds if self.seconds > 0 else None,
                "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95), "p99_ms": percentile(lat, 99),
                "max_ms": max(lat) if lat else None}


def is_loopback(addr: str) -> bool:
    """True if every address ``host:port`` resolves to is a loopback address."""
    host = addr.rsplit(":", 1)[0] if ":" in addr else addr
    host = host.strip("[]")
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def choose_op(rng: random.Random) -> str:
    x = rng.random()
    for op in OPERATIONS:
        x -= MIX[op]
        if x < 0:
            return op
    return OPERATIONS[0]


def process_rss(pid: int) -> dict[str, int | None]:
    """RSS of a process and of it plus its descendants (Linux /proc), in bytes."""
    own, total = resident(pid)
    return {"server": own, "with_children": total if own is not None else None}


class _Tenant:
    def __init__(self, name: str, token: str, subjects: list[str], channels: Sequence[grpc.Channel],
                 deadline: float) -> None:
        self.name = name
        # The tenant's agent on every server: one client per channel (the channels are shared by
        # every tenant); ``client``, on the first server, does setup and verification.
        self.clients = [MemorydClient(channel=channel, token=token, timeout=deadline, retry=NO_RETRY)
                        for channel in channels]
        self.client = self.clients[0]
        self.subjects = subjects
        # Acknowledged, not yet erased memory ids per subject; erased ones move to `erased`.
        self.live: dict[str, list[str]] = {s: [] for s in subjects}
        self.erased: dict[str, set[str]] = {s: set() for s in subjects}
        self.uncertain: dict[str, set[str]] = {s: set() for s in subjects}
        self.lock = threading.Lock()


class _Run:
    def __init__(self, options: LoadOptions, channels: Sequence[grpc.Channel], key_path: Path) -> None:
        from memoryd.server import issue_token, load_signing_key  # deferred: see memoryd.cli (commands start light)

        self.options = options
        # One channel per server; setup and verification use the first.
        self.channels = list(channels)
        self.calls_by_replica = [0] * len(self.channels)
        self.key = load_signing_key(key_path)
        run_id = options.run_id or uuid.uuid4().hex[:8]
        self.run_id = run_id
        ttl = int(options.duration + 3600)
        self.tenants = [_Tenant(f"load-{run_id}-{i:03d}",
                                issue_token(self.key, tenant=f"load-{run_id}-{i:03d}", agent=AGENT,
                                            ttl_seconds=ttl),
                                [f"user-{j}" for j in range(options.subjects)], self.channels, options.deadline)
                        for i in range(options.tenants)]
        self.ops = {op: OpStats() for op in OPERATIONS}
        self.stats_lock = threading.Lock()
        self.counter = 0
        self.erase_mismatches = 0
        self.degraded = 0

    # -- helpers ---------------------------------------------------------------------------

    def _text(self, rng: random.Random) -> str:
        with self.stats_lock:
            self.counter += 1
            n = self.counter
        words = " ".join(rng.choice(_WORDS) for _ in range(6))
        return f"memory {n} of {self.run_id}: the user mentioned {words}."

    def _write(self, tenant: _Tenant, subject: str, count: int, rng: random.Random, replica: int = 0) -> None:
        items = [pb.MemoryDraft(category=pb.CATEGORY_EVENT, text=self._text(rng)) for _ in range(count)]
        key = f"load-{uuid.uuid4().hex}"
        response = tenant.clients[replica].write(svc.WriteRequest(subject=subject, items=items, idempotency_key=key),
                                                 timeout=self.options.deadline)
        ids = [r.memory_id for r in response.results if r.memory_id]
        if len(ids) != count:
            raise _Mismatch(f"Write acknowledged {len(ids)} of {count} items")
        with tenant.lock:
            tenant.live[subject].extend(ids)

    # -- setup -----------------------------------------------------------------------------

    def setup_tenant(self, tenant: _Tenant, rng: random.Random) -> None:
        from memoryd.server import issue_token  # deferred: see memoryd.cli (commands start light)

        token = issue_token(self.key, tenant=tenant.name, agent=ADMIN, roles=("admin",), ttl_seconds=600)
        every = [pb.ViewRule(category=c, key_patterns=["*"])
                 for c in pb.Category.values() if c != pb.CATEGORY_UNSPECIFIED]
        fields = [f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable"]
        view = pb.View(agent=AGENT, read_rules=every, write_rules=every, may_erase=True, visible_fields=fields,
                       description="load generator (memoryd bench load)")
        MemorydClient(channel=self.channels[0], token=token, retry=NO_RETRY).put_view(
            view=view, timeout=max(self.options.deadline, 30))
        for subject in tenant.subjects:
            if self.options.seed_memories:
                self._write(tenant, subject, self.options.seed_memories, rng)

    # -- the measured loop -----------------------------------------------------------------

    def call(self, op: str, rng: random.Random, replica: int = 0) -> None:
        tenant = rng.choice(self.tenants)
        subject = rng.choice(tenant.subjects)
        memory = tenant.clients[replica]
        if op == "Recall":
            query = " ".join(rng.choice(_WORDS) for _ in range(3))
            # No minimum relevance (synthetic text): the whole Recall, comparable with runs before
            # there was a minimum.
            response = memory.recall(svc.RecallRequest(subject=subject, query=query, top_k=10, min_relevance=0.0),
                                     timeout=self.options.deadline)
            if response.degraded:
                with self.stats_lock:
                    self.degraded += 1
        elif op == "Write":
            self._write(tenant, subject, self.options.write_items, rng, replica)
        elif op == "MemoryView":
            memory.memory_view(svc.MemoryViewRequest(subject=subject, page_size=50), timeout=self.options.deadline)
        else:
            with tenant.lock:
                pool = tenant.live[subject]
                if not pool:
                    memory_id = ""
                else:
                    memory_id = pool.pop(rng.randrange(len(pool)))
                    tenant.uncertain[subject].add(memory_id)
            if not memory_id:  # nothing to erase here: list instead, so the call still counts
                memory.memory_view(svc.MemoryViewRequest(subject=subject, page_size=50),
                                   timeout=self.options.deadline)
                return
            receipt = memory.erase(
                svc.EraseRequest(subject=subject, ids=svc.MemoryIds(ids=[memory_id]), mode=svc.ERASE_MODE_PURGE,
                                 reason="load generator"),
                timeout=self.options.deadline).receipt
            with tenant.lock:
                tenant.uncertain[subject].discard(memory_id)
                tenant.erased[subject].add(memory_id)
            if receipt.counts.memories != 1 or not receipt.verified:
                with self.stats_lock:
                    self.erase_mismatches += 1

    def worker(self, index: int, stop_at: float, stop: threading.Event, progress: Callable[[], None]) -> None:
        rng = random.Random(self.options.seed * 1_000_003 + index)
        turn = index
        while time.monotonic() < stop_at and not stop.is_set():
            op = choose_op(rng)
            replica = turn % len(self.channels)
            turn += 1
            started = time.perf_counter()
            code = ""
            try:
                self.call(op, rng, replica)
            except MemorydError as exc:
                code = exc.code.name
            except _Mismatch:
                code = "BAD_RESPONSE"
            elapsed = (time.perf_counter() - started) * 1000
            with self.stats_lock:
                self.calls_by_replica[replica] += 1
                if code:
                    self.ops[op].errors[code] += 1
                else:
                    self.ops[op].latencies_ms.append(elapsed)
            progress()

    # -- verification ----------------------------------------------------------------------

    def verify(self) -> tuple[list[tuple[str, str, str]], int]:
        lost: list[tuple[str, str, str]] = []
        inactive = 0
        for tenant in self.tenants:
            for subject in tenant.subjects:
                found = {m.id: m.status for m in tenant.client.iter_memories(
                    subject=subject, statuses=ALL_STATUSES, page_size=500, timeout=max(self.options.deadline, 30))}
                for memory_id in tenant.live[subject]:
                    status = found.get(memory_id)
                    if status is None:
                        lost.append((tenant.name, subject, memory_id))
                    elif status != pb.MEMORY_STATUS_ACTIVE:
                        inactive += 1
        return lost, inactive


class _Mismatch(Exception):
    """A call succeeded but its answer did not say what was asked."""


def _run_threads(count: int, target: Callable[[int, threading.Event], None], grace: float,
                 say: Callable[[str], None]) -> None:
    """``target(i, stop)`` on ``count`` threads, until all return.

    Interrupted (Ctrl-C, or SIGTERM through ``sigterm_unwinds``), it sets ``stop`` and waits up
    to ``grace`` seconds (the longest deadline of a call) for the calls in flight to end before
    the interruption goes on: the channels are closed next, and closing a gRPC channel while
    threads are blocked in calls on it can deadlock (grpc/grpc#19973, #20026) — `bench load`
    once hung on SIGTERM that way and never stopped its server."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def guarded(i: int) -> None:
        try:
            target(i, stop)
        except BaseException as exc:  # noqa: BLE001 — re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:
        stop.set()
        running = sum(thread.is_alive() for thread in threads)
        say(f"interrupted: letting the calls of {running} workers end (up to {grace:.0f} s), then stopping")
        until = time.monotonic() + grace
        for thread in threads:
            thread.join(max(0.0, until - time.monotonic()))
        if left := sum(thread.is_alive() for thread in threads):
            say(f"{left} workers still in a call after {grace:.0f} s: closing their channels anyway")
        raise
    if errors:
        raise errors[0]


def _load(options: LoadOptions, targets: Sequence[str], key_path: Path, server: dict[str, Any],
          rss: Callable[[], dict[str, int | None]] | None, stream: TextIO | None) -> LoadResult:
    def say(text: str) -> None:
        if stream is not None:
            stream.write(text + "\n")
            stream.flush()

    with ExitStack() as clients:
        # A client per server only to own its channel; every tenant's clients share the channels.
        opened = [clients.enter_context(MemorydClient(target, retry=NO_RETRY)).channel for target in targets]
        for target, channel in zip(targets, opened):
            try:
                grpc.channel_ready_future(channel).result(timeout=30)
            except grpc.FutureTimeoutError:
                raise BenchError(f"no memoryd answering at {target}") from None
        run = _Run(options, opened, key_path)
        started = time.monotonic()
        queue = list(run.tenants)
        queue_lock = threading.Lock()

        def set_up(i: int, stop: threading.Event) -> None:
            rng = random.Random(options.seed * 7919 + i)
            while not stop.is_set():
                with queue_lock:
                    if not queue:
                        return
                    tenant = queue.pop()
                try:
                    run.setup_tenant(tenant, rng)
                except MemorydError as exc:
                    raise rpc_failure(f"setting up tenant {tenant.name}", exc, targets[0]) from None

        say(f"setting up {options.tenants} tenants × {options.subjects} subjects × {options.seed_memories} memories")
        grace = max(options.deadline, 30.0)  # the longest timeout of a call (set-up's views, verify)
        _run_threads(max(1, min(options.concurrency, options.tenants)), set_up, grace, say)
        setup_seconds = time.monotonic() - started
        rss_before = rss() if rss else {}
        say(f"set up in {setup_seconds:.1f} s; running {options.concurrency} workers for {options.duration:.0f} s"
            + (f" over {len(targets)} servers" if len(targets) > 1 else ""))
        calls = [0]
        next_report = [time.monotonic() + 30]

        def progress() -> None:
            calls[0] += 1
            now = time.monotonic()
            if now >= next_report[0]:
                next_report[0] = now + 30
                say(f"  {now - begun:,.0f} s: {calls[0]} calls")

        begun = time.monotonic()
        stop_at = begun + options.duration
        _run_threads(options.concurrency, lambda i, stop: run.worker(i, stop_at, stop, progress), grace, say)
        seconds = time.monotonic() - begun
        rss_after = rss() if rss else {}
        say(f"ran {sum(s.calls for s in run.ops.values())} calls in {seconds:.1f} s; verifying acknowledged writes")
        verify_started = time.monotonic()
        lost, inactive = run.verify()
        verify_seconds = time.monotonic() - verify_started

    acknowledged = sum(len(t.live[s]) + len(t.erased[s]) + len(t.uncertain[s]) for t in run.tenants for s in t.subjects)
    return LoadResult(
        options=options, server=server, seconds=seconds, setup_seconds=setup_seconds, verify_seconds=verify_seconds,
        ops=run.ops, acknowledged=acknowledged,
        erased=sum(len(t.erased[s]) for t in run.tenants for s in t.subjects),
        uncertain=sum(len(t.uncertain[s]) for t in run.tenants for s in t.subjects),
        lost=lost, inactive=inactive, erase_mismatches=run.erase_mismatches, degraded=run.degraded,
        server_rss_bytes={**{f"before_{k}": v for k, v in rss_before.items()},
                          **{f"after_{k}": v for k, v in rss_after.items()}},
        calls_by_addr=dict(zip(targets, run.calls_by_replica)))


def run_load(options: LoadOptions, *, progress: TextIO | None = None) -> LoadResult:
    return run_load_curve(options, (options.concurrency,), progress=progress)[0]


def run_load_curve(options: LoadOptions, levels: Sequence[int], *,
                   progress: TextIO | None = None) -> list[LoadResult]:
    """A run at each of ``levels`` closed-loop workers in turn (``options.concurrency`` aside), on
    the same servers (an embedded one is started once): the throughput curve."""
    if options.tenants < 1 or options.subjects < 1 or min(levels, default=0) < 1 or options.duration <= 0:
        raise BenchError("tenants, subjects and concurrency must be at least 1 and the duration positive")
    if not 1 <= options.write_items <= 100 or not 0 <= options.seed_memories <= 100:
        raise BenchError("write items must be 1-100 and seed memories 0-100")
    at = [dataclasses.replace(options, concurrency=level) for level in levels]
    if options.addrs:
        for addr in options.addrs:
            if not is_loopback(addr):
                raise BenchError(f"refusing to load {addr}: the load generator only runs against loopback "
                                 "addresses (127.0.0.1, ::1, localhost)")
        if len(set(options.addrs)) != len(options.addrs):
            raise BenchError("an address is given twice")
        if options.key_file is None or not Path(options.key_file).is_file():
            raise BenchError("--addr needs --key-file: the servers' signing key, to store a view per tenant")
        return [_load(o, options.addrs, Path(options.key_file), {"embedded": False, "addrs": list(options.addrs)},
                      None, progress) for o in at]
    with EmbeddedServer(start_timeout=options.start_timeout) as server:
        pid = server.pid
        results = [_load(o, [server.target], server.signing_key_path, {"embedded": True},
                         (lambda: process_rss(pid)) if pid else None, progress) for o in at]
        warnings = log_warnings(server.log_path)  # the whole server's life: every level's
        for result in results:
            result.server_warnings = warnings
        return results


_LEVEL = re.compile(r" (WARNING|ERROR|CRITICAL) (\S+: .*)$")
_VARYING = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{16,}\b|\d+(\.\d+)?")


def log_warnings(path: Path) -> Counter[str]:
    """WARNING and higher lines of a plain-text memoryd log, ids and numbers masked, by count."""
    found: Counter[str] = Counter()
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        if match := _LEVEL.search(line):
            found[f"{match.group(1)} {_VARYING.sub('#', match.group(2))[:200]}"] += 1
    return found


# -- presenting ------------------------------------------------------------------------------



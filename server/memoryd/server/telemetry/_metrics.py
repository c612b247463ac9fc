"""OpenTelemetry metrics: a meter provider read by a Prometheus scrape endpoint
(``metrics_addr``) and/or pushed over OTLP (``metrics_exporter``); off when neither is set.

Instruments (attributes in brackets; none carries a subject or any content):

- ``rpc.server.call.duration`` histogram, seconds [rpc.system.name, rpc.method,
  rpc.response.status_code, error.type] — OpenTelemetry's RPC conventions (semconv 1.44)
- ``memoryd.recall.requests`` / ``memoryd.recall.hits`` (≥ 1 memory returned) /
  ``memoryd.recall.degraded`` counters
- ``memoryd.memories.erased`` counter of erased memories [mode], counted at erase
- read from Postgres every ``metrics_refresh_seconds`` (never per scrape), summed over tenants
  unless said: ``memoryd.outbox.pending``, ``memoryd.outbox.lag_seconds``,
  ``memoryd.outbox.dead_letters`` gauges; ``memoryd.memories.active`` gauge [memoryd.tenant]
  (at most ``metrics_max_tenants`` tenants, the first by id); ``memoryd.memories.forgotten``
  [reason] (lifecycle sweeps), ``memoryd.extraction.jobs`` [outcome],
  ``memoryd.extraction.parse_failures`` and ``memoryd.extraction.outage_retries`` counters;
  where this process runs extraction, ``memoryd.extraction.breaker.state`` [memoryd.model.endpoint
  (host:port only: a URL's path or query may hold a key), state] and
  ``memoryd.extraction.jobs.waiting`` (``memoryd.storage.model_outage``).
- the process, its Postgres pools and ``memoryd.build.info`` (``_process_metrics``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

from memoryd.storage import (
    ModelBreaker,
    ModelOutage,
    counters,
    lifecycle_tenants,
    model_outage,
    pending_job_tenants,
    outbox_lag,
    periodic,
    tenant_metrics,
)

from ._build import resource
from .._config import Config
from ._process_metrics import Pool, ProcessInstruments

_log = logging.getLogger("memoryd.server.metrics")

RPC_DURATION = "rpc.server.call.duration"
# What OpenTelemetry's gRPC conventions count as a server's error (the others are the caller's).
SERVER_ERRORS = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNIMPLEMENTED,
                           grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DATA_LOSS})
# Seconds: from a cached view lookup to a slow extraction-backed write.
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
FORGOTTEN = {counters.EXPIRED: "expired", counters.FORGOTTEN_STALE: "stale", counters.EVICTED: "evicted"}
JOBS = {counters.JOBS_QUEUED: "queued", counters.JOBS_SUCCEEDED: "succeeded", counters.JOBS_FAILED: "failed"}
BREAKER_STATES = ("closed", "half_open", "open")


@dataclass(frozen=True)
class Snapshot:
    """What the observable instruments report: replaced whole by each refresh."""

    outbox_pending: int = 0
    outbox_dead: int = 0
    outbox_lag_seconds: float = 0.0
    active: dict[str, int] = field(default_factory=dict)  # per tenant, bounded
    forgotten: dict[str, int] = field(default_factory=dict)  # per reason
    jobs: dict[str, int] = field(default_factory=dict)  # per outcome
    parse_failures: int = 0
    outage_retries: int = 0
    model: ModelOutage | None = None  # None where this process runs no extraction
    model_at: str = ""  # the model endpoint's host:port
    fresh: bool = False  # False until the first refresh: nothing is reported before it


class Metrics:
    """memoryd's instruments. Without a reader the provider records into nothing."""

    def __init__(self, config: Config, *, readers: Iterable[MetricReader] = ()) -> None:
        self.config = config
        readers = list(readers)
        self._http: Any = None
        self._http_thread: Any = None
        self.snapshot = Snapshot()
        if config.metrics_addr:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry

            self._registry = CollectorRegistry(auto_describe=True)
            readers.append(PrometheusMetricReader(registry=self._registry))
        exporter = config.metrics_exporter or ("otlp" if config.trace_exporter == "otlp" else "")
        if exporter == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
            except ImportError as exc:
                raise RuntimeError("metrics_exporter 'otlp' needs: pip install 'memoryd[otlp]'") from exc
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=config.otlp_endpoint or None)))
        self.enabled = bool(readers)
        self.provider = MeterProvider(
            metric_readers=readers,
            resource=resource(),
            views=[View(instrument_name=RPC_DURATION, aggregation=ExplicitBucketHistogramAggregation(DURATION_BUCKETS))],
        )
        meter = self.provider.get_meter("memoryd.server")
        self.rpc_duration = meter.create_histogram(
            RPC_DURATION, unit="s", description="Duration of memoryd RPCs, by method and status code")
        self.process = ProcessInstruments(meter)
        self.recall_requests = meter.create_counter("memoryd.recall.requests", description="Recall calls answered")
        self.recall_hits = meter.create_counter("memoryd.recall.hits",
                                                description="Recall calls that returned at least one memory")
        self.recall_degraded = meter.create_counter(
            "memoryd.recall.degraded", description="Recall calls answered without the dense channel")
        for counter in (self.recall_requests, self.recall_hits, self.recall_degraded):
            counter.add(0)  # present from the first scrape, so rates start at zero
        self.erased = meter.create_counter("memoryd.memories.erased",
                                           description="Memories erased by Erase, by mode (forget, purge)")
        meter.create_observable_gauge("memoryd.outbox.pending", [self._pending],
                                      description="Outbox rows waiting to reach the vector index")
        meter.create_observable_gauge("memoryd.outbox.lag_seconds", [self._lag], unit="s",
                                      description="Age of the oldest pending outbox row")
        meter.create_observable_gauge("memoryd.outbox.dead_letters", [self._dead],
                                      description="Outbox rows that ran out of attempts")
        meter.create_observable_gauge("memoryd.memories.active", [self._active],
                                      description="Active memories per tenant (at most metrics_max_tenants)")
        meter.create_observable_counter("memoryd.memories.forgotten", [self._forgotten],
                                        description="Memories forgotten by lifecycle sweeps, by reason")
        meter.create_observable_counter("memoryd.extraction.jobs", [self._jobs],
                                        description="Extraction jobs, by outcome (queued, succeeded, failed)")
        meter.create_observable_counter("memoryd.extraction.parse_failures", [self._parse_failures],
                                        description="Extraction model answers that could not be parsed")
        meter.create_observable_counter("memoryd.extraction.outage_retries", [self._outage_retries],
                                        description="Extraction jobs sent back to wait for a model that was out")
        meter.create_observable_gauge("memoryd.extraction.breaker.state", [self._breaker],
                                      description="The extraction model endpoint's circuit breaker: 1 for its "
                                                  "state (closed, half_open, open), 0 for the others")
        meter.create_observable_gauge("memoryd.extraction.jobs.waiting", [self._waiting],
                                      description="Extraction jobs waiting for their model to come back")

    # -- recording -----------------------------------------------------------------------

    def rpc(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        """One RPC (``method`` as gRPC names it, ``/package.Service/Method``) ended with ``code``."""
        attributes = {"rpc.system.name": "grpc", "rpc.method": method.lstrip("/"), "rpc.response.status_code": code.name}
        if code in SERVER_ERRORS:
            attributes["error.type"] = code.name
        self.rpc_duration.record(seconds, attributes)

    def watch_pool(self, pool: Pool) -> None:
        """Report a Postgres pool's connections (``db.client.connection.*``) from now on."""
        self.process.watch(pool)

    def recalled(self, returned: int, degraded: bool) -> None:
        self.recall_requests.add(1)
        if returned:
            self.recall_hits.add(1)
        if degraded:
            self.recall_degraded.add(1)

    def erased_memories(self, mode: str, n: int) -> None:
        self.erased.add(n, {"mode": mode})

    # -- the scrape endpoint -------------------------------------------------------------

    def serve(self) -> int:
        """Start the scrape endpoint (if configured); return its port (0: none)."""
        if not self.config.metrics_addr:
            return 0
        from prometheus_client import start_http_server

        host, _, port = self.config.metrics_addr.rpartition(":")
        self._http, self._http_thread = start_http_server(int(port), host.strip("[]") or "0.0.0.0",
                                                          registry=self._registry)
        return int(self._http.server_port)

    def shutdown(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http_thread.join(5)
            self._http = None
        self.provider.shutdown()

    # -- observable callbacks (run on the reader's thread; they only read the snapshot) ----

    def _pending(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.outbox_pending)] if s.fresh else []

    def _lag(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.outbox_lag_seconds)] if s.fresh else []

    def _dead(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.outbox_dead)] if s.fresh else []

    def _active(self, _: CallbackOptions) -> list[Observation]:
        return [Observation(n, {"memoryd.tenant": t}) for t, n in self.snapshot.active.items()]

    def _forgotten(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.forgotten.get(reason, 0), {"reason": reason}) for reason in FORGOTTEN.values()] \
            if s.fresh else []

    def _jobs(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.jobs.get(outcome, 0), {"outcome": outcome}) for outcome in JOBS.values()] \
            if s.fresh else []

    def _parse_failures(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.parse_failures)] if s.fresh else []

    def _outage_retries(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.outage_retries)] if s.fresh else []

    def _breaker(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        if s.model is None:
            return []
        return [Observation(int(s.model.breaker.state == state), {"memoryd.model.endpoint": s.model_at, "state": state})
                for state in BREAKER_STATES]

    def _waiting(self, _: CallbackOptions) -> list[Observation]:
        s = self.snapshot
        return [Observation(s.model.waiting)] if s.model is not None else []


class MetricsRefresher:
    """Re-reads the database-backed gauges every ``metrics_refresh_seconds``: one outbox query
    and a tenant list through the worker role, then one counting query per tenant (at most
    ``metrics_max_tenants``) through the app role, with the tenant set."""

    def __init__(self, metrics: Metrics, db: Any, worker_db: Any) -> None:
        self._metrics = metrics
        self._db = db
        self._worker_db = worker_db
        self._breaker: ModelBreaker | None = None
        self._model_at = ""

    def watch_model(self, breaker: ModelBreaker | None, model_at: str) -> None:
        """Report the extraction model's breaker (at ``model_at``, host:port) and the jobs
        waiting for it from the next refresh on."""
        self._breaker, self._model_at = breaker, model_at

    async def refresh(self) -> None:
        lag = await outbox_lag(self._worker_db)
        # Tenants with memories, and those whose jobs are still to run (an outage's retries
        # are counted before a job has written anything).
        listed = {*await lifecycle_tenants(self._worker_db), *await pending_job_tenants(self._worker_db)}
        tenants = sorted(listed)[: self._metrics.config.metrics_max_tenants]
        active: dict[str, int] = {}
        forgotten: dict[str, int] = {}
        jobs: dict[str, int] = {}
        parse_failures = outage_retries = 0
        for tenant in tenants:
            async with self._db.tenant_tx(tenant, pipelined=True) as conn:
                read = await tenant_metrics(conn)
            active[tenant] = read.active
            for name, reason in FORGOTTEN.items():
                forgotten[reason] = forgotten.get(reason, 0) + read.counts.get(name, 0)
            for name, outcome in JOBS.items():
                jobs[outcome] = jobs.get(outcome, 0) + read.counts.get(name, 0)
            parse_failures += read.counts.get(counters.EXTRACTION_PARSE_FAILURES, 0)
            outage_retries += read.counts.get(counters.EXTRACTION_OUTAGE_RETRIES, 0)
        model = await model_outage(self._worker_db, self._breaker) if self._breaker is not None else None
        self._metrics.snapshot = Snapshot(lag.pending, lag.dead, lag.oldest_pending_seconds, active, forgotten, jobs,
                                          parse_failures, outage_retries, model, self._model_at, fresh=True)

    async def run(self, stop: asyncio.Event) -> None:
        # Whatever a refresh raises must not end the loop: the last values stay.
        await periodic(stop, self._metrics.config.metrics_refresh_seconds, self.refresh, at_once=True,
                       what="could not refresh the database-backed metrics", survives=(Exception,))

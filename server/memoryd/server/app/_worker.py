"""A ``memoryd worker`` process: the outbox worker on its own, with health and metrics.

Health is grpc.health.v1 on ``worker_health_addr`` (the same protocol as the server, so
``memoryd health --addr`` and Kubernetes' gRPC probes work unchanged), re-checked every
``CHECK_SECONDS``:

- service ``""`` (the whole worker, for readiness): SERVING while the worker reaches
  PostgreSQL (through its own role) and every Milvus collection it fills, and its outbox loop
  turns; NOT_SERVING as soon as one of them fails.
- service ``"liveness"``: NOT_SERVING only when the loop has stalled — a batch running longer
  than ``STALL_SECONDS``, or no batch started for that long. An outage of PostgreSQL or
  Milvus is not something a restart cures (the loop waits and retries on its own), so it does
  not fail liveness.

A worker with no collection to fill yet (no server has registered an embedding model) has
no Milvus to check; it is SERVING on PostgreSQL alone, and leaves the outbox untouched until
it can write every model's collection (``IndexSet.writable``). Metrics are the server's
(``MEMORYD_METRICS_ADDR``, ``MEMORYD_METRICS_EXPORTER``): process, build and connection-pool
instruments, and the database-backed gauges (outbox pending, lag, dead letters) refreshed the
same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from memoryd.domain import MemorydError
from memoryd.storage import IndexSet, OutboxWorker, Postgres, periodic

from .._config import Config
from ._listen import NO_PORT_SHARING, listen, require_free_address
from ..telemetry import configure_logging
from ..telemetry import Metrics, MetricsRefresher

_log = logging.getLogger("memoryd.worker")

LIVENESS = "liveness"
CHECK_SECONDS = 5.0
# A batch is at most 32 memories: even at the ~330 ms per tenant a Milvus server's read-back
# costs, one takes ~10 s; the idle wait between batches is at most 10 s.
STALL_SECONDS = 120.0
CHECK_TIMEOUT = 12.0  # a Milvus call times out after 10 s on its own
HEALTH_ADDR_SETTING = "MEMORYD_WORKER_HEALTH_ADDR"

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class WatchedOutboxWorker(OutboxWorker):
    """The outbox worker, noting when each batch starts and ends (whatever its outcome);
    several batches may be in flight at once."""

    def __init__(self, *args: Any, clock: Callable[[], float] = time.monotonic, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clock = clock
        self._running: dict[object, float] = {}  # batches in flight: when each started
        self.batch_ended = clock()

    @property
    def batch_started(self) -> float | None:
        """When the oldest batch in flight started; None while none is."""
        return min(self._running.values(), default=None)

    async def drain_once(self) -> int:
        batch = object()
        self._running[batch] = self._clock()
        try:
            return await super().drain_once()
        finally:
            del self._running[batch]
            self.batch_ended = self._clock()

    def stalled(self, stall_seconds: float) -> bool:
        now = self._clock()
        started = self.batch_started
        since = started if started is not None else self.batch_ended
        return now - since > stall_seconds


@dataclass(frozen=True)
class WorkerCheck:
    """One health check: what failed, if anything (empty strings: fine)."""

    postgres: str = ""
    milvus: str = ""
    stalled: bool = False

    @property
    def serving(self) -> bool:
        return not (self.postgres or self.milvus or self.stalled)


class WorkerHealth:
    """Checks the worker's dependencies and loop, and answers grpc.health.v1 with the result."""

    def __init__(self, worker: WatchedOutboxWorker, queue: Postgres, indexes: IndexSet, *,
                 stall_seconds: float = STALL_SECONDS, check_seconds: float = CHECK_SECONDS,
                 timeout: float = CHECK_TIMEOUT) -> None:
        self._worker = worker
        self._queue = queue
        self._indexes = indexes
        self._stall = stall_seconds
        self._every = check_seconds
        self._timeout = timeout
        self.servicer = health.aio.HealthServicer()
        self.last = WorkerCheck(postgres="not checked yet")

    async def _postgres(self) -> str:
        try:
            async with asyncio.timeout(self._timeout):
                async with self._queue.worker_tx() as conn:
                    await conn.execute("SELECT 1")
        except TimeoutError:
            return f"no answer within {self._timeout:.0f}s"
        except MemorydError as exc:
            return exc.message
        except Exception as exc:  # noqa: BLE001 — a failed check must never end the health loop
            return str(exc) or type(exc).__name__
        return ""

    async def _milvus(self) -> str:
        try:
            return await self._indexes.unanswered(self._timeout)
        except MemorydError as exc:  # a refusal
            return exc.message
        except Exception as exc:  # noqa: BLE001 — a failed check must never end the health loop
            return str(exc) or type(exc).__name__

    async def check(self) -> WorkerCheck:
        postgres, milvus = await asyncio.gather(self._postgres(), self._milvus())
        result = WorkerCheck(postgres, milvus, self._worker.stalled(self._stall))
        if result != self.last:
            if result.serving:
                _log.info("worker health: SERVING")
            else:
                _log.warning("worker health: NOT_SERVING (postgres: %s; milvus: %s; loop: %s)",
                             result.postgres or "ok", result.milvus or "ok", "stalled" if result.stalled else "ok")
        self.last = result
        await self.servicer.set("", SERVING if result.serving else NOT_SERVING)
        await self.servicer.set(LIVENESS, NOT_SERVING if result.stalled else SERVING)
        return result

    async def run(self, stop: asyncio.Event) -> None:
        async def check() -> None:
            await self.check()

        await periodic(stop, self._every, check, at_once=True, what="worker health check")
        await self.servicer.enter_graceful_shutdown()


class WorkerProcess:
    """``memoryd worker``: ``start`` (health, metrics), ``run`` until stopped, then ``close``."""

    def __init__(self, config: Config, worker: WatchedOutboxWorker, indexes: IndexSet, db: Postgres,
                 queue: Postgres) -> None:
        self.config = config
        self.worker = worker
        self.indexes = indexes
        self.health = WorkerHealth(worker, queue, indexes)
        self.metrics = Metrics(config)
        self.metrics.watch_pool(db)
        self.metrics.watch_pool(queue)
        self._db = db
        self._queue = queue
        self._server: grpc.aio.Server | None = None
        self.health_port = 0
        self.metrics_port = 0

    @staticmethod
    def require_free_health_address(config: Config) -> None:
        """Before the worker opens its stores and loads its model: a health address another
        process holds stops it at once (ListenError); ``start`` binds it for good."""
        if config.worker_health_addr:
            require_free_address(config.worker_health_addr, HEALTH_ADDR_SETTING)

    async def start(self) -> None:
        config = self.config
        configure_logging(config)  # log_format, as the server applies it
        if config.worker_health_addr:
            server = grpc.aio.server(options=[NO_PORT_SHARING])
            health_pb2_grpc.add_HealthServicer_to_server(self.health.servicer, server)
            port = listen(server, config.worker_health_addr, HEALTH_ADDR_SETTING)
            await self.health.check()  # the first answer is a real one
            await server.start()
            self._server, self.health_port = server, port
        try:
            self.metrics_port = self.metrics.serve()
        except OSError as exc:
            raise OSError(f"cannot serve metrics on {config.metrics_addr}: {exc}") from exc
        if self.metrics_port:
            _log.info("metrics: http://%s:%d/metrics", config.metrics_addr.rpartition(":")[0], self.metrics_port)

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [self.worker.run(stop), self.indexes.run(stop)]
        if self._server is not None:
            tasks.append(self.health.run(stop))
        if self.metrics.enabled:
            tasks.append(MetricsRefresher(self.metrics, self._db, self._queue).run(stop))
        await asyncio.gather(*tasks)

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop(1)
            self._server = None
        self.metrics.shutdown()

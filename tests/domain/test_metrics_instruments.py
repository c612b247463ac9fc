"""The instruments themselves, read through an in-memory reader (no server)."""

from __future__ import annotations

import grpc
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from memoryd.server import Config
from memoryd.server.telemetry._build import build_info
from memoryd.server.telemetry._metrics import Metrics, Snapshot
from memoryd.storage import BreakerPosition, ModelOutage, PoolStats

from .conftest import COMMIT

pytestmark = pytest.mark.usefixtures("known_commit")


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, object], float]]]:
    data = reader.get_metrics_data()
    out: dict[str, list[tuple[dict[str, object], float]]] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] = [(dict(p.attributes or {}), getattr(p, "value", getattr(p, "count", 0)))
                                    for p in metric.data.data_points]
    return out


def test_recall_outcomes_and_erasures_are_counted():
    reader = InMemoryMetricReader()
    metrics = Metrics(Config(), readers=[reader])
    metrics.recalled(3, degraded=False)
    metrics.recalled(0, degraded=True)
    metrics.recalled(1, degraded=True)
    metrics.erased_memories("forget", 2)
    metrics.rpc("/memoryd.v1.MemoryService/Recall", grpc.StatusCode.INVALID_ARGUMENT, 0.002)
    metrics.rpc("/memoryd.v1.MemoryService/Write", grpc.StatusCode.UNAVAILABLE, 0.002)
    points = _points(reader)
    assert points["memoryd.recall.requests"] == [({}, 3)]
    assert points["memoryd.recall.hits"] == [({}, 2)]
    assert points["memoryd.recall.degraded"] == [({}, 2)]
    assert points["memoryd.memories.erased"] == [({"mode": "forget"}, 2)]
    # OpenTelemetry's RPC conventions: a caller's error is no error.type; the server's own is.
    assert sorted(points["rpc.server.call.duration"], key=str) == [
        ({"rpc.system.name": "grpc", "rpc.method": "memoryd.v1.MemoryService/Recall",
          "rpc.response.status_code": "INVALID_ARGUMENT"}, 1),
        ({"rpc.system.name": "grpc", "rpc.method": "memoryd.v1.MemoryService/Write",
          "rpc.response.status_code": "UNAVAILABLE", "error.type": "UNAVAILABLE"}, 1),
    ]
    metrics.shutdown()


def test_database_gauges_report_nothing_before_the_first_refresh_then_the_snapshot():
    reader = InMemoryMetricReader()
    metrics = Metrics(Config(), readers=[reader])
    assert "memoryd.outbox.lag_seconds" not in _points(reader)
    metrics.snapshot = Snapshot(outbox_pending=4, outbox_dead=1, outbox_lag_seconds=7.5, active={"t1": 3, "t2": 0},
                                forgotten={"expired": 2}, jobs={"failed": 1}, parse_failures=1, fresh=True)
    points = _points(reader)
    assert points["memoryd.outbox.pending"] == [({}, 4)]
    assert points["memoryd.outbox.dead_letters"] == [({}, 1)]
    assert points["memoryd.outbox.lag_seconds"] == [({}, 7.5)]
    assert sorted(points["memoryd.memories.active"], key=str) == [({"memoryd.tenant": "t1"}, 3),
                                                                  ({"memoryd.tenant": "t2"}, 0)]
    assert ({"reason": "expired"}, 2) in points["memoryd.memories.forgotten"]
    assert ({"outcome": "failed"}, 1) in points["memoryd.extraction.jobs"]
    assert points["memoryd.extraction.parse_failures"] == [({}, 1)]
    metrics.shutdown()


def test_the_model_outage_shows_as_the_breaker_state_and_the_waiting_jobs_only_where_extraction_runs():
    reader = InMemoryMetricReader()
    metrics = Metrics(Config(), readers=[reader])
    metrics.snapshot = Snapshot(outage_retries=5, fresh=True)  # a process that runs no extraction
    points = _points(reader)
    assert points["memoryd.extraction.outage_retries"] == [({}, 5)]
    assert "memoryd.extraction.breaker.state" not in points and "memoryd.extraction.jobs.waiting" not in points
    metrics.snapshot = Snapshot(outage_retries=6, model=ModelOutage(BreakerPosition("half_open"), 2),
                                model_at="10.0.0.9:11434", fresh=True)
    points = _points(reader)
    at = {"memoryd.model.endpoint": "10.0.0.9:11434"}
    assert sorted(points["memoryd.extraction.breaker.state"], key=str) == sorted([
        ({**at, "state": "closed"}, 0), ({**at, "state": "half_open"}, 1), ({**at, "state": "open"}, 0)], key=str)
    assert points["memoryd.extraction.jobs.waiting"] == [({}, 2)]
    metrics.shutdown()


class _Pool:
    def __init__(self, stats: PoolStats) -> None:
        self.stats = stats

    def pool_stats(self) -> PoolStats:
        return self.stats


def test_process_pool_and_build_instruments_report_this_process():
    reader = InMemoryMetricReader()
    metrics = Metrics(Config(), readers=[reader])
    app = _Pool(PoolStats("memoryd_app", used=2, idle=3, waiting=1, max=10))
    metrics.watch_pool(app)
    metrics.watch_pool(app)  # once is enough
    metrics.watch_pool(_Pool(PoolStats("memoryd_worker", used=0, idle=1, waiting=0, max=2)))
    points = _points(reader)
    cpu = dict((a["cpu.mode"], v) for a, v in points["process.cpu.time"])
    assert set(cpu) == {"user", "system"} and cpu["user"] > 0
    [(_, resident)] = points["process.memory.usage"]
    assert resident > 10 * 2**20  # a Python process with grpc and OpenTelemetry loaded
    [(_, fds)] = points["process.unix.file_descriptor.count"]
    assert fds >= 3  # stdin, stdout, stderr at least
    [(_, threads)] = points["process.thread.count"]
    assert threads >= 1
    assert sorted(points["db.client.connection.count"], key=str) == sorted([
        ({"db.client.connection.state": "used", "db.client.connection.pool.name": "memoryd_app"}, 2),
        ({"db.client.connection.state": "idle", "db.client.connection.pool.name": "memoryd_app"}, 3),
        ({"db.client.connection.state": "used", "db.client.connection.pool.name": "memoryd_worker"}, 0),
        ({"db.client.connection.state": "idle", "db.client.connection.pool.name": "memoryd_worker"}, 1),
    ], key=str)
    assert ({"db.client.connection.pool.name": "memoryd_app"}, 1) in points["db.client.connection.pending_requests"]
    assert ({"db.client.connection.pool.name": "memoryd_worker"}, 2) in points["db.client.connection.max"]
    info = build_info()
    assert info.commit == COMMIT
    assert points["memoryd.build.info"] == [({"version": info.version, "python_version": info.python_version,
                                              "commit": info.commit}, 1)]
    metrics.shutdown()

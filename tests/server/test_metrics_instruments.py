"""The instruments themselves, read through an in-memory reader (no server)."""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from memoryd.server import Config
from memoryd.server._metrics import Metrics, Snapshot


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
    metrics.rpc("/memoryd.v1.MemoryService/Recall", 3, 0.002)
    points = _points(reader)
    assert points["memoryd.recall.requests"] == [({}, 3)]
    assert points["memoryd.recall.hits"] == [({}, 2)]
    assert points["memoryd.recall.degraded"] == [({}, 2)]
    assert points["memoryd.memories.erased"] == [({"mode": "forget"}, 2)]
    assert points["memoryd.rpc.duration"] == [({"rpc.service": "memoryd.v1.MemoryService", "rpc.method": "Recall",
                                                "rpc.grpc.status_code": 3}, 1)]
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

"""A worker whose outbox loop stalls reports it on both health services; an outage of its
PostgreSQL fails readiness only. (The whole process against a real Milvus and PostgreSQL
going away: tests/e2e/test_worker_health.py.)

The stall is real: another connection holds the outbox table locked, so the worker's batch
waits inside PostgreSQL; a clock of the test's own stands for the minutes going by.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memoryd.server import WatchedOutboxWorker, WorkerHealth
from memoryd.server.app._worker import LIVENESS
from memoryd.storage import WORKER_ROLE, IndexSet, IndexTarget, Postgres, PostgresSettings

from ..support import until_blocked_by

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def queue(private_database: str) -> AsyncIterator[Postgres]:
    db = Postgres(PostgresSettings(private_database, pool_min=1, pool_max=2, timeout_seconds=2.0), role=WORKER_ROLE)
    await db.open()
    yield db
    await db.close()


async def _one_collection() -> list[IndexTarget]:
    return [IndexTarget(None, None)]  # type: ignore[arg-type]  # an empty outbox never reaches it


async def _statuses(health: WorkerHealth) -> tuple[int, int]:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            whole = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            alive = await stub.Check(health_pb2.HealthCheckRequest(service=LIVENESS), timeout=5)
    finally:
        await server.stop(0)
    return whole.status, alive.status


async def test_a_batch_stuck_past_the_stall_limit_fails_liveness_and_readiness(queue, private_database):
    clock = Clock()
    # One collection to fill, never touched (and no store needed): an empty outbox is claimed
    # and settled.
    worker = WatchedOutboxWorker(queue, None, _one_collection, clock=clock)
    health = WorkerHealth(worker, queue, IndexSet(queue, lambda _: None, milvus_uri="unused"), stall_seconds=120)
    assert (await health.check()).serving
    assert await _statuses(health) == (SERVING, SERVING)

    clock.now += 121  # no batch for two minutes: the loop is not turning
    assert (await health.check()).stalled
    assert await _statuses(health) == (NOT_SERVING, NOT_SERVING)
    assert await worker.drain_once() == 0
    assert await _statuses(health) == (NOT_SERVING, NOT_SERVING)  # until the next check
    assert (await health.check()).serving

    with psycopg.connect(private_database) as holder:
        holder.execute("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
        batch = asyncio.create_task(worker.drain_once())
        await until_blocked_by(holder.info.backend_pid, private_database)
        assert not batch.done()  # waiting for the lock, inside its batch
        clock.now += 60
        assert not (await health.check()).stalled
        clock.now += 61
        check = await health.check()
        assert check.stalled and not check.postgres  # PostgreSQL answers; the batch is what is stuck
        assert await _statuses(health) == (NOT_SERVING, NOT_SERVING)
        holder.rollback()
        assert await asyncio.wait_for(batch, 10) == 0
    assert (await health.check()).serving


async def test_postgres_out_of_reach_fails_readiness_but_not_liveness(queue):
    worker = WatchedOutboxWorker(queue, None, _one_collection)
    health = WorkerHealth(worker, queue, IndexSet(queue, lambda _: None, milvus_uri="unused"), timeout=3)
    assert (await health.check()).serving
    await queue.close()  # every connection of the worker's role is gone
    check = await health.check()
    assert check.postgres and not check.stalled and not check.milvus
    assert await _statuses(health) == (NOT_SERVING, SERVING)

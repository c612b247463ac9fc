"""A deployment's limit on requests in flight at its extraction model (``ModelSlots``), held in
Postgres so it binds every replica: here two "replicas" are two worker-role pools of their
own on one database, claiming jobs as the extraction worker does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
import psycopg
import pytest

from memoryd.domain import Turn
from memoryd.storage import (
    ExtractionJobs,
    ModelSlots,
)

from ..support import job_replicas, unique

URL = "http://127.0.0.1:8080/v1/chat/completions"
TURNS = (Turn("t1", "user", "I live in Lyon", datetime(2026, 11, 30, tzinfo=UTC)),)


@dataclass
class Rig:
    dsn: str
    replicas: list[ExtractionJobs]

    async def queue(self, n: int) -> None:
        for _ in range(n):
            queue = self.replicas[0]
            await queue.enqueue(queue.store.session(unique("tenant"), "agent-1"), "alice", TURNS)

    def busy_for(self, slots: ModelSlots) -> list[float]:
        """Seconds each of the endpoint's slots is still taken for (0 when free), by slot."""
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute("SELECT GREATEST(EXTRACT(EPOCH FROM busy_until - now()), 0) FROM extraction_slots "
                                "WHERE endpoint = %s ORDER BY slot", (slots.endpoint,)).fetchall()
        return [float(seconds) for (seconds,) in rows]


@pytest.fixture
async def rig(private_database: str) -> AsyncIterator[Rig]:
    async with job_replicas(private_database, b"test-slots-secret-0123456789abcd") as (replicas, _):
        yield Rig(private_database, replicas)


async def test_one_slot_lets_one_replica_work_at_a_time(rig):
    await rig.queue(2)
    a, b = rig.replicas
    slots_a, slots_b = ModelSlots(URL, 1), ModelSlots(URL, 1)  # each replica's own view of the endpoint
    first = await a.claim(60, slots_a)
    assert first is not None and first.slot is not None and first.slot.number == 0
    assert await b.claim(60, slots_b) is None  # a job is due, but the model is busy
    await a.give_back(slots_a, first.slot)
    second = await b.claim(60, slots_b)
    assert second is not None and second.job_id != first.job_id


async def test_the_limit_counts_across_replicas(rig):
    await rig.queue(3)
    a, b = rig.replicas
    slots = ModelSlots(URL, 2)
    claims = [await a.claim(60, slots), await b.claim(60, ModelSlots(URL, 2))]
    assert all(c is not None for c in claims)
    assert sorted(c.slot.number for c in claims if c is not None and c.slot is not None) == [0, 1]
    assert await a.claim(60, slots) is None and await b.claim(60, slots) is None


async def test_another_endpoint_has_slots_of_its_own(rig):
    await rig.queue(2)
    a, b = rig.replicas
    assert await a.claim(60, ModelSlots(URL, 1)) is not None
    assert await b.claim(60, ModelSlots("http://10.0.0.9:11434/v1/chat/completions", 1)) is not None


async def test_a_slot_given_back_after_a_timeout_rests_before_anyone_uses_it(rig):
    await rig.queue(2)
    a, b = rig.replicas
    slots = ModelSlots(URL, 1)
    claim = await a.claim(60, slots)
    assert claim is not None and claim.slot is not None
    await a.give_back(slots, claim.slot, rest_seconds=30)
    assert await b.claim(60, slots) is None
    [resting] = rig.busy_for(slots)
    assert 25 < resting <= 30


async def test_a_slot_of_a_worker_that_died_comes_free_when_its_lease_runs_out(rig):
    await rig.queue(2)
    a, b = rig.replicas
    slots = ModelSlots(URL, 1)
    assert await a.claim(0.5, slots) is not None  # and never given back
    assert await b.claim(60, slots) is None
    await asyncio.sleep(0.8)
    assert await b.claim(60, slots) is not None


async def test_a_late_give_back_does_not_free_the_slot_someone_else_now_holds(rig):
    await rig.queue(2)
    a, b = rig.replicas
    slots = ModelSlots(URL, 1)
    stale = await a.claim(0.3, slots)
    assert stale is not None and stale.slot is not None
    await asyncio.sleep(0.5)  # the lease ran out: b takes the slot
    current = await b.claim(60, slots)
    assert current is not None
    await a.give_back(slots, stale.slot)  # a comes back late
    assert await a.claim(60, slots) is None
    [busy] = rig.busy_for(slots)
    assert busy > 50


async def test_with_nothing_to_do_no_slot_is_taken(rig):
    a, _ = rig.replicas
    slots = ModelSlots(URL, 2)
    assert await a.claim(60, slots) is None
    assert rig.busy_for(slots) == [0.0, 0.0]


async def test_a_lowered_limit_leaves_the_higher_slots_unused(rig):
    await rig.queue(3)
    a, b = rig.replicas
    assert await a.claim(60, ModelSlots(URL, 2)) is not None  # slot 0
    lowered = ModelSlots(URL, 1)
    assert await b.claim(60, lowered) is None  # slot 1 is free but no longer counts

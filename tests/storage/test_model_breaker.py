"""The circuit breaker of a model endpoint (``ModelBreaker``), held in Postgres so it binds
every replica: two "replicas" are two worker-role pools on one database, claiming jobs as the
extraction worker does, and telling the breaker how the model met them (``model_said``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
import pytest

from memoryd.domain import JobState, Turn
from memoryd.storage import (
    Claim,
    ExtractionJobs,
    ModelBreaker,
    Postgres,
    model_outage,
)

from ..support import job_replicas, unique

TURNS = (Turn("t1", "user", "I live in Lyon", datetime(2026, 11, 30, tzinfo=UTC)),)
OUT, ANSWERED = True, False


@dataclass
class Rig:
    dsn: str
    replicas: list[ExtractionJobs]
    pools: list[Postgres]

    async def queue(self, n: int, tenant: str = "") -> list[tuple[str, str]]:
        jobs = []
        for _ in range(n):
            t = tenant or unique("tenant")
            queue = self.replicas[0]
            jobs.append((t, await queue.enqueue(queue.store.session(t, "agent-1"), "alice", TURNS)))
        return jobs

    def row(self, breaker: ModelBreaker) -> tuple[int, int, float]:
        """failures, openings, and the seconds it stays open (0 when not open)."""
        with psycopg.connect(self.dsn) as conn:
            found = conn.execute(
                "SELECT failures, openings, GREATEST(EXTRACT(EPOCH FROM open_until - now()), 0)::float8 "
                "FROM extraction_breakers WHERE endpoint = %s", (breaker.endpoint,)).fetchone()
        assert found is not None
        return int(found[0]), int(found[1]), float(found[2])

    def half_open(self, breaker: ModelBreaker) -> None:
        """The cool-down is over (as if its time had passed)."""
        with psycopg.connect(self.dsn) as conn:
            conn.execute("UPDATE extraction_breakers SET open_until = now() WHERE endpoint = %s", (breaker.endpoint,))


@pytest.fixture
async def rig(private_database: str) -> AsyncIterator[Rig]:
    async with job_replicas(private_database, b"test-breaker-secret-0123456789ab") as (replicas, pools):
        yield Rig(private_database, replicas, pools)


def breaker(threshold: int = 3, base: float = 10.0, cap: float = 40.0) -> ModelBreaker:
    return ModelBreaker(unique("endpoint"), threshold, base=base, cap=cap)


async def claim(jobs: ExtractionJobs, b: ModelBreaker) -> Claim | None:
    return await jobs.claim(60, breaker=b)


async def test_it_opens_after_threshold_outages_in_a_row_and_no_job_is_claimed(rig):
    await rig.queue(4)
    a, b = rig.replicas
    br = breaker()
    for _ in range(2):
        got = await claim(a, br)
        assert got is not None and not got.trial
        assert not await a.model_said(br, got, OUT)  # not yet
    got = await claim(b, br)
    assert got is not None
    assert await b.model_said(br, got, OUT)  # the third in a row opens it
    assert rig.row(br)[:2] == (3, 1) and 9 < rig.row(br)[2] <= 10
    assert await claim(a, br) is None and await claim(b, br) is None  # a job is due, the model is out
    assert (await model_outage(rig.pools[0], br)).breaker.state == "open"


async def test_an_answer_between_outages_starts_the_count_again(rig):
    await rig.queue(5)
    a, _ = rig.replicas
    br = breaker()
    for said in (OUT, OUT, ANSWERED, OUT, OUT):
        got = await claim(a, br)
        assert got is not None
        assert not await a.model_said(br, got, said)
    assert (await model_outage(rig.pools[0], br)).breaker.state == "closed"


async def test_half_open_lets_exactly_one_trial_through_with_two_replicas_racing(rig):
    await rig.queue(4)
    a, b = rig.replicas
    br = breaker(threshold=1)
    first = await claim(a, br)
    assert first is not None and await a.model_said(br, first, OUT)
    rig.half_open(br)
    assert (await model_outage(rig.pools[0], br)).breaker.state == "half_open"
    claims = await asyncio.gather(claim(a, br), claim(b, br), claim(a, br), claim(b, br))
    trials = [c for c in claims if c is not None]
    assert len(trials) == 1 and trials[0].trial
    # While the trial is out, the breaker counts as open: nothing else is claimed.
    assert await claim(a, br) is None and await claim(b, br) is None
    assert (await model_outage(rig.pools[0], br)).breaker.state == "open"


async def test_a_trial_that_gets_an_answer_closes_it(rig):
    await rig.queue(3)
    a, b = rig.replicas
    br = breaker(threshold=1)
    first = await claim(a, br)
    assert first is not None and await a.model_said(br, first, OUT)
    rig.half_open(br)
    trial = await claim(b, br)
    assert trial is not None and trial.trial
    assert not await b.model_said(br, trial, ANSWERED)
    assert rig.row(br) == (0, 0, 0.0)
    after = await claim(a, br)
    assert after is not None and not after.trial  # closed: jobs go as usual


async def test_a_failed_trial_reopens_it_for_twice_as_long_up_to_the_cap(rig):
    await rig.queue(5)
    a, b = rig.replicas
    br = breaker(threshold=1, base=10.0, cap=25.0)
    first = await claim(a, br)
    assert first is not None and await a.model_said(br, first, OUT)
    assert 9 < rig.row(br)[2] <= 10
    for longer in (20.0, 25.0, 25.0):  # 10 → 20 → 40, capped at 25
        rig.half_open(br)
        trial = await claim(b, br)
        assert trial is not None and trial.trial
        assert await b.model_said(br, trial, OUT)
        assert longer - 1 < rig.row(br)[2] <= longer


async def test_late_outage_answers_while_open_do_not_lengthen_the_cool_down(rig):
    # Concurrency 3: three requests were out when the model died. The first answer of the
    # three (threshold 1) opens the breaker; the two after it are news of the same outage.
    await rig.queue(3)
    a, b = rig.replicas
    br = breaker(threshold=1, base=10.0, cap=300.0)
    claims = [await claim(a, br), await claim(b, br), await claim(a, br)]
    assert all(c is not None and not c.trial for c in claims)
    said = [await (a if n % 2 == 0 else b).model_said(br, c, OUT) for n, c in enumerate(claims) if c is not None]
    assert said == [True, False, False]  # one opening, one warning in the log
    failures, openings, open_for = rig.row(br)
    assert failures == 3 and openings == 1 and 9 < open_for <= 10  # not 40 s


async def test_a_job_queued_while_the_breaker_is_open_says_it_waits_for_the_model(rig):
    a, _ = rig.replicas
    tenant = unique("tenant")
    br = breaker(threshold=1)
    [(_, tried)] = await rig.queue(1, tenant)
    first = await claim(a, br)
    assert first is not None and await a.model_said(br, first, OUT)
    await a.release(first.tenant, first.job_id)  # back in the queue, never met an outage itself
    [(_, queued)] = await rig.queue(1, tenant)
    session = a.store.session(tenant, "agent-1")
    for job_id in (tried, queued):
        a.breaker = br
        job = await a.get(session, "alice", job_id)
        assert job.state is JobState.WAITING and job.attempts == 0
        assert job.error == "waiting for the extraction model: it is out, and no job is sent to it for now"
        assert job.waiting_since is None  # it has not met the outage itself
        assert job.next_attempt_at is not None and 9 < (job.next_attempt_at - datetime.now(UTC)).total_seconds() <= 10
        a.breaker = None
        assert (await a.get(session, "alice", job_id)).state is JobState.QUEUED  # no breaker: as was
    assert (await model_outage(rig.pools[0], br)).waiting == 2
    rig.half_open(br)
    a.breaker = br
    assert (await a.get(session, "alice", queued)).state is JobState.QUEUED
    assert (await model_outage(rig.pools[0], br)).waiting == 0

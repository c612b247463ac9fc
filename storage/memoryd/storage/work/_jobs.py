"""Extraction jobs in Postgres: queued by Write, claimed by workers, finished in one transaction.

A job's turns are sealed with the subject's data key (AAD bound to the job id and the field
``turns``) and set to NULL when the job finishes, whichever way. Workers claim due jobs across
tenants as ``memoryd_worker`` with ``FOR UPDATE SKIP LOCKED`` (ids and states only) and do
everything else as ``memoryd_app`` with the job's tenant set. A claimed job carries a lease
(``next_attempt_at``): if its worker dies, another claims it once the lease runs out. The
claim is the outbox's (``_queue.WorkQueue``); the work (the model) runs with no transaction open.

Lock order, shared with Erase so the two never deadlock: the subject's key row, then the job
row, then memory rows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from psycopg import sql
from psycopg.types.json import Jsonb

from memoryd.domain import (
    AuditTag,
    DataKeyUnavailable,
    Draft,
    ExtractionJob,
    IdempotencyKeyReused,
    Internal,
    JobState,
    NotFound,
    Outcome,
    ReadFilter,
    Turn,
    WriteResult,
    blind_answer,
)

from ..postgres import audit
from ..postgres import counters
from ..keys import DataKey
from .._filters import LIVE_NOW, read_conditions
from ..models import BreakerPosition, ModelBreaker
from ..models import ModelSlots, Slot
from ..memories import NO_SUCH_JOB, claim_idempotency, join_session, store_idempotent_response
from ..postgres import Postgres, TenantConn
from ._queue import WorkQueue

if TYPE_CHECKING:
    from ..memories import Stores, StoreSession

TURNS_FIELD = "turns"
# Why a queued job that has not met an outage itself waits: the endpoint's breaker is open.
MODEL_OUT = "waiting for the extraction model: it is out, and no job is sent to it for now"
# A job is settled by the transaction that finishes, fails or reschedules it, and only while
# it is still running (an Erase may have dropped it meanwhile).
JOBS = WorkQueue("extraction_jobs", due="state IN ('queued', 'running')", order="next_attempt_at",
                 on_claim="state = 'running', attempts = claimed.attempts + 1, "
                          "started_at = COALESCE(claimed.started_at, now())")


@dataclass(frozen=True)
class Claim:
    """A job a worker claimed, and the model slot it took for it (None without slots)."""

    tenant: str
    job_id: str
    slot: Slot | None = None
    trial: bool = False  # the half-open trial of the endpoint's breaker


@dataclass(frozen=True)
class ClaimedJob:
    """A running job with its turns opened, for the worker that claimed it."""

    tenant: str
    id: str
    subject: str
    agent: str
    attempts: int
    turns: tuple[Turn, ...]
    tag: AuditTag
    outages: int = 0  # the attempts that met a model outage (they do not use up max_attempts)
    waiting_since: datetime | None = None  # the job's first model outage
    session_id: str = ""  # what the job writes joins this session of the subject ('' for none)


@dataclass(frozen=True)
class PlannedItem:
    """One item to write: merged into ``merge_into`` (a near-duplicate found by meaning, if
    it still passes ``merge_filter``, the queuing agent's read filter), or into the memory an
    earlier item of the same job wrote (``same_as``, its index), or written through the
    category's conflict policy. ``blind``: it may not be compared with what is stored (never
    merged, never found equal); ``readable``: the queuing agent's view reads it — the job's
    results give an unreadable item the answer a blind Write gets (``memoryd.server.guard``)."""

    draft: Draft
    merge_into: str = ""
    same_as: int | None = None
    merge_filter: ReadFilter | None = None
    blind: bool = False
    readable: bool = True


def _turns_json(turns: tuple[Turn, ...] | list[Turn]) -> bytes:
    return json.dumps([{"turn_id": t.turn_id, "speaker": t.speaker, "text": t.text, "time": t.time.isoformat()}
                       for t in turns], ensure_ascii=False, separators=(",", ":")).encode()


def _results_json(results: list[WriteResult]) -> list[dict[str, Any]]:
    return [{"memory_id": r.memory_id, "outcome": r.outcome.value, "reason": r.reason, "version": r.version}
            for r in results]


class ExtractionJobs:
    """The job queue of one deployment. ``claims`` is the worker-role pool (None where this
    process only queues and reads jobs)."""

    def __init__(self, store: Stores, claims: Postgres | None = None) -> None:
        self._store = store
        self._db: Postgres = store.db
        self._claims = claims
        # The extraction model's breaker, once this process runs the extraction worker: a
        # queued job is read as waiting while it is open (``get``).
        self.breaker: ModelBreaker | None = None

    @property
    def store(self) -> Stores:
        """The stores whose sessions queue and read jobs here."""
        return self._store

    async def enqueue(self, session: StoreSession, subject: str, turns: tuple[Turn, ...], *,
                      idempotency_key: str = "", request_hash: bytes = b"", tag: AuditTag = AuditTag(),
                      session_id: str = "") -> str:
        """Queue a job of ``session``'s agent with ``turns`` sealed; return its id (the first
        one's, for a retry: the idempotency claim is a Write's, ``claim_idempotency``). What it
        writes will join ``session_id``, if set."""
        tenant, agent = session.tenant, session.agent
        async with session.transaction() as conn:
            if idempotency_key:
                first = await claim_idempotency(session, conn, idempotency_key, request_hash)
                if first is not None:
                    if not isinstance(first, dict) or not first.get("extraction_job_id"):
                        raise IdempotencyKeyReused()  # the key wrote items
                    return str(first["extraction_job_id"])
            key = await session.keys.for_write(conn, subject)
            job_id = str(uuid.uuid4())
            await conn.execute(
                "INSERT INTO extraction_jobs (tenant_id, id, subject, agent, turns_ct, turn_count, request_id, "
                "trace_id, view_version, session_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (tenant, job_id, subject, agent, key.seal(job_id, TURNS_FIELD, _turns_json(turns)), len(turns),
                 tag.request_id, tag.trace_id, tag.view_version, session_id),
            )
            if idempotency_key:
                await store_idempotent_response(session, conn, idempotency_key, {"extraction_job_id": job_id})
            await audit.append(conn, agent, subject, "extraction.queued", [], tag,
                               {"job": job_id, "turns": len(turns)})
            await counters.bump(conn, {counters.JOBS_QUEUED: 1})
            return job_id

    async def claim(self, lease_seconds: float, slots: ModelSlots | None = None,
                    breaker: ModelBreaker | None = None) -> Claim | None:
        """Claim one due job for ``lease_seconds``, or None if none is due. With ``slots``,
        only if one of the model's slots is free: it is taken for the same lease, in the same
        transaction, and given back with ``give_back``. With ``breaker``, only if it is not
        open (``ModelBreaker``): while it is, jobs stay queued."""
        if self._claims is None:
            raise Internal("this process does not run extraction jobs")
        async with self._claims.worker_tx() as conn:
            state = await breaker.state(conn) if breaker is not None else None
            if state is not None and state.open:
                return None
            slot = await slots.take(conn) if slots is not None else None
            if slots is not None and slot is None:
                return None
            rows = await JOBS.claim(conn, limit=1, lease_seconds=lease_seconds, returning=("tenant_id", "id"))
            if not rows:
                return None
            if slots is not None and slot is not None:
                await slots.hold(conn, slot, lease_seconds)
            trial = breaker is not None and state is not None and state.tripped
            if trial and breaker is not None:
                await breaker.admit(conn, lease_seconds)
        return Claim(rows[0]["tenant_id"], str(rows[0]["id"]), slot, trial)

    async def give_back(self, slots: ModelSlots, slot: Slot, rest_seconds: float = 0.0) -> None:
        """Free a model slot taken by ``claim`` (after ``rest_seconds``, see ``ModelSlots``)."""
        if self._claims is None:
            raise Internal("this process does not run extraction jobs")
        async with self._claims.worker_tx() as conn:
            await slots.give_back(conn, slot, rest_seconds)

    async def hold_slot(self, slots: ModelSlots, slot: Slot, seconds: float) -> None:
        """Keep a model slot taken by ``claim`` for ``seconds`` from now (a request abandoned
        by its job, still open at the model)."""
        if self._claims is None:
            raise Internal("this process does not run extraction jobs")
        async with self._claims.worker_tx() as conn:
            await slots.hold(conn, slot, seconds)

    async def model_said(self, breaker: ModelBreaker, claim: Claim, outage: bool | None) -> bool:
        """Tell the endpoint's breaker how the model met the claimed job's request: an outage
        (True), an answer (False), or not asked (None). Whether this opened the breaker."""
        if self._claims is None:
            raise Internal("this process does not run extraction jobs")
        async with self._claims.worker_tx() as conn:
            if outage:
                return await breaker.failed(conn, trial=claim.trial)
            if outage is not None:
                await breaker.answered(conn)
            elif claim.trial:
                await breaker.untried(conn)
        return False

    async def open(self, tenant: str, job_id: str) -> ClaimedJob | None:
        """The claimed job with its turns in the clear; None if it is no longer running (it
        was erased). Raises DataKeyUnavailable if the turns cannot be opened."""
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                "SELECT subject, agent, state, attempts, outages, waiting_since, turns_ct, request_id, trace_id, "
                "view_version, session_id "
                "FROM extraction_jobs WHERE tenant_id = %s AND id = %s",
                (tenant, job_id),
            )
            row = await cur.fetchone()
            if row is None or row["state"] != "running" or row["turns_ct"] is None:
                return None
            subject = row["subject"]
            key: DataKey | None = (await self._store.keys.of(tenant).for_read(conn, {subject}))[subject]
        try:
            if key is None:
                raise InvalidTag()
            raw = json.loads(key.open(job_id, TURNS_FIELD, bytes(row["turns_ct"])))
        except (InvalidTag, ValueError) as exc:
            raise DataKeyUnavailable("the turns of this job cannot be opened: the subject's data key is gone") from exc
        turns = tuple(Turn(t["turn_id"], t["speaker"], t["text"], datetime.fromisoformat(t["time"])) for t in raw)
        return ClaimedJob(tenant, job_id, subject, row["agent"], row["attempts"], turns,
                          AuditTag(row["request_id"], row["trace_id"], row["view_version"]), row["outages"],
                          row["waiting_since"], row["session_id"])

    def session(self, job: ClaimedJob) -> StoreSession:
        """The session the job's work reads and writes through: its tenant, its agent."""
        return self._store.session(job.tenant, job.agent)

    async def retry_later(self, job: ClaimedJob, error: str, delay_seconds: float) -> None:
        """Try the job again after ``delay_seconds``: a failure that is not the model's outage
        (it uses up an attempt), so the job is no longer waiting for its model."""
        async with self._db.tenant_tx(job.tenant) as conn:
            await conn.execute(
                "UPDATE extraction_jobs SET state = 'queued', error = %s, waiting_since = NULL, "
                "next_attempt_at = now() + make_interval(secs => %s) "
                "WHERE tenant_id = %s AND id = %s AND state = 'running'",
                (error[:500], delay_seconds, job.tenant, job.id),
            )

    async def wait_for_model(self, job: ClaimedJob, reason: str, delay_seconds: float) -> None:
        """The model is out: the job waits ``delay_seconds``, its turns sealed as they are,
        and the attempt is counted as an outage, not against ``max_attempts``."""
        async with self._db.tenant_tx(job.tenant) as conn:
            cur = await conn.execute(
                "UPDATE extraction_jobs SET state = 'queued', error = %s, outages = outages + 1, "
                "waiting_since = COALESCE(waiting_since, now()), next_attempt_at = now() + make_interval(secs => %s) "
                "WHERE tenant_id = %s AND id = %s AND state = 'running' RETURNING id",
                (reason[:500], delay_seconds, job.tenant, job.id),
            )
            if await cur.fetchone() is not None:
                await counters.bump(conn, {counters.EXTRACTION_OUTAGE_RETRIES: 1})

    async def release(self, tenant: str, job_id: str) -> None:
        """Give a claimed job back untried (the worker is stopping)."""
        async with self._db.tenant_tx(tenant) as conn:
            await conn.execute(
                "UPDATE extraction_jobs SET state = 'queued', attempts = GREATEST(attempts - 1, 0), "
                "next_attempt_at = now() WHERE tenant_id = %s AND id = %s AND state = 'running'",
                (tenant, job_id),
            )

    async def fail(self, tenant: str, job_id: str, error: str, *, dropped: Mapping[str, int] | None = None,
                   counts: Mapping[str, int] | None = None) -> None:
        """The job failed: nothing is written, its turns are deleted, the reason is kept."""
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                "UPDATE extraction_jobs SET state = 'failed', error = %s, dropped = %s, turns_ct = NULL, "
                "finished_at = now() WHERE tenant_id = %s AND id = %s AND state IN ('queued', 'running') "
                "RETURNING subject, agent, request_id, trace_id, view_version",
                (error[:500], Jsonb(dict(dropped or {})), tenant, job_id),
            )
            row = await cur.fetchone()
            if row is None:
                return
            tag = AuditTag(row["request_id"], row["trace_id"], row["view_version"])
            await audit.append(conn, row["agent"], row["subject"], "extraction.failed", [], tag,
                               {"job": job_id, "error": error[:500]})
            await counters.bump(conn, {counters.JOBS_FAILED: 1, **(counts or {})})

    async def finish(self, job: ClaimedJob, plans: list[PlannedItem], dropped: Mapping[str, int], *,
                     view_version: int | None, counts: Mapping[str, int] | None = None) -> list[WriteResult] | None:
        """Write the planned items and mark the job succeeded, in one transaction; None (and
        nothing written) if the job is no longer running (the subject was erased meanwhile)."""
        tenant, subject = job.tenant, job.subject
        tag = AuditTag(job.tag.request_id, job.tag.trace_id, view_version)
        async with self._db.tenant_tx(tenant) as conn:
            key = await self._store.keys.of(tenant).for_write(conn, subject)  # before the job row: Erase's order
            cur = await conn.execute(
                "SELECT state FROM extraction_jobs WHERE tenant_id = %s AND id = %s FOR UPDATE", (tenant, job.id)
            )
            row = await cur.fetchone()
            if row is None or row["state"] != "running":
                return None
            # The session's writer carries the tenant's policy: TTLs and trust as for any write.
            writer = self._store.session(tenant, job.agent).item_writer(conn, subject, first_key=key)
            results: list[WriteResult] = []
            for plan in plans:
                target = plan.merge_into
                if target and not await self._still_readable(conn, target, plan.merge_filter):
                    target = ""
                if plan.same_as is not None and results[plan.same_as].memory_id:
                    target = results[plan.same_as].memory_id
                merged = await writer.merge_similar(plan.draft, target) if target and not plan.blind else None
                results.append(merged or await writer.write(plan.draft, blind=plan.blind))
            shown = [r if plan.readable else blind_answer(plan.draft, r) for r, plan in zip(results, plans)]
            await conn.execute(
                "UPDATE extraction_jobs SET state = 'succeeded', error = '', results = %s, dropped = %s, "
                "turns_ct = NULL, finished_at = now() WHERE tenant_id = %s AND id = %s",
                (Jsonb(_results_json(shown)), Jsonb(dict(dropped)), tenant, job.id),
            )
            ids = [r.memory_id for r in results if r.memory_id]
            if job.session_id:
                await join_session(conn, job.agent, subject, job.session_id, ids, reopen=False)
            if results:
                await audit.append(conn, job.agent, subject, "write", ids, tag,
                                   {"outcomes": [r.outcome.value for r in results], "job": job.id})
            await audit.append(conn, job.agent, subject, "extraction.succeeded", ids, tag,
                               {"job": job.id, "dropped": dict(dropped)})
            await counters.bump(conn, {counters.JOBS_SUCCEEDED: 1, "extraction.items_written": len(results),
                                               **{f"extraction.dropped.{k}": v for k, v in dropped.items()},
                                               **(counts or {})})
            return results

    @staticmethod
    async def _still_readable(conn: TenantConn, memory_id: str, flt: ReadFilter | None) -> bool:
        """Whether the index's hit ``memory_id`` passes ``flt`` in Postgres now (the index may
        lag behind Postgres); locked, so it stays so until the merge."""
        if flt is None:
            return False
        where, params = read_conditions(conn, flt)  # labelled by the dedup search that found it
        query = sql.SQL("SELECT 1 FROM memories WHERE {where} AND id = %s::uuid AND {live} FOR UPDATE").format(
            where=where, live=sql.SQL(LIVE_NOW))
        cur = await conn.execute(query, [*params, memory_id])
        return await cur.fetchone() is not None

    async def get(self, session: StoreSession, subject: str, job_id: str) -> ExtractionJob:
        """The job, if ``session``'s agent queued it for ``subject``; NotFound otherwise, the
        same as for an id that does not exist, so no other agent's job can be read or told
        apart. A queued job waits for its model too while the model's ``breaker`` is open: it
        says so (the breaker is the deployment's state, no other tenant's data)."""
        tenant, agent, breaker = session.tenant, session.agent, self.breaker
        async with session.transaction() as conn:
            cur = await conn.execute(
                "SELECT id, subject, agent, state, turn_count, attempts, error, results, dropped, created_at, "
                "started_at, finished_at, next_attempt_at, waiting_since FROM extraction_jobs "
                "WHERE tenant_id = %s AND subject = %s AND agent = %s "
                "AND id = %s",
                (tenant, subject, agent, job_id),
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(NO_SUCH_JOB)
        results = tuple(WriteResult(r["memory_id"], Outcome(r["outcome"]), r["reason"], r["version"])
                        for r in row["results"])
        state = JobState(row["state"])
        waiting = state is JobState.QUEUED and row["waiting_since"] is not None
        error, next_attempt_at = row["error"], row["next_attempt_at"] if state is JobState.QUEUED else None
        if state is JobState.QUEUED and breaker is not None and self._claims is not None:
            async with self._claims.worker_tx() as conn:
                position = await breaker.position(conn)
            if position.open_until is not None:
                waiting, error = True, error or MODEL_OUT
                next_attempt_at = max(next_attempt_at or position.open_until, position.open_until)
        return ExtractionJob(str(row["id"]), row["subject"], row["agent"], JobState.WAITING if waiting else state,
                             row["turn_count"], row["attempts"], error, results, dict(row["dropped"]),
                             row["created_at"], row["started_at"], row["finished_at"],
                             next_attempt_at=next_attempt_at, waiting_since=row["waiting_since"] if waiting else None)


@dataclass(frozen=True)
class ModelOutage:
    """How the extraction model's outage stands: its endpoint's breaker, and how many jobs
    of every tenant wait for it (for metrics: a count, nothing of any job)."""

    breaker: BreakerPosition
    waiting: int


async def pending_job_tenants(queue: Postgres) -> list[str]:
    """The tenants with a job queued or running (through the worker role: ids only): a tenant
    whose first jobs wait through an outage has counters before it has memories."""
    async with queue.worker_tx() as conn:
        cur = await conn.execute("SELECT DISTINCT tenant_id FROM extraction_jobs WHERE state IN ('queued', 'running')")
        return [r["tenant_id"] for r in await cur.fetchall()]


async def model_outage(queue: Postgres, breaker: ModelBreaker) -> ModelOutage:
    """The breaker, and the jobs waiting for the model: queued after an outage of their own,
    or — while the breaker is open — queued at all (``ExtractionJobs.get`` says WAITING for
    the same jobs). Through the worker role: states and times only."""
    async with queue.worker_tx() as conn:
        position = await breaker.position(conn)
        cur = await conn.execute("SELECT count(*) AS queued, count(*) FILTER (WHERE waiting_since IS NOT NULL) AS met "
                                 "FROM extraction_jobs WHERE state = 'queued'")
        row = await cur.fetchone()
    assert row is not None
    return ModelOutage(position, int(row["queued"] if position.open_until is not None else row["met"]))

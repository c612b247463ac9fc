"""The outbox worker: keeps the vector index in step with Postgres.

Write and Erase leave an outbox row (memory id, op) in the same transaction as the change.
The outbox is a ``_queue.WorkQueue``: a worker claims a batch of rows under a lease and a
claim token in one short transaction (the lease is renewed while the batch is at work, so a
worker that dies leaves its rows to the others within ``LEASE_SECONDS``) — so any number of
workers, in the server process or as ``memoryd worker`` processes, share the work without
doing it twice — then, with no transaction open, re-reads each memory's *current* row and
embeds ``key + text``; then, in a short transaction, it marks the rows it still holds as
``writing`` and upserts those vectors (or deletes them when the memory is gone or no longer
active), and settles in a last short transaction: it deletes the rows still carrying its
token. A failure retries with exponential backoff and becomes a dead letter after
``max_attempts``, keeping the reason; an outage of the index spends no attempt. A worker
that cannot write every collection the work belongs to (``targets`` gives none: no embedding
model registered yet, or one whose embedder it lacks) claims nothing, so no row is settled
without its vectors — a write is never said to be indexed when it is not. Re-reading
the current row makes every operation idempotent, so duplicates and reordering are harmless.

A row taken away while its memory was being embedded (dropped by a purge or a forget, folded
by a newer Write, claimed again after the lease ran out) is not written at all: whoever took
it left the work that follows. So a purge only ever waits for rows already writing
(``_memories``), which takes one index write, not a batch of embeddings.

Nothing is locked while the worker embeds and writes, so a Write or an Erase can change the
memory meanwhile, and another worker can write its newer state to the index first. So before
settling, the worker looks at the memories whose rows were taken away or that have other rows
queued, and if one is no longer what it wrote, queues it again (in the settling transaction):
the index always ends at the memory's current state, and a vector written for a memory erased
meanwhile is deleted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memoryd.domain import Embedder, MemorydError, Unavailable

from ._erasure_recheck import ErasureRechecks
from ..memories import PURGE_FALLBACK_SECONDS, Stores
from ..vectors import MilvusIndex, partition_name
from ..postgres import Postgres
from .._loops import backoff, idle, periodic
from ._queue import WorkQueue
from ._tenant_size import LargeTenants

_log = logging.getLogger("memoryd.storage.outbox")
SEAL_SECONDS = 1.0  # the index is sealed at most this often, busy or drained
# A claimed batch is not due for other workers until this long after its last renewal; the
# worker renews it every third of that while the batch is at work. So the rows of a worker
# that died (a crash, a kill, a lost machine) are claimed again within this, and a write is
# searchable within it plus one batch after such a crash.
LEASE_SECONDS = 10.0
# A batch still at work this long after its claim (a call that hangs) is no longer renewed:
# once its lease runs out another worker takes its rows, and whatever it settles late is
# discarded by the claim token.
HOLD_SECONDS = 300.0
OUTBOX = WorkQueue("outbox", due="NOT dead", order="id", on_claim="claim = %(token)s, writing = false",
                   held="claim = %(token)s")
_CLAIMED = ("tenant_id", "id", "memory_id", "subject", "attempts")


class _IndexDown(Exception):
    def __init__(self, cause: Unavailable) -> None:
        super().__init__(cause.message)
        self.cause = cause


@dataclass(frozen=True)
class OutboxLag:
    pending: int
    dead: int
    oldest_pending_seconds: float


@dataclass(frozen=True)
class _TenantWork:
    current: list[tuple[Any, str]]  # (IndexedMemory, text to embed)
    gone: list[str]  # ids whose vectors go (the memory is gone or no longer active)
    unavailable: list[tuple[Any, None]]  # content that cannot be decrypted: left as it is

    def written(self) -> dict[str, tuple[Any, str | None] | None]:
        """What the index was given for each memory: its row and text, or None (deleted)."""
        return {**{m.id: (m, text) for m, text in [*self.current, *self.unavailable]},
                **dict.fromkeys(self.gone)}

    def keep(self, ids: set[str]) -> _TenantWork:
        """Only the memories ``ids``."""
        return _TenantWork([(m, t) for m, t in self.current if m.id in ids], [i for i in self.gone if i in ids],
                           [(m, t) for m, t in self.unavailable if m.id in ids])


@dataclass(frozen=True)
class IndexTarget:
    """One collection the worker keeps current, with the embedder that fills it."""

    index: MilvusIndex
    embedder: Embedder


class OutboxWorker:
    def __init__(self, queue: Postgres, store: Stores,
                 targets: Callable[[], Awaitable[list[IndexTarget]]], *,
                 batch_size: int = 32, max_attempts: int = 8, base_backoff: float = 0.5,
                 max_backoff: float = 60.0, lease_seconds: float = LEASE_SECONDS, parallel: int = 2,
                 large_tenants: LargeTenants | None = None) -> None:
        self._queue = queue
        self._store = store
        self._targets = targets
        self._batch = batch_size
        self._max_attempts = max_attempts
        self._base = base_backoff
        self._cap = max_backoff
        self._lease = lease_seconds
        # Batches in flight at once in ``run``: one embeds while another writes to the index
        # and settles (the embedder and the index each take one call at a time anyway).
        self._parallel = max(1, parallel)
        self.wakeup = asyncio.Event()
        # Set (and replaced) each time a batch has settled: wait_indexed waits on it rather than
        # polling blind, so a WAIT_INDEXED write answers as soon as its own work is done.
        self._settled = asyncio.Event()
        # Indexes written without sealing since the last seal, by collection; sealed at most
        # every SEAL_SECONDS, busy or drained (what is left is sealed once that is up).
        self._unsealed: dict[str, MilvusIndex] = {}
        self._sealed_at = time.monotonic()
        self._sealing = asyncio.Lock()
        # Receipts the index could not confirm are checked again wherever a worker runs.
        self.rechecks = ErasureRechecks(queue, store, targets)
        # With Milvus Lite: told what each batch wrote, it warns once of a tenant grown too large.
        self._large_tenants = large_tenants

    async def run(self, stop: asyncio.Event, idle_seconds: float = 0.5) -> None:
        """Drain until ``stop`` is set, ``parallel`` batches at a time; sleep when idle or when
        Postgres is unreachable."""
        await asyncio.gather(*(self._drain(stop, idle_seconds) for _ in range(self._parallel)),
                             self.rechecks.run(stop))
        await self._seal(now=True)

    async def _drain(self, stop: asyncio.Event, idle_seconds: float) -> None:
        pause = idle_seconds
        while not stop.is_set():
            try:
                processed = await self.drain_once()
                pause = idle_seconds
            except MemorydError as exc:
                _log.warning("outbox worker: %s; retrying in %.1fs", exc.message, pause)
                processed = 0
                pause = min(pause * 2, 10.0)
            if processed:
                continue
            await self._seal()
            self.wakeup.clear()
            # Idle, but back when the last rows written are due to be sealed.
            await idle(stop, self.wakeup, min(pause, self._seal_due_in()) if self._unsealed else pause)

    async def drain_once(self) -> int:
        """Claim one batch, index it and settle it; return how many outbox rows it claimed.

        If the vector index itself is unreachable, the claimed rows are given back due as they
        were — an outage of the index spends no attempts, so it never dead-letters anything —
        and Unavailable is raised. Failures of the embedder or of single items spend attempts
        and end as dead letters. With no collection to write (``targets`` gives none), nothing
        is claimed: the rows stay due, their attempts untouched.
        """
        targets = await self._targets()
        if not targets:
            return 0
        token = uuid.uuid4()
        async with self._queue.worker_tx() as conn:
            rows = await OUTBOX.claim(conn, limit=self._batch, lease_seconds=self._lease, returning=_CLAIMED,
                                      token=token)
        if not rows:
            return 0
        by_tenant: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_tenant[row["tenant_id"]].append(row)
        held_too_long = asyncio.Event()
        renewal = asyncio.create_task(periodic(held_too_long, self._lease / 3,
                                               self._renewer(token, rows, held_too_long),
                                               what="outbox: renewing the lease of a batch"))
        try:
            await self._index(token, by_tenant, targets)
        except (Exception, asyncio.CancelledError):
            # Stopped (or a bug): give what is left back now rather than when the lease runs out.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._settle(token, by_tenant, {}, done={}, again=[]))
            raise
        finally:
            renewal.cancel()
        self._settled.set()
        self._settled = asyncio.Event()
        await self._seal()
        return len(rows)

    def _renewer(self, token: uuid.UUID, rows: list[dict[str, Any]],
                 stop: asyncio.Event) -> Callable[[], Awaitable[None]]:
        """One renewal of the lease of ``rows`` still carrying ``token`` (rows settled or taken
        away meanwhile are left alone); after HOLD_SECONDS it sets ``stop`` instead."""
        claimed_at = time.monotonic()

        async def renew() -> None:
            if time.monotonic() - claimed_at >= HOLD_SECONDS:
                _log.warning("outbox: a batch of %d rows is still at work after %.0fs; its lease is no longer "
                             "renewed, so another worker takes it when the lease runs out", len(rows), HOLD_SECONDS)
                stop.set()
                return
            async with self._queue.worker_tx() as conn:
                await OUTBOX.renew(conn, rows, lease_seconds=self._lease, token=token)
        return renew

    def next_settlement(self) -> asyncio.Event:
        """An event set when the next batch (of any tenant) has settled in this process."""
        return self._settled

    async def _index(self, token: uuid.UUID, by_tenant: dict[str, list[dict[str, Any]]],
                     targets: list[IndexTarget]) -> None:
        failed: dict[str, str] = {}
        work: dict[str, _TenantWork] = {}
        for tenant, claimed in by_tenant.items():
            try:
                work[tenant] = await self._read(tenant, sorted({str(r["memory_id"]) for r in claimed}))
            except MemorydError as exc:
                failed[tenant] = exc.message
        try:
            failures, written = await self._apply_batch(token, work, targets)
        except _IndexDown as down:
            await self._settle(token, by_tenant, failed, done={}, again=[])  # the rest given back untried
            raise down.cause from None
        failed |= failures
        done = {tenant: w for tenant, w in written.items() if tenant not in failed}
        again = await self._changed_meanwhile(token, by_tenant, done)
        await self._settle(token, by_tenant, failed, done, again, targets)
        if self._large_tenants is not None:
            await self._large_tenants.indexed({tenant: len(w.current) for tenant, w in done.items() if w.current})

    async def _changed_meanwhile(self, token: uuid.UUID, by_tenant: dict[str, list[dict[str, Any]]],
                                 done: dict[str, _TenantWork]) -> list[tuple[str, str, str, str]]:
        """The memories indexed in this batch that may have changed since they were read (one
        of their claimed rows was taken away, or another row of theirs is queued) and are no
        longer what the index was given: (tenant, memory id, subject, op) to queue again.
        Memories whose rows were taken away before their vectors were written (``_stage``)
        were not written, so they are not this batch's to correct."""
        if not done:
            return []
        given = {tenant: set(w.written()) for tenant, w in done.items()}
        claimed = [r for tenant in done for r in by_tenant[tenant] if str(r["memory_id"]) in given[tenant]]
        subjects = {(r["tenant_id"], str(r["memory_id"])): r["subject"] for r in claimed}
        async with self._queue.worker_tx() as conn:
            cur = await conn.execute(
                # Both columns of outbox_memory, so a long backlog is not scanned every batch.
                "SELECT tenant_id, id, memory_id, claim FROM outbox WHERE tenant_id = ANY(%s) AND memory_id = ANY(%s) "
                "AND NOT dead",
                (sorted(done), [r["memory_id"] for r in claimed]),
            )
            queued = [r for r in await cur.fetchall() if (r["tenant_id"], str(r["memory_id"])) in subjects]
        held = {(r["tenant_id"], r["id"]) for r in queued if r["claim"] == token}
        suspect = {(r["tenant_id"], str(r["memory_id"])) for r in claimed if (r["tenant_id"], r["id"]) not in held}
        suspect |= {(r["tenant_id"], str(r["memory_id"])) for r in queued if r["claim"] != token}
        # A row no worker holds is read after this batch's index write, so it brings a changed
        # memory's vector up to date by itself (rows other workers hold may have been read
        # before). Not so a memory gone meanwhile: Erase clears the index and drops its queued
        # deletes itself, possibly before this batch's write landed.
        unclaimed = {(r["tenant_id"], str(r["memory_id"])) for r in queued if r["claim"] is None}
        again = []
        for tenant in sorted({tenant for tenant, _ in suspect}):
            ids = sorted(memory_id for t, memory_id in suspect if t == tenant)
            written = done[tenant].written()
            rows_now = {m.id: (m, text) for m, text in await self._store.session(tenant).index_rows(ids)}
            for memory_id in ids:
                current = rows_now.get(memory_id)
                if written[memory_id] == current or (current is not None and (tenant, memory_id) in unclaimed):
                    continue
                _log.info("outbox: memory %s of tenant %s changed while it was indexed; queued again",
                          memory_id, tenant)
                again.append((tenant, memory_id, subjects[(tenant, memory_id)], "upsert" if current else "delete"))
        return again

    async def _settle(self, token: uuid.UUID, by_tenant: dict[str, list[dict[str, Any]]], failed: dict[str, str],
                      done: dict[str, _TenantWork], again: list[tuple[str, str, str, str]],
                      targets: list[IndexTarget] | None = None) -> None:
        """In one short transaction, and only for rows still carrying ``token``: delete the rows
        of tenants ``done``, schedule a retry of those ``failed``, give the others back due (an
        index outage); and queue ``again`` the memories that changed while being indexed.
        ``targets``: the collections the tenants ``done`` were written to."""
        async with self._queue.worker_tx() as conn:
            for tenant, claimed in by_tenant.items():
                ids = [r["id"] for r in claimed]
                if tenant in failed:
                    await self._retry_later(conn, token, tenant, claimed, failed[tenant])
                elif tenant in done:
                    await self._record_routes(conn, tenant, targets or [])
                    await conn.execute("DELETE FROM outbox WHERE tenant_id = %s AND id = ANY(%s) AND claim = %s",
                                       (tenant, ids, token))
                else:
                    await conn.execute("UPDATE outbox SET claim = NULL, next_attempt_at = now() "
                                       "WHERE tenant_id = %s AND id = ANY(%s) AND claim = %s", (tenant, ids, token))
            for tenant, memory_id, subject, op in again:
                # A deletion queued again is not due at once: the memory is gone, so Recall
                # never serves the vector meanwhile, and a purge that waited for this batch is
                # clearing the index itself right now — a worker deleting it too would write a
                # new tombstone (holding the id) after that purge's compaction and fail its
                # check. If the purge finishes, it drops this row with its own.
                delay = PURGE_FALLBACK_SECONDS if op == "delete" else 0.0
                await conn.execute("INSERT INTO outbox (tenant_id, memory_id, subject, op, next_attempt_at) "
                                   "VALUES (%s, %s, %s, %s, now() + make_interval(secs => %s))",
                                   (tenant, memory_id, subject, op, delay))

    def _seal_due_in(self) -> float:
        return max(0.0, self._sealed_at + SEAL_SECONDS - time.monotonic())

    async def _seal(self, *, now: bool = False) -> None:
        """Seal what this worker wrote, at most once every SEAL_SECONDS (``now``: at once) for
        all the batches since the last seal: with Milvus Lite each seal costs more the more
        segments there are (tens of ms with 1,000 tenants; a write of one memory after
        another, each drained at once, was one seal each), while the rows are searchable
        unsealed, only slower to search. A failed seal is tried again next time."""
        if not self._unsealed or not (now or self._seal_due_in() == 0.0) or self._sealing.locked():
            return
        async with self._sealing:  # one seal at a time; a batch in flight does not wait for it
            self._sealed_at = time.monotonic()
            for name, index in list(self._unsealed.items()):
                try:
                    await index.seal()
                except MemorydError as exc:
                    _log.warning("outbox: sealing the index failed (%s); will retry", exc.message)
                    continue
                self._unsealed.pop(name, None)

    async def _read(self, tenant: str, ids: list[str]) -> _TenantWork:
        rows = await self._store.session(tenant).index_rows(ids)
        gone = [i for i in ids if i not in {m.id for m, _ in rows}]
        # A memory whose content cannot be decrypted (its data key is lost or cannot be
        # unwrapped) is neither embedded nor removed: its vector, if any, stays as it was,
        # and its outbox row is settled — retrying could not make the key come back. (A
        # process with another master key never gets here: it refuses to start.)
        current = [(m, text) for m, text in rows if text is not None]
        unavailable = [(m, None) for m, text in rows if text is None]
        for m, _ in unavailable:
            _log.warning("outbox: memory %s of tenant %s not indexed: its content is unavailable", m.id, tenant)
        return _TenantWork(current, gone, unavailable)

    async def _apply_batch(self, token: uuid.UUID, work: dict[str, _TenantWork],
                           targets: list[IndexTarget]) -> tuple[dict[str, str], dict[str, _TenantWork]]:
        """Index a batch of tenants' work together — one embedding call and one read-back per
        collection — and return the tenants that failed, with why, and what was written. If
        the batch as a whole is refused (a poison item, the embedder), each tenant is tried
        alone so one tenant's bad item does not hold back the others. Raises _IndexDown if
        the index is down."""
        try:
            return {}, await self._apply(token, work, targets)
        except MemorydError as exc:
            if len(work) == 1:
                return {tenant: exc.message for tenant in work}, {}
        failed: dict[str, str] = {}
        written: dict[str, _TenantWork] = {}
        for tenant, one in work.items():
            try:
                written |= await self._apply(token, {tenant: one}, targets)
            except MemorydError as exc:
                failed[tenant] = exc.message
        return failed, written

    async def _apply(self, token: uuid.UUID, work: dict[str, _TenantWork],
                     targets: list[IndexTarget]) -> dict[str, _TenantWork]:
        """Embed ``work`` for every target, stage it, write what is still held; return that."""
        texts = [text for w in work.values() for _, text in w.current]
        embedded = [await target.embedder.embed_passages(texts) if texts else [] for target in targets]
        ids = [m.id for w in work.values() for m, _ in w.current]
        by_id = [dict(zip(ids, vectors, strict=True)) for vectors in embedded]
        work = await self._stage(token, work)
        for target, vectors in zip(targets, by_id, strict=True):
            batch = {tenant: ([m for m, _ in w.current], [vectors[m.id] for m, _ in w.current])
                     for tenant, w in work.items() if w.current}
            try:
                if batch:
                    await target.index.upsert_tenants(batch, seal=False)
                    self._unsealed[target.index.collection] = target.index
                for tenant, w in work.items():
                    if w.gone:
                        await target.index.partition(tenant).delete(w.gone)
            except Unavailable as exc:
                raise _IndexDown(exc) from exc
        return work

    async def _stage(self, token: uuid.UUID, work: dict[str, _TenantWork]) -> dict[str, _TenantWork]:
        """Mark the rows this worker still holds as writing, and renew their lease, in one
        short transaction; return the work of the memories that still have such a row.

        A purge drops claimed rows that are not writing (``_memories._purge``): before this
        commits, the purge finds the row and drops it, and this finds nothing; after, the
        purge leaves it and waits for the settle. The row lock decides between the two."""
        ids = sorted({memory_id for w in work.values() for memory_id in w.written()})
        if not ids:
            return work
        async with self._queue.worker_tx() as conn:
            cur = await conn.execute(
                "UPDATE outbox SET writing = true, next_attempt_at = now() + make_interval(secs => %s) "
                "WHERE tenant_id = ANY(%s) AND memory_id = ANY(%s::uuid[]) AND claim = %s "
                "RETURNING tenant_id, memory_id",
                (self._lease, sorted(work), ids, token),
            )
            held: dict[str, set[str]] = defaultdict(set)
            for row in await cur.fetchall():
                held[row["tenant_id"]].add(str(row["memory_id"]))
        return {tenant: w.keep(held[tenant]) for tenant, w in work.items()}

    async def _retry_later(self, conn: Any, token: uuid.UUID, tenant: str, claimed: list[dict[str, Any]],
                           reason: str) -> None:
        for row in claimed:
            attempts = row["attempts"] + 1
            dead = attempts >= self._max_attempts
            delay = backoff(attempts, self._base, self._cap)
            await conn.execute(
                "UPDATE outbox SET attempts = %s, dead = %s, last_error = %s, claim = NULL, "
                "next_attempt_at = now() + make_interval(secs => %s) WHERE tenant_id = %s AND id = %s AND claim = %s",
                (attempts, dead, reason[:500], delay, tenant, row["id"], token),
            )
            if dead:
                _log.error("outbox: memory %s of tenant %s dead-lettered after %d attempts: %s",
                           row["memory_id"], tenant, attempts, reason)
            else:
                _log.warning("outbox: memory %s of tenant %s failed (attempt %d, next in %.1fs): %s",
                             row["memory_id"], tenant, attempts, delay, reason)

    async def _record_routes(self, conn: Any, tenant: str, targets: list[IndexTarget]) -> None:
        for target in targets:
            index = target.index
            await conn.execute(
                "INSERT INTO index_routes (tenant_id, collection, partition_name, mode) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                (tenant, index.collection, partition_name(tenant) if index.routing == "partition" else "",
                 index.routing),
            )

    async def lag(self) -> OutboxLag:
        return await outbox_lag(self._queue)

    async def replay_dead(self) -> int:
        """Give every dead letter a fresh set of attempts; return how many."""
        async with self._queue.worker_tx() as conn:
            cur = await conn.execute(
                "UPDATE outbox SET dead = false, attempts = 0, next_attempt_at = now() WHERE dead"
            )
            return cur.rowcount


async def outbox_lag(queue: Postgres) -> OutboxLag:
    """Pending and dead outbox rows of every tenant, and the age of the oldest pending one
    (through the worker role: ids and counts only)."""
    async with queue.worker_tx() as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE NOT dead) AS pending, count(*) FILTER (WHERE dead) AS dead, "
            "COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE NOT dead)), 0) AS oldest "
            "FROM outbox"
        )
        row = await cur.fetchone()
    assert row is not None
    return OutboxLag(int(row["pending"]), int(row["dead"]), float(row["oldest"]))

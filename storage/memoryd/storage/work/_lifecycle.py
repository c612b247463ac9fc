"""The lifecycle sweeper: expiry, forgetting of stale memories, the episodic capacity cap.

Per tenant, each with its own ``TenantPolicy``:

1. expire — active, unpinned memories whose ``expires_at`` has passed are forgotten;
2. forget stale — active, unpinned memories with importance below ``stale_importance``,
   neither changed nor recalled for ``stale_days``, are forgotten;
3. evict — a writer with more active episodic memories (event, decision) of one subject
   (the organisation, '', counts as one) than ``episodic_cap`` loses its least valuable
   unpinned ones, valued importance × recency (recency as in recall scoring, counted from
   the last change or recall, whichever is later). The cap counts per (subject, agent that
   last wrote the memory): a writer flooding a subject only ever evicts its own memories,
   never another agent's.

Then the change log (Watch's, migration 0029) loses what is older than ``change_retention``:
every change up to the newest one recorded before that time, whose seq becomes the tenant's
horizon (a cursor below it can no longer resume). Last, the tenant's kept BM25 counts are folded (``_bm25.fold_stats``), so a keyword
search sums one row per group instead of one per write.

Forgetting is what a FORGET erase does (status 'forgotten', a 'forgotten' version, pending
values dropped, the vector deleted through the outbox), audited per subject as
``lifecycle.expire`` / ``lifecycle.forget_stale`` / ``lifecycle.evict`` by agent "memoryd"
and counted (``_counters``) in the same transaction. Rows are claimed ``FOR UPDATE SKIP
LOCKED``, so sweepers of several server replicas share the work. Every function takes
``now`` explicitly: the clock is the caller's (``memoryd lifecycle sweep --now``, tests).

Tenants are found as ``memoryd reindex`` and the plaintext backfill find them: every tenant
with memories has an index route or queued index work, which the worker role may list.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from memoryd.domain import AuditTag, Category, TenantPolicy, last_use, recency_at

from ..postgres import audit
from ..postgres import counters
from ..keywords import fold_stats
from .._loops import periodic
from ..memories import forget_ids
from ..postgres import Postgres, TenantConn

_log = logging.getLogger("memoryd.storage.lifecycle")
AGENT = "memoryd"
EXPIRE, FORGET_STALE, EVICT = "lifecycle.expire", "lifecycle.forget_stale", "lifecycle.evict"
_COUNTER = {EXPIRE: counters.EXPIRED, FORGET_STALE: counters.FORGOTTEN_STALE, EVICT: counters.EVICTED}
_EPISODIC = [c.value for c in Category if c.episodic]
# Who created a memory (migration 0023); a row written by a server of the version before has no
# creator recorded, and its last writer stands in.
_CREATOR = "COALESCE(created_by, agent)"
# Opens a transaction of the tenant being swept (``Postgres.tenant_tx`` with the tenant bound).
TenantTx = Callable[[], AbstractAsyncContextManager[TenantConn]]


@dataclass(frozen=True)
class SweepReport:
    tenants: int = 0
    expired: int = 0
    forgotten_stale: int = 0
    evicted: int = 0

    def __add__(self, other: SweepReport) -> SweepReport:
        return SweepReport(self.tenants + other.tenants, self.expired + other.expired,
                           self.forgotten_stale + other.forgotten_stale, self.evicted + other.evicted)


async def lifecycle_tenants(queue: Postgres) -> list[str]:
    """Every tenant that has memories (through the worker role: ids only, no content)."""
    async with queue.worker_tx() as conn:
        cur = await conn.execute("SELECT tenant_id FROM index_routes UNION SELECT tenant_id FROM outbox "
                                 "ORDER BY tenant_id")
        return [r["tenant_id"] for r in await cur.fetchall()]


async def _forget(conn: TenantConn, rows: list[dict[str, Any]], action: str, now: datetime) -> int:
    """Forget the claimed ``rows`` (id, subject), audit them per subject and count them."""
    by_subject: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_subject[row["subject"]].append(str(row["id"]))
    for subject, ids in by_subject.items():
        await forget_ids(conn, subject, ids)
        await audit.append(conn, AGENT, subject, action, ids, AuditTag(), {"now": now.isoformat()})
    await counters.bump(conn, {_COUNTER[action]: len(rows)})
    return len(rows)


async def prune_changes(conn: TenantConn, before: datetime) -> int:
    """Drop the tenant's changes up to the newest one recorded before ``before`` and raise its
    horizon to it; the highest seq pruned (0: none). Pruning by seq, not by time alone, leaves
    no gap a cursor above the horizon could fall into. (A data-modifying WITH runs whether or
    not the statement reads it.)"""
    tenant = conn.tenant
    cur = await conn.execute(
        "WITH last AS (SELECT max(seq) AS seq FROM memory_changes WHERE tenant_id = %s AND at < %s), "
        "gone AS (DELETE FROM memory_changes WHERE tenant_id = %s AND seq <= (SELECT seq FROM last) RETURNING 1) "
        "INSERT INTO memory_change_horizon (tenant_id, seq) SELECT %s, seq FROM last "
        "WHERE seq IS NOT NULL "
        "ON CONFLICT (tenant_id) DO UPDATE SET seq = GREATEST(memory_change_horizon.seq, EXCLUDED.seq) RETURNING seq",
        (tenant, before, tenant, tenant))
    row = await cur.fetchone()
    return int(row["seq"]) if row else 0


class LifecycleSweeper:
    """Sweeps tenants with the app role ``db``; ``queue`` (the worker role) lists tenants."""

    def __init__(self, db: Postgres, queue: Postgres | None, policy_for: Callable[[str], TenantPolicy],
                 half_lives: Mapping[Category, float | None], *, batch_size: int = 500,
                 change_retention: timedelta = timedelta(days=7)) -> None:
        self._db = db
        self._queue = queue
        self._policy_for = policy_for
        self._half_lives = half_lives
        self._batch = batch_size
        self._change_retention = change_retention

    async def sweep(self, now: datetime, tenants: list[str] | None = None) -> SweepReport:
        """Sweep ``tenants`` (default: every tenant with memories) as of ``now``."""
        if tenants is None:
            if self._queue is None:
                raise ValueError("listing tenants needs the worker role")
            tenants = await lifecycle_tenants(self._queue)
        report = SweepReport()
        for tenant in tenants:
            report += await self.sweep_tenant(tenant, now)
        return report

    async def sweep_tenant(self, tenant: str, now: datetime) -> SweepReport:
        policy = self._policy_for(tenant)
        tx = partial(self._db.tenant_tx, tenant)  # each batch its own transaction of the tenant
        expired = await self._claim_loop(
            tx, EXPIRE, now,
            "SELECT id, subject FROM memories WHERE tenant_id = %s AND status = 'active' AND NOT pinned "
            "AND expires_at <= %s ORDER BY expires_at, id LIMIT %s FOR UPDATE SKIP LOCKED",
            (tenant, now))
        stale = await self._claim_loop(
            tx, FORGET_STALE, now,
            "SELECT id, subject FROM memories WHERE tenant_id = %s AND status = 'active' AND NOT pinned "
            "AND importance < %s AND GREATEST(updated_at, last_access_at) < %s ORDER BY id LIMIT %s "
            "FOR UPDATE SKIP LOCKED",
            (tenant, policy.stale_importance, now - timedelta(days=policy.stale_days)))
        evicted = await self._evict(tx, policy.episodic_cap, now)
        async with tx() as conn:
            await prune_changes(conn, now - self._change_retention)
        async with tx() as conn:
            await fold_stats(conn)  # after the forgetting above, which adds rows of its own
        return SweepReport(1, expired, stale, evicted)

    async def _claim_loop(self, tx: TenantTx, action: str, now: datetime, query: str,
                          params: tuple[Any, ...]) -> int:
        done = 0
        while True:
            async with tx() as conn:
                cur = await conn.execute(query, (*params, self._batch))
                rows = await cur.fetchall()
                if rows:
                    done += await _forget(conn, rows, action, now)
            if len(rows) < self._batch:
                return done

    async def _evict(self, tx: TenantTx, cap: int, now: datetime) -> int:
        """Per subject, each creator's episodic memories over ``cap``: only ever what that agent
        created itself (``_CREATOR``), so repeating another agent's memory (a merge, which makes
        the repeater its last writer) and then flooding cannot get it evicted."""
        async with tx() as conn:
            cur = await conn.execute(
                f"SELECT subject, {_CREATOR} AS creator FROM memories WHERE tenant_id = %s AND status = 'active' "
                f"AND category = ANY(%s) GROUP BY subject, {_CREATOR} HAVING count(*) > %s",
                (conn.tenant, _EPISODIC, cap))
            crowded = [(r["subject"], r["creator"]) for r in await cur.fetchall()]
        done = 0
        for subject, creator in crowded:
            async with tx() as conn:
                cur = await conn.execute(
                    "SELECT id, subject, category, importance, pinned, updated_at, last_access_at FROM memories "
                    f"WHERE tenant_id = %s AND subject = %s AND {_CREATOR} = %s AND status = 'active' "
                    "AND category = ANY(%s) FOR UPDATE",
                    (conn.tenant, subject, creator, _EPISODIC))
                rows = await cur.fetchall()
                excess = len(rows) - cap
                if excess <= 0:
                    continue
                candidates = sorted((r for r in rows if not r["pinned"]), key=lambda r: self.value(r, now))
                if candidates[:excess]:
                    done += await _forget(conn, candidates[:excess], EVICT, now)
        return done

    def value(self, row: Mapping[str, Any], now: datetime) -> tuple[float, datetime, str]:
        """What an episodic memory is worth keeping: importance × recency (ties: older first)."""
        half_life = self._half_lives.get(Category(row["category"]))
        worth = float(row["importance"]) * recency_at(now, row["updated_at"], row["last_access_at"], half_life)
        return worth, last_use(row["updated_at"], row["last_access_at"]), str(row["id"])

    async def run(self, stop: asyncio.Event, interval: float, clock: Callable[[], datetime]) -> None:
        """Sweep every ``interval`` seconds until ``stop`` is set; an outage only delays it."""
        async def sweep() -> None:
            report = await self.sweep(clock())
            if report.expired or report.forgotten_stale or report.evicted:
                _log.info("lifecycle sweep: %d expired, %d stale forgotten, %d evicted over %d tenant(s)",
                          report.expired, report.forgotten_stale, report.evicted, report.tenants)

        await periodic(stop, interval, sweep, what="lifecycle sweep")

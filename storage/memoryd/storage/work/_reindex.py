"""Re-embed every memory into a new embedding model's collection, then switch Recall to it.

1. Register the model (not active). Within ``index_refresh_seconds`` every running outbox
   worker starts writing new and changed memories into its collection too (dual-write), so
   nothing written during the backfill is missed.
2. Backfill from Postgres, tenant by tenant, in id order, recording progress after each
   batch — an interrupted run continues where it stopped.
3. Mark the model active; every process's Recall follows within the refresh interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from ..memories import Stores
from ..postgres import register_index_model
from ._outbox import IndexTarget
from ..postgres import Postgres

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class ReindexReport:
    model_id: str
    tenants: int
    memories: int
    resumed: bool


async def activate(dsn: str, model_id: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn, conn.transaction():
        await conn.execute("UPDATE index_models SET active = false WHERE active AND model_id <> %s", (model_id,))
        await conn.execute("UPDATE index_models SET active = true, activated_at = now() WHERE model_id = %s",
                           (model_id,))


async def active_model(catalog: Postgres) -> str | None:
    """The embedding model Recall searches (``index_models``' active row), or None before any
    collection was made active."""
    async with catalog.catalog_tx() as conn:
        cur = await conn.execute("SELECT model_id FROM index_models WHERE active")
        row = await cur.fetchone()
    return str(row["model_id"]) if row is not None else None


async def reindex(owner_dsn: str, queue: Postgres, store: Stores, target: IndexTarget, *,
                  settle_seconds: float, batch_size: int = 64, progress: Progress | None = None) -> ReindexReport:
    """Backfill ``target`` from Postgres and make it the model Recall uses."""
    model_id = target.index.model_id
    await register_index_model(owner_dsn, model_id, target.index.collection, target.embedder.dim,
                               activate_if_first=False)
    await asyncio.sleep(settle_seconds)  # let every worker start dual-writing first
    async with queue.worker_tx() as conn:
        # Every tenant that has memories has a route, or index work still queued.
        cur = await conn.execute("SELECT tenant_id FROM index_routes UNION SELECT tenant_id FROM outbox "
                                 "ORDER BY tenant_id")
        tenants = [r["tenant_id"] for r in await cur.fetchall()]
        cur = await conn.execute("SELECT tenant_id, last_id::text AS last_id, done FROM reindex_progress "
                                 "WHERE model_id = %s", (model_id,))
        saved = {r["tenant_id"]: r for r in await cur.fetchall()}
    totals = {t: await store.session(t).count_active() for t in tenants}
    total, done_count = sum(totals.values()), 0
    written = 0
    for tenant in tenants:
        state = saved.get(tenant)
        if state is not None and state["done"]:
            done_count += totals[tenant]
            continue
        after = state["last_id"] if state is not None else None
        while True:
            page = await store.session(tenant).index_page(after, batch_size)
            if not page:
                break
            # Memories whose content cannot be decrypted are skipped, as the outbox worker does.
            readable = [(m, text) for m, text in page if text is not None]
            if readable:
                vectors = await target.embedder.embed_passages([t for _, t in readable])
                await target.index.partition(tenant).upsert([m for m, _ in readable], vectors)
            after = page[-1][0].id
            await _save(queue, model_id, tenant, after, done=False)
            written += len(page)
            done_count += len(page)
            if progress is not None:
                progress(min(done_count, total), total)
        await _save(queue, model_id, tenant, after, done=True)
    await activate(owner_dsn, model_id)
    return ReindexReport(model_id, len(tenants), written, resumed=bool(saved))


async def _save(queue: Postgres, model_id: str, tenant: str, last_id: str | None, *, done: bool) -> None:
    async with queue.worker_tx() as conn:
        await conn.execute(
            "INSERT INTO reindex_progress (model_id, tenant_id, last_id, done) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (model_id, tenant_id) DO UPDATE SET last_id = EXCLUDED.last_id, done = EXCLUDED.done, "
            "updated_at = now()",
            (model_id, tenant, last_id, done),
        )

"""The Postgres memory store: writes, keyed reads, listings, history and erasure.

Every method takes the tenant explicitly, runs in a tenant transaction (row level security
on) and also names the tenant in its WHERE clauses. Callers reach it only through the
server's caller scope, which supplies the tenant, the agent and the view-narrowed filter.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from memoryd.domain import (
    Change,
    Draft,
    EraseMode,
    EraseSelector,
    ErasureReceipt,
    Listing,
    MemoryVersion,
    Memory,
    NotFound,
    Page,
    ReadFilter,
    StoreCounts,
    WriteResult,
)

from ._postgres import Postgres
from ._rows import MEMORY_COLUMNS, memory_from_row, read_conditions, rules_condition, version_from_row
from ._writes import ItemWriter, claim_idempotency, enqueue_index, record_version, store_idempotent_response


async def _audit(conn: Any, tenant: str, agent: str, subject: str, action: str, ids: list[str], request_id: str,
                 details: dict[str, Any] | None = None) -> None:
    await conn.execute(
        "INSERT INTO audit_log (tenant_id, agent, subject, action, memory_ids, request_id, details) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (tenant, agent, subject, action, ids, request_id, Jsonb(details or {})),
    )


class PostgresMemoryStore:
    """Memories in Postgres, the source of truth."""

    def __init__(self, db: Postgres) -> None:
        self._db = db

    async def write(
        self,
        tenant: str,
        agent: str,
        subject: str,
        drafts: list[Draft],
        *,
        idempotency_key: str = "",
        request_hash: bytes = b"",
        request_id: str = "",
    ) -> list[WriteResult]:
        """Apply every draft's conflict policy in one transaction: all items or none."""
        async with self._db.tenant_tx(tenant) as conn:
            if idempotency_key:
                first = await claim_idempotency(conn, tenant, agent, idempotency_key, request_hash)
                if first is not None:
                    return first
            writer = ItemWriter(conn, tenant, agent, subject)
            results = [await writer.write(draft) for draft in drafts]
            if idempotency_key:
                await store_idempotent_response(conn, tenant, agent, idempotency_key, results)
            await _audit(conn, tenant, agent, subject, "write", [r.memory_id for r in results if r.memory_id],
                         request_id, {"outcomes": [r.outcome.value for r in results]})
            return results

    async def recall_keys(self, tenant: str, flt: ReadFilter, keys: list[str], now: datetime) -> list[Memory]:
        """Active, unexpired memories with one of ``keys`` that pass the filter."""
        where, params = read_conditions(tenant, flt)
        query = sql.SQL(
            "SELECT {cols} FROM memories WHERE {where} AND status = 'active' AND key = ANY(%s) "
            "AND (valid_until IS NULL OR valid_until > %s) ORDER BY key, updated_at DESC"
        ).format(cols=sql.SQL(MEMORY_COLUMNS), where=where)
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(query, [*params, keys, now])
            return [memory_from_row(row) for row in await cur.fetchall()]

    async def list(self, tenant: str, flt: ReadFilter, page: Page) -> Listing:
        """One page of memories, most recently updated first (keyset pagination)."""
        where, params = read_conditions(tenant, flt)
        clauses = [where, sql.SQL("status = ANY(%s)")]
        params.append([s.value for s in flt.statuses])
        if page.after_updated_at is not None:
            clauses.append(sql.SQL("(updated_at, id) < (%s, %s)"))
            params += [page.after_updated_at, page.after_id]
        query = sql.SQL("SELECT {cols} FROM memories WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT %s").format(
            cols=sql.SQL(MEMORY_COLUMNS), where=sql.SQL(" AND ").join(clauses)
        )
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(query, [*params, page.size + 1])
            rows = await cur.fetchall()
        return Listing([memory_from_row(r) for r in rows[: page.size]], has_more=len(rows) > page.size)

    async def history(self, tenant: str, flt: ReadFilter, memory_id: str, after_version: int,
                      size: int) -> tuple[list[MemoryVersion], bool]:
        """Versions of one memory the filter allows, newest first. NotFound if there is none."""
        where, params = read_conditions(tenant, flt)
        query = sql.SQL(
            "SELECT * FROM memory_versions WHERE {where} AND memory_id = %s AND version < %s "
            "ORDER BY version DESC LIMIT %s"
        ).format(where=where)
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(query, [*params, memory_id, after_version or 2**31 - 1, size + 1])
            rows = await cur.fetchall()
        if not rows and not after_version:
            raise NotFound("no such memory for this subject")
        return [version_from_row(r) for r in rows[:size]], len(rows) > size

    async def erase(
        self,
        tenant: str,
        agent: str,
        subject: str,
        flt: ReadFilter,
        selector: EraseSelector,
        mode: EraseMode,
        *,
        reason: str = "",
        request_id: str = "",
    ) -> ErasureReceipt:
        """Forget or purge the selected memories of ``subject``, verify, and log a receipt."""
        started = datetime.now(UTC)
        where, params = self._selection(tenant, subject, flt, selector, mode)
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                sql.SQL("SELECT id FROM memories WHERE {where} FOR UPDATE").format(where=where), params
            )
            ids = [str(r["id"]) for r in await cur.fetchall()]
            if mode is EraseMode.FORGET:
                counts = await self._forget(conn, tenant, subject, ids)
            else:
                counts = await self._purge(conn, tenant, ids)
            await _audit(conn, tenant, agent, subject, f"erase.{mode.value}", ids, request_id,
                         {"selector": selector.describe(), "reason": reason})
        async with self._db.tenant_tx(tenant) as conn:
            verified = await self._verify(conn, tenant, subject, flt, selector, mode, ids)
            finished = datetime.now(UTC)
            cur = await conn.execute(
                "INSERT INTO erasure_log (tenant_id, agent, subject, selector, mode, reason, counts, verified, "
                "started_at, finished_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING erase_id",
                (tenant, agent, subject, Jsonb(selector.describe()), mode.value, reason,
                 Jsonb(counts.__dict__), verified, started, finished),
            )
            row = await cur.fetchone()
            assert row is not None
        return ErasureReceipt(str(row["erase_id"]), mode, counts, verified, started, finished)

    @staticmethod
    def _selection(tenant: str, subject: str, flt: ReadFilter, selector: EraseSelector,
                   mode: EraseMode) -> tuple[sql.Composable, list[Any]]:
        # Only the subject's own memories (subject and session scope) that the view reaches.
        rules, params = rules_condition(flt.rules)
        parts = [sql.SQL("tenant_id = %s AND subject = %s AND scope <> 'org'"), rules]
        params = [tenant, subject, *params]
        if mode is EraseMode.FORGET:
            parts.append(sql.SQL("status = 'active'"))
        if selector.ids:
            parts.append(sql.SQL("id = ANY(%s::uuid[])"))
            params.append(list(selector.ids))
        elif selector.key:
            parts.append(sql.SQL("key = %s"))
            params.append(selector.key)
        elif selector.source_turn_id:
            parts.append(sql.SQL("source_turn_id = %s"))
            params.append(selector.source_turn_id)
        elif selector.category is not None:
            parts.append(sql.SQL("category = %s"))
            params.append(selector.category.value)
        return sql.SQL(" AND ").join(parts), params

    @staticmethod
    async def _forget(conn: Any, tenant: str, subject: str, ids: list[str]) -> StoreCounts:
        if not ids:
            return StoreCounts()
        await conn.execute(
            "UPDATE memories SET status = 'forgotten', version = version + 1, updated_at = now() "
            "WHERE tenant_id = %s AND id = ANY(%s::uuid[])",
            (tenant, ids),
        )
        cur = await conn.execute(
            "DELETE FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) AND op = 'upsert'", (tenant, ids)
        )
        dropped = cur.rowcount
        for memory_id in ids:
            await record_version(conn, tenant, memory_id, Change.FORGOTTEN)
            # A forgotten memory must leave the vector index as well.
            await enqueue_index(conn, tenant, memory_id, subject, "delete")
        return StoreCounts(memories=len(ids), outbox=dropped)

    @staticmethod
    async def _purge(conn: Any, tenant: str, ids: list[str]) -> StoreCounts:
        if not ids:
            return StoreCounts()
        counts = {}
        for table, column in (("outbox", "memory_id"), ("memory_versions", "memory_id"), ("memories", "id")):
            cur = await conn.execute(
                sql.SQL("DELETE FROM {t} WHERE tenant_id = %s AND {c} = ANY(%s::uuid[])").format(
                    t=sql.Identifier(table), c=sql.Identifier(column)
                ),
                (tenant, ids),
            )
            counts[table] = cur.rowcount
        return StoreCounts(memories=counts["memories"], versions=counts["memory_versions"], outbox=counts["outbox"])

    async def _verify(self, conn: Any, tenant: str, subject: str, flt: ReadFilter, selector: EraseSelector,
                      mode: EraseMode, ids: list[str]) -> bool:
        """Re-read after commit: nothing selected is left (PURGE) or still active (FORGET)."""
        where, params = self._selection(tenant, subject, flt, selector, mode)
        checks: list[tuple[sql.Composable, list[Any]]] = [
            (sql.SQL("SELECT count(*) AS n FROM memories WHERE {w}").format(w=where), params)
        ]
        if mode is EraseMode.PURGE:
            for table in ("memory_versions", "outbox"):
                checks.append((
                    sql.SQL("SELECT count(*) AS n FROM {t} WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])").format(
                        t=sql.Identifier(table)),
                    [tenant, ids],
                ))
                if selector.all_of_subject:
                    checks.append((
                        sql.SQL("SELECT count(*) AS n FROM {t} WHERE tenant_id = %s AND subject = %s").format(
                            t=sql.Identifier(table)),
                        [tenant, subject],
                    ))
        for query, query_params in checks:
            cur = await conn.execute(query, query_params)
            row = await cur.fetchone()
            if row is None or row["n"]:
                return False
        return True

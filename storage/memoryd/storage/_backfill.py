"""Seal the plaintext left by versions before encryption (run at server start, after migrating).

Rows of ``memories`` and ``memory_versions`` written before migration 0007 hold their text
and data in the clear. Tenant by tenant, in batches (one transaction each, rows locked with
``SKIP LOCKED`` so several starting servers share the work), each row is sealed with its
subject's data key (created if the subject has none), its plaintext columns are set to NULL
and its dedup digest is replaced by the keyed one. Until then such rows read as stored.
A row whose subject's key cannot be unwrapped is left as it is and reported.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memoryd.domain import DataKeyUnavailable

from ._envelope import DataKey, SubjectKeys
from ._postgres import WORKER_ROLE, Postgres, PostgresSettings

_log = logging.getLogger("memoryd.storage.backfill")
_FIRST_ID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class SealReport:
    tenants: int = 0
    memories: int = 0
    versions: int = 0
    skipped: int = 0  # rows whose subject's key could not be unwrapped


async def plaintext_tenants(settings: PostgresSettings) -> list[str]:
    """Tenants that may still have plaintext rows.

    The owner sees every row if it may bypass row level security (a superuser, as in the
    embedded default). Otherwise every tenant with memories has an index route or queued
    index work, which the worker role sees — the list ``memoryd reindex`` walks too.
    """
    found: set[str] = set()
    async with await psycopg.AsyncConnection.connect(settings.dsn, autocommit=True, row_factory=dict_row,
                                                     connect_timeout=10) as conn:
        cur = await conn.execute("SELECT tenant_id FROM memories WHERE text_ct IS NULL "
                                 "UNION SELECT tenant_id FROM memory_versions WHERE text_ct IS NULL")
        found |= {r["tenant_id"] for r in await cur.fetchall()}
    worker = Postgres(replace(settings, pool_min=1, pool_max=1), role=WORKER_ROLE)
    await worker.open()
    try:
        async with worker.worker_tx() as conn:
            cur = await conn.execute("SELECT tenant_id FROM index_routes UNION SELECT tenant_id FROM outbox")
            found |= {r["tenant_id"] for r in await cur.fetchall()}
    finally:
        await worker.close()
    return sorted(found)


async def _key(conn: Any, keys: SubjectKeys, tenant: str, subject: str,
               held: dict[str, DataKey | None]) -> DataKey | None:
    if subject not in held:
        try:
            held[subject] = await keys.for_write(conn, tenant, subject)
        except DataKeyUnavailable:
            held[subject] = None
    return held[subject]


async def seal_memories(conn: Any, keys: SubjectKeys, tenant: str, after: str, limit: int) -> tuple[int, int, str]:
    """Seal up to ``limit`` plaintext memories with id > ``after``: (sealed, skipped, last id)."""
    cur = await conn.execute(
        "SELECT id, subject, text, data FROM memories WHERE tenant_id = %s AND text_ct IS NULL AND id > %s::uuid "
        "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
        (tenant, after, limit),
    )
    rows = await cur.fetchall()
    held: dict[str, DataKey | None] = {}
    sealed = skipped = 0
    for row in rows:
        key = await _key(conn, keys, tenant, row["subject"], held)
        if key is None:
            skipped += 1
            continue
        memory_id = str(row["id"])
        await conn.execute(
            "UPDATE memories SET text_ct = %s, data_ct = %s, text_hash = %s, text = NULL, data = NULL "
            "WHERE tenant_id = %s AND id = %s",
            (key.seal_text(memory_id, row["text"]), key.seal_data(memory_id, row["data"]),
             key.text_digest(row["text"]), tenant, memory_id),
        )
        sealed += 1
    return sealed, skipped, str(rows[-1]["id"]) if rows else ""


async def seal_versions(conn: Any, keys: SubjectKeys, tenant: str, after: tuple[str, int],
                        limit: int) -> tuple[int, int, tuple[str, int] | None]:
    """Seal up to ``limit`` plaintext versions after (memory id, version): (sealed, skipped, last)."""
    cur = await conn.execute(
        "SELECT memory_id, version, subject, text, data FROM memory_versions WHERE tenant_id = %s "
        "AND text_ct IS NULL AND (memory_id, version) > (%s::uuid, %s) ORDER BY memory_id, version LIMIT %s "
        "FOR UPDATE SKIP LOCKED",
        (tenant, after[0], after[1], limit),
    )
    rows = await cur.fetchall()
    held: dict[str, DataKey | None] = {}
    sealed = skipped = 0
    for row in rows:
        key = await _key(conn, keys, tenant, row["subject"], held)
        if key is None:
            skipped += 1
            continue
        memory_id = str(row["memory_id"])
        await conn.execute(
            "UPDATE memory_versions SET text_ct = %s, data_ct = %s, text = NULL, data = NULL "
            "WHERE tenant_id = %s AND memory_id = %s AND version = %s",
            (key.seal_text(memory_id, row["text"]), key.seal_data(memory_id, row["data"]), tenant, memory_id,
             row["version"]),
        )
        sealed += 1
    return sealed, skipped, (str(rows[-1]["memory_id"]), int(rows[-1]["version"])) if rows else None


async def seal_plaintext(settings: PostgresSettings, db: Postgres, keys: SubjectKeys, *,
                         batch_size: int = 500) -> SealReport:
    """Seal every plaintext row of every tenant, ``batch_size`` rows per transaction."""
    report = SealReport()
    for tenant in await plaintext_tenants(settings):
        memories = versions = skipped = 0
        after = _FIRST_ID
        while after:
            async with db.tenant_tx(tenant) as conn:
                sealed, missed, after = await seal_memories(conn, keys, tenant, after, batch_size)
            memories, skipped = memories + sealed, skipped + missed
        position: tuple[str, int] | None = (_FIRST_ID, 0)
        while position is not None:
            async with db.tenant_tx(tenant) as conn:
                sealed, missed, position = await seal_versions(conn, keys, tenant, position, batch_size)
            versions, skipped = versions + sealed, skipped + missed
        if memories or versions or skipped:
            report = SealReport(report.tenants + 1, report.memories + memories, report.versions + versions,
                                report.skipped + skipped)
        if skipped:
            _log.error("tenant %s: %d plaintext row(s) left unsealed: their subject's data key cannot be unwrapped",
                       tenant, skipped)
    return report

"""Seal the plaintext left by earlier versions (run at server start, after migrating).

Rows of ``memories`` and ``memory_versions`` written before migration 0007 hold their text
and data in the clear; rows written before 0012 hold their key and tags in the clear (and
pending values their tags). Tenant by tenant, in batches (one transaction each, rows locked
with ``SKIP LOCKED`` so several starting servers share the work), each row is sealed with its
subject's data key (created if the subject has none) and its plaintext columns are emptied:
text and data become NULL and the dedup digest the keyed one; key and tags become their
labels (``TermHasher.label``) and sealed copies, and an active memory is queued for the
vector index again, so the index's copy holds labels instead of names too. A row whose
subject's key cannot be unwrapped is left as it is and reported.

What this cannot reach: copies of the old plaintext in Postgres's dead tuples and WAL (until
VACUUM and WAL recycling) and in backups taken before (docs/security.md, "Encryption at rest", says so).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memoryd.domain import DataKeyUnavailable

from ..keys import DataKey, SubjectKeys, TenantKeys
from ..keywords import TermHasher
from ..postgres import WORKER_ROLE, Postgres, PostgresSettings, TenantConn
from ._trust import TAGS_FIELD
from ._write_batch import enqueue_index

_log = logging.getLogger("memoryd.storage.backfill")
_FIRST_ID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class SealReport:
    tenants: int = 0
    memories: int = 0
    versions: int = 0
    skipped: int = 0  # rows whose subject's key could not be unwrapped
    labelled: int = 0  # rows whose key and tags were labelled and sealed (memories, versions, pending)


async def plaintext_tenants(settings: PostgresSettings) -> list[str]:
    """Tenants that may still have plaintext rows.

    The owner sees every row if it may bypass row level security (a superuser, as in the
    embedded default). Otherwise every tenant with memories has an index route or queued
    index work, which the worker role sees — the list ``memoryd reindex`` walks too.
    """
    found: set[str] = set()
    if settings.dsn:  # a least-privilege process has no owner login: the worker role's list serves
        async with await psycopg.AsyncConnection.connect(settings.dsn, autocommit=True, row_factory=dict_row,
                                                         connect_timeout=10) as conn:
            cur = await conn.execute(
                "SELECT tenant_id FROM memories WHERE text_ct IS NULL OR key <> '' OR tags <> '{}' "
                "UNION SELECT tenant_id FROM memory_versions WHERE text_ct IS NULL OR key <> '' OR tags <> '{}' "
                "UNION SELECT tenant_id FROM pending_values WHERE tags <> '{}'")
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


async def _key(conn: TenantConn, keys: TenantKeys, subject: str,
               held: dict[str, DataKey | None]) -> DataKey | None:
    if subject not in held:
        try:
            held[subject] = await keys.for_write(conn, subject)
        except DataKeyUnavailable:
            held[subject] = None
    return held[subject]


async def _with_keys(conn: TenantConn, keys: TenantKeys,
                     rows: list[dict[str, Any]]) -> tuple[list[tuple[dict[str, Any], DataKey]], int]:
    """``rows`` with their subjects' data keys; how many were skipped (no key to unwrap)."""
    held: dict[str, DataKey | None] = {}
    ready = []
    for row in rows:
        key = await _key(conn, keys, row["subject"], held)
        if key is not None:
            ready.append((row, key))
    return ready, len(rows) - len(ready)


async def seal_memories(conn: TenantConn, keys: TenantKeys, after: str, limit: int) -> tuple[int, int, str]:
    """Seal up to ``limit`` plaintext memories with id > ``after``: (sealed, skipped, last id)."""
    tenant = conn.tenant
    cur = await conn.execute(
        "SELECT id, subject, text, data FROM memories WHERE tenant_id = %s AND text_ct IS NULL AND id > %s::uuid "
        "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
        (tenant, after, limit),
    )
    rows = await cur.fetchall()
    ready, skipped = await _with_keys(conn, keys, rows)
    for row, key in ready:
        memory_id = str(row["id"])
        await conn.execute(
            "UPDATE memories SET text_ct = %s, data_ct = %s, text_hash = %s, text = NULL, data = NULL "
            "WHERE tenant_id = %s AND id = %s",
            (key.seal_text(memory_id, row["text"]), key.seal_data(memory_id, row["data"]),
             key.text_digest(row["text"]), tenant, memory_id),
        )
    return len(ready), skipped, str(rows[-1]["id"]) if rows else ""


async def seal_versions(conn: TenantConn, keys: TenantKeys, after: tuple[str, int],
                        limit: int) -> tuple[int, int, tuple[str, int] | None]:
    """Seal up to ``limit`` plaintext versions after (memory id, version): (sealed, skipped, last)."""
    tenant = conn.tenant
    cur = await conn.execute(
        "SELECT memory_id, version, subject, text, data FROM memory_versions WHERE tenant_id = %s "
        "AND text_ct IS NULL AND (memory_id, version) > (%s::uuid, %s) ORDER BY memory_id, version LIMIT %s "
        "FOR UPDATE SKIP LOCKED",
        (tenant, after[0], after[1], limit),
    )
    rows = await cur.fetchall()
    ready, skipped = await _with_keys(conn, keys, rows)
    for row, key in ready:
        memory_id = str(row["memory_id"])
        await conn.execute(
            "UPDATE memory_versions SET text_ct = %s, data_ct = %s, text = NULL, data = NULL "
            "WHERE tenant_id = %s AND memory_id = %s AND version = %s",
            (key.seal_text(memory_id, row["text"]), key.seal_data(memory_id, row["data"]), tenant, memory_id,
             row["version"]),
        )
    return len(ready), skipped, (str(rows[-1]["memory_id"]), int(rows[-1]["version"])) if rows else None


_LABEL_QUERIES = {
    "memories": ("SELECT id AS row_id, id AS memory_id, 0 AS version, subject, key, tags, status FROM memories "
                 "WHERE tenant_id = %s AND (key <> '' OR tags <> '{}') ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"),
    "memory_versions": ("SELECT memory_id AS row_id, memory_id, version, subject, key, tags, status "
                        "FROM memory_versions WHERE tenant_id = %s AND (key <> '' OR tags <> '{}') "
                        "ORDER BY memory_id, version LIMIT %s FOR UPDATE SKIP LOCKED"),
}


async def label_rows(conn: TenantConn, keys: TenantKeys, hasher: TermHasher, table: str,
                     limit: int) -> tuple[int, int]:
    """Label and seal the plaintext keys and tags of up to ``limit`` rows of ``table``
    (memories or memory_versions): (labelled, skipped). Skipped rows keep their plaintext."""
    tenant = conn.tenant
    cur = await conn.execute(_LABEL_QUERIES[table], (tenant, limit))
    ready, skipped = await _with_keys(conn, keys, await cur.fetchall())
    for row, key in ready:
        memory_id, tags = str(row["memory_id"]), sorted(set(row["tags"]))
        values = (hasher.label(row["key"]), key.seal_key(memory_id, row["key"]), [hasher.label(t) for t in tags],
                  key.seal_tags(memory_id, tags))
        if table == "memories":
            await conn.execute("UPDATE memories SET key_label = %s, key_ct = %s, tag_labels = %s, tags_ct = %s, "
                               "key = '', tags = '{}' WHERE tenant_id = %s AND id = %s", (*values, tenant, memory_id))
            if row["status"] == "active":
                await enqueue_index(conn, memory_id, row["subject"], "upsert")
        else:
            await conn.execute("UPDATE memory_versions SET key_label = %s, key_ct = %s, tag_labels = %s, "
                               "tags_ct = %s, key = '', tags = '{}' WHERE tenant_id = %s AND memory_id = %s "
                               "AND version = %s", (*values, tenant, memory_id, row["version"]))
    return len(ready), skipped


async def seal_pending_tags(conn: TenantConn, keys: TenantKeys, limit: int) -> tuple[int, int]:
    """Seal the plaintext tags of up to ``limit`` pending values: (sealed, skipped)."""
    tenant = conn.tenant
    cur = await conn.execute("SELECT id, subject, tags FROM pending_values WHERE tenant_id = %s AND tags <> '{}' "
                             "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED", (tenant, limit))
    ready, skipped = await _with_keys(conn, keys, await cur.fetchall())
    for row, key in ready:
        pending_id = str(row["id"])
        tags_ct = key.seal(pending_id, TAGS_FIELD, json.dumps(sorted(set(row["tags"]))).encode())
        await conn.execute("UPDATE pending_values SET tags_ct = %s, tags = '{}' WHERE tenant_id = %s AND id = %s",
                           (tags_ct, tenant, pending_id))
    return len(ready), skipped


async def _label_tenant(db: Postgres, keys: TenantKeys, hasher: TermHasher, batch_size: int) -> tuple[int, int]:
    """Label every plaintext key and tag of the key ring's tenant: (labelled, skipped).

    Each batch takes the first rows still holding plaintext; a batch whose rows were all
    skipped (their key cannot be unwrapped) ends that table, as would a batch of none.
    """
    labelled = skipped = 0
    for table in ("memories", "memory_versions", "pending_values"):
        while True:
            async with db.tenant_tx(keys.tenant) as conn:
                if table == "pending_values":
                    done, missed = await seal_pending_tags(conn, keys, batch_size)
                else:
                    done, missed = await label_rows(conn, keys, hasher, table, batch_size)
            labelled, skipped = labelled + done, skipped + missed
            if not done:
                break
    return labelled, skipped


async def seal_plaintext(settings: PostgresSettings, db: Postgres, keys: SubjectKeys,
                         hasher_for: Callable[[str], TermHasher], *, batch_size: int = 500) -> SealReport:
    """Seal every plaintext row of every tenant, ``batch_size`` rows per transaction."""
    report = SealReport()
    for tenant in await plaintext_tenants(settings):
        ring = keys.of(tenant)
        memories = versions = skipped = 0
        after = _FIRST_ID
        while after:
            async with db.tenant_tx(tenant) as conn:
                sealed, missed, after = await seal_memories(conn, ring, after, batch_size)
            memories, skipped = memories + sealed, skipped + missed
        position: tuple[str, int] | None = (_FIRST_ID, 0)
        while position is not None:
            async with db.tenant_tx(tenant) as conn:
                sealed, missed, position = await seal_versions(conn, ring, position, batch_size)
            versions, skipped = versions + sealed, skipped + missed
        labelled, missed = await _label_tenant(db, ring, hasher_for(tenant), batch_size)
        skipped += missed
        if memories or versions or labelled or skipped:
            report = SealReport(report.tenants + 1, report.memories + memories, report.versions + versions,
                                report.skipped + skipped, report.labelled + labelled)
        if skipped:
            _log.error("tenant %s: %d plaintext row(s) left unsealed: their subject's data key cannot be unwrapped",
                       tenant, skipped)
    return report

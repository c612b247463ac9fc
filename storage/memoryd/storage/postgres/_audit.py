"""The audit log: every write, read and erase, in one hash chain per tenant.

An event's hash is SHA-256 over the previous event's hash and a canonical encoding of its
content (time, agent, subject, action, memory ids, request id, details). Appending takes a
per-tenant advisory lock for the rest of the transaction — audit events are the last thing
a transaction writes, so the lock is held only until commit — and links to the tenant's
latest event. ``verify`` recomputes the chain: an edited event fails its own hash, a deleted
one breaks the next link. (Deleting the newest events is only visible against a head hash
kept elsewhere, which ``verify`` prints for that purpose.)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from memoryd.domain import AuditTag

from ._postgres import TenantConn

GENESIS = b"\x00" * 32


def event_hash(prev: bytes, at: datetime, agent: str, subject: str, action: str, ids: list[str],
               request_id: str, details: dict[str, Any], trace_id: str = "") -> bytes:
    content: list[Any] = [at.astimezone(UTC).isoformat(timespec="microseconds"), agent, subject, action, sorted(ids),
                          request_id, details]
    if trace_id:  # events chained before trace ids were recorded keep their hashes
        content.append(trace_id)
    body = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(prev + body).digest()


async def append(conn: TenantConn, agent: str, subject: str, action: str, ids: list[str], tag: AuditTag,
                 details: dict[str, Any] | None = None) -> None:
    """Append one event to the tenant's chain, inside the caller's transaction. The view
    version the caller acted through, if any, is recorded in ``details["view"]``."""
    details = dict(details or {})
    if tag.view_version is not None:
        details["view"] = tag.view_version
    request_id, trace_id, tenant = tag.request_id, tag.trace_id, conn.tenant
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", ("memoryd-audit\x1f" + tenant,))
    cur = await conn.execute(
        "SELECT hash FROM audit_log WHERE tenant_id = %s ORDER BY seq DESC LIMIT 1", (tenant,)
    )
    row = await cur.fetchone()
    prev = bytes(row["hash"]) if row is not None and row["hash"] is not None else GENESIS
    at = datetime.now(UTC)
    digest = event_hash(prev, at, agent, subject, action, ids, request_id, details, trace_id)
    await conn.execute(
        "INSERT INTO audit_log (tenant_id, at, agent, subject, action, memory_ids, request_id, trace_id, details, "
        "prev_hash, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (tenant, at, agent, subject, action, ids, request_id, trace_id, Jsonb(details), prev, digest),
    )


@dataclass(frozen=True)
class ChainReport:
    events: int
    unchained: int
    broken_at: int | None  # the seq of the first event whose link or hash does not hold
    head: bytes

    @property
    def intact(self) -> bool:
        return self.broken_at is None


async def verify(conn: TenantConn) -> ChainReport:
    cur = await conn.execute(
        "SELECT seq, at, agent, subject, action, memory_ids, request_id, trace_id, details, prev_hash, hash "
        "FROM audit_log WHERE tenant_id = %s ORDER BY seq", (conn.tenant,)
    )
    prev, events, unchained = GENESIS, 0, 0
    async for row in cur:
        events += 1
        if row["hash"] is None:
            unchained += 1
            continue
        expected = event_hash(prev, row["at"], row["agent"], row["subject"], row["action"],
                              [str(i) for i in row["memory_ids"]], row["request_id"], row["details"], row["trace_id"])
        if bytes(row["prev_hash"]) != prev or bytes(row["hash"]) != expected:
            return ChainReport(events, unchained, row["seq"], prev)
        prev = expected
    return ChainReport(events, unchained, None, prev)

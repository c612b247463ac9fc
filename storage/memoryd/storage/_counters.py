"""Per-tenant lifecycle and conflict counters (``lifecycle_counts``, migration 0009).

Counted in the same transaction as what they count, so a rolled-back write or sweep counts
nothing. Names: ``lifecycle.expired``, ``lifecycle.forgotten_stale``, ``lifecycle.evicted``,
``conflicts.pending``, ``conflicts.settled``, ``conflicts.resolved``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EXPIRED = "lifecycle.expired"
FORGOTTEN_STALE = "lifecycle.forgotten_stale"
EVICTED = "lifecycle.evicted"
CONFLICTS_PENDING = "conflicts.pending"
CONFLICTS_SETTLED = "conflicts.settled"
CONFLICTS_RESOLVED = "conflicts.resolved"


async def bump(conn: Any, tenant: str, name: str, n: int = 1) -> None:
    """Add ``n`` to the tenant's counter ``name`` inside the caller's transaction."""
    if n <= 0:
        return
    await conn.execute(
        "INSERT INTO lifecycle_counts (tenant_id, name, value) VALUES (%s, %s, %s) "
        "ON CONFLICT (tenant_id, name) DO UPDATE SET value = lifecycle_counts.value + EXCLUDED.value, "
        "updated_at = now()",
        (tenant, name, n),
    )


async def read(conn: Any, tenant: str) -> dict[str, int]:
    cur = await conn.execute("SELECT name, value FROM lifecycle_counts WHERE tenant_id = %s", (tenant,))
    return {r["name"]: int(r["value"]) for r in await cur.fetchall()}


@dataclass(frozen=True)
class TenantMetrics:
    """What metrics read of one tenant: counts only, never content."""

    active: int = 0
    lifecycle: dict[str, int] = field(default_factory=dict)
    pipeline: dict[str, int] = field(default_factory=dict)


async def tenant_metrics(conn: Any, tenant: str) -> TenantMetrics:
    """The tenant's active memories and its lifecycle and pipeline counters, in one query
    (run inside the tenant's transaction)."""
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM memories WHERE tenant_id = %(t)s AND status = 'active') AS active, "
        "(SELECT COALESCE(jsonb_object_agg(name, value), '{}') FROM lifecycle_counts WHERE tenant_id = %(t)s) "
        "AS lifecycle, "
        "(SELECT COALESCE(jsonb_object_agg(name, value), '{}') FROM pipeline_counts WHERE tenant_id = %(t)s) "
        "AS pipeline",
        {"t": tenant},
    )
    row = await cur.fetchone()
    assert row is not None
    return TenantMetrics(int(row["active"]), {k: int(v) for k, v in row["lifecycle"].items()},
                         {k: int(v) for k, v in row["pipeline"].items()})

"""Per-tenant counters: one table (``pipeline_counts``), one way to add to it, one to read it.

Every counter is added to in the same transaction as what it counts (``bump``), so a
rolled-back write, sweep or job counts nothing. Names are ``<family>.<what>``:

- ``lifecycle.expired`` / ``.forgotten_stale`` / ``.evicted``: the lifecycle sweeper;
- ``conflicts.pending`` / ``.settled`` / ``.resolved``: source trust (writes, ResolveConflict);
- ``extraction.jobs_queued`` / ``.jobs_succeeded`` / ``.jobs_failed``, ``.items_written``,
  ``.parse_failures``, ``.dropped.<reason>``, ``.pii.<field>`` (what the PII screen took out
  of a kept item: ``text``, ``entity``, ``tag``, ``data``): extraction jobs;
- ``consolidation.groups`` / ``.fragments`` / ``.pending`` / ``.skipped`` / ``.parse_failures``
  / ``.unavailable`` / ``.dropped.<reason>``: consolidation.

A name read somewhere other than where it is counted (metrics, ``memoryd lifecycle counts``)
is a constant here. The lifecycle and conflict counters had a table of their own until
migration 0022; the table kept the name operators already read, ``pipeline_counts``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._postgres import TenantConn

EXPIRED = "lifecycle.expired"
FORGOTTEN_STALE = "lifecycle.forgotten_stale"
EVICTED = "lifecycle.evicted"
CONFLICTS_PENDING = "conflicts.pending"
CONFLICTS_SETTLED = "conflicts.settled"
CONFLICTS_RESOLVED = "conflicts.resolved"
JOBS_QUEUED = "extraction.jobs_queued"
JOBS_SUCCEEDED = "extraction.jobs_succeeded"
JOBS_FAILED = "extraction.jobs_failed"
EXTRACTION_PARSE_FAILURES = "extraction.parse_failures"
EXTRACTION_OUTAGE_RETRIES = "extraction.outage_retries"  # a job sent back to wait for its model
# The families `memoryd lifecycle counts` prints.
LIFECYCLE_FAMILIES = ("lifecycle", "conflicts")

# The one way a counter changes: the rows of ``{rows}`` (tenant, name, amount) are added.
_ADD = (
    "INSERT INTO pipeline_counts AS c (tenant_id, name, value) {rows} "
    "ON CONFLICT (tenant_id, name) DO UPDATE SET value = c.value + EXCLUDED.value, updated_at = now()"
)
_AMOUNTS = _ADD.format(rows="SELECT %s::text, b.name, b.value FROM unnest(%s::text[], %s::bigint[]) AS b(name, value) "
                            "ORDER BY b.name")
_ROWS = _ADD.format(rows="SELECT %s::text, %s::text, count(*) FROM counted HAVING count(*) > 0")


@dataclass(frozen=True)
class Counted:
    """A counter whose amount Postgres counts: the rows that ``statement`` (a data-modifying
    statement with RETURNING) returns. It runs in the bump's own statement, so a pipelined
    writer sends both without waiting for the count, and the counter is locked where the
    change is made (see ``bump``)."""

    name: str
    statement: str
    params: tuple[Any, ...] = ()


async def bump(conn: TenantConn, counts: Mapping[str, int] | Counted) -> None:
    """Add ``counts`` (name → how many, or one ``Counted``) to the tenant's counters inside
    the caller's transaction, in one statement. Counters only go up: amounts below 1 add
    nothing.

    Lock order: the conflict counters are bumped where the write is made, before the
    transaction's audit event (whose per-tenant lock is held to the commit); the others
    after it. A counter bumped on both sides of that lock could deadlock two transactions.
    """
    if isinstance(counts, Counted):
        await conn.execute(f"WITH counted AS ({counts.statement}) {_ROWS}", (*counts.params, conn.tenant, counts.name))
        return
    # In name order, so two transactions bumping the same counters lock them in one order.
    names = sorted(name for name, n in counts.items() if n > 0)
    if names:
        await conn.execute(_AMOUNTS, (conn.tenant, names, [counts[name] for name in names]))


async def read(conn: TenantConn, families: Collection[str] = ()) -> dict[str, int]:
    """The tenant's counters, or only those of ``families`` (``"lifecycle"``: ``lifecycle.*``)."""
    cur = await conn.execute("SELECT name, value FROM pipeline_counts WHERE tenant_id = %s", (conn.tenant,))
    return {r["name"]: int(r["value"]) for r in await cur.fetchall()
            if not families or r["name"].split(".", 1)[0] in families}


@dataclass(frozen=True)
class TenantMetrics:
    """What metrics read of one tenant: counts only, never content."""

    active: int = 0
    counts: dict[str, int] = field(default_factory=dict)


async def tenant_metrics(conn: TenantConn) -> TenantMetrics:
    """The tenant's active memories and its counters, inside the tenant's transaction (in a
    pipelined one, both statements go in one round trip)."""
    active = await conn.execute(
        "SELECT count(*) AS active FROM memories WHERE tenant_id = %s AND status = 'active'", (conn.tenant,)
    )
    counts = await read(conn)
    row = await active.fetchone()
    assert row is not None
    return TenantMetrics(int(row["active"]), counts)

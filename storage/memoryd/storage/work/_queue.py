"""Work queues in Postgres tables: claim under a lease, work, settle — no transaction open
across the work.

The outbox (``_outbox``) and the extraction jobs (``_jobs``) are both such queues:

1. **claim**, in one short transaction: take due rows with ``FOR UPDATE SKIP LOCKED`` — so
   any number of workers, in any number of processes, never take the same row — and lease
   them: ``next_attempt_at`` moves ``lease`` seconds ahead, so they are not due for anyone
   else meanwhile, and the claim's own columns are set (a claim token, a state).
2. **work**, with no transaction open: embedding, the vector index, a model. Nothing is
   locked, so Write and Erase never wait for it.
3. **settle**, in one short transaction: each queue's own statements, which touch a row only
   if it is still the one claimed (the outbox: still carrying the claim token; a job: still
   running). A row taken away meanwhile — folded by a newer Write, dropped by an Erase,
   claimed again after the lease ran out — is left as the other party left it.

If a worker dies, its lease runs out and another worker claims the rows again; the work is
idempotent, so doing it twice is harmless. A queue whose claims say who holds a row (``held``:
the outbox's claim token) can ``renew`` the lease while the work goes on, so its lease can be
short and a crash frees the rows soon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ..postgres import Connection


_LEASE = "next_attempt_at = now() + make_interval(secs => %(lease)s)"


@dataclass(frozen=True)
class WorkQueue:
    """One queue table: which rows are due, in which order they are taken, and what a claim
    sets besides the lease (SQL fragments of this package, never input)."""

    table: str
    due: str  # claimable besides ``next_attempt_at <= now()``
    order: str  # the column due rows are taken in the order of
    on_claim: str = ""  # assignments besides the lease; may use named parameters
    held: str = ""  # true of a row while the claim of the given parameters still holds it (renew)

    async def claim(self, conn: Connection, *, limit: int, lease_seconds: float,
                    returning: tuple[str, ...], **params: Any) -> list[dict[str, Any]]:
        """Claim up to ``limit`` due rows for ``lease_seconds`` in ``conn``'s transaction (the
        caller keeps it short); the claimed rows' ``returning`` columns (as they are after the
        claim), in queue order."""
        assignments = _LEASE
        if self.on_claim:
            assignments += ", " + self.on_claim
        query = sql.SQL(
            "UPDATE {table} AS claimed SET {assignments} "
            "FROM (SELECT tenant_id, id, {order} AS queue_order FROM {table} WHERE {due} AND next_attempt_at <= now() "
            "ORDER BY {order} LIMIT %(limit)s FOR UPDATE SKIP LOCKED) AS due "
            "WHERE claimed.tenant_id = due.tenant_id AND claimed.id = due.id "
            "RETURNING {returning}, due.queue_order"
        ).format(table=sql.Identifier(self.table), assignments=sql.SQL(assignments), due=sql.SQL(self.due),
                 order=sql.Identifier(self.order),
                 returning=sql.SQL(", ").join(sql.Identifier("claimed", column) for column in returning))
        cur = await conn.execute(query, {**params, "lease": lease_seconds, "limit": limit})
        rows = sorted(await cur.fetchall(), key=lambda row: row["queue_order"])
        return [{column: row[column] for column in returning} for row in rows]

    async def renew(self, conn: Connection, rows: list[dict[str, Any]], *, lease_seconds: float,
                    **params: Any) -> None:
        """Lease ``rows`` (as ``claim`` returned them, with ``tenant_id`` and ``id``) for
        ``lease_seconds`` from now, those still ``held`` by the claim of ``params`` only: a row
        settled or taken over meanwhile is left as it is."""
        if not self.held:
            raise ValueError(f"the {self.table} queue does not say who holds a row: it cannot renew")
        query = sql.SQL("UPDATE {table} SET {lease} WHERE tenant_id = ANY(%(tenants)s) AND id = ANY(%(ids)s) AND {held}"
                        ).format(table=sql.Identifier(self.table), lease=sql.SQL(_LEASE), held=sql.SQL(self.held))
        await conn.execute(query, {**params, "lease": lease_seconds, "tenants": [r["tenant_id"] for r in rows],
                                   "ids": [r["id"] for r in rows]})

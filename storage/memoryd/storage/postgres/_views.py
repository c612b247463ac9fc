"""Stored views: one versioned history of views per (tenant, agent).

Views are kept as rows of ``agent_views``, one per change; the newest row is the current
view, or the agent's lack of one when it records a deletion. Putting a view equal to the
current one changes nothing, so applying the same declaration twice is a no-op. Every change
is appended to the tenant's audit chain in the same transaction.
"""

from __future__ import annotations


from psycopg.types.json import Jsonb

from memoryd.domain import AuditTag, FailedPrecondition, View, ViewChange

from . import _audit as audit
from ._postgres import Postgres, TenantConn


class PostgresViewStore:
    def __init__(self, db: Postgres) -> None:
        self._db = db

    async def get(self, tenant: str, agent: str) -> View | None:
        async with self._db.tenant_tx(tenant) as conn:
            return await _current(conn, agent)

    async def put(self, tenant: str, admin: str, view: View, *, expected_version: int = 0,
                  tag: AuditTag = AuditTag()) -> ViewChange:
        async with self._db.tenant_tx(tenant) as conn:
            await _lock(conn, view.agent)
            latest = await _latest_version(conn, view.agent)
            current = await _current(conn, view.agent)
            if expected_version and expected_version != (current.version if current else 0):
                raise FailedPrecondition(
                    f"the view of agent '{view.agent}' is at version {current.version if current else 0}, "
                    f"not {expected_version}: read it again and retry", reason="VIEW_VERSION_CONFLICT")
            definition = view.definition()
            if current is not None and current.definition() == definition:
                return ViewChange(current, False, current)
            version = latest + 1
            await conn.execute(
                "INSERT INTO agent_views (tenant_id, agent, version, definition, changed_by, request_id) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (tenant, view.agent, version, Jsonb(definition), admin, tag.request_id))
            await audit.append(conn, admin, "", "view.put", [], tag,
                               {"agent": view.agent, "version": version, "definition": definition})
            return ViewChange(View.from_definition(view.agent, definition, version), True, current)

    async def put_first(self, tenant: str, admin: str, view: View) -> bool:
        """Store ``view`` only if the agent has never had one in the tenant. A deleted view
        counts: its deletion is a row too, and an admin's "no view" must stay so."""
        async with self._db.tenant_tx(tenant) as conn:
            await _lock(conn, view.agent)
            if await _latest_version(conn, view.agent):
                return False
            definition = view.definition()
            await conn.execute(
                "INSERT INTO agent_views (tenant_id, agent, version, definition, changed_by) VALUES (%s, %s, 1, %s, %s)",
                (tenant, view.agent, Jsonb(definition), admin))
            await audit.append(conn, admin, "", "view.put", [], AuditTag(),
                               {"agent": view.agent, "version": 1, "definition": definition})
            return True

    async def delete(self, tenant: str, admin: str, agent: str, *, tag: AuditTag = AuditTag()) -> bool:
        async with self._db.tenant_tx(tenant) as conn:
            await _lock(conn, agent)
            current = await _current(conn, agent)
            if current is None:
                return False
            version = await _latest_version(conn, agent) + 1
            await conn.execute(
                "INSERT INTO agent_views (tenant_id, agent, version, definition, changed_by, request_id) "
                "VALUES (%s, %s, %s, NULL, %s, %s)", (tenant, agent, version, admin, tag.request_id))
            await audit.append(conn, admin, "", "view.delete", [], tag,
                               {"agent": agent, "version": version})
            return True

    async def list(self, tenant: str, after_agent: str, limit: int) -> tuple[list[View], bool]:
        """Current views ordered by agent, starting after ``after_agent``; and whether more follow."""
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                "SELECT agent, version, definition FROM ("
                " SELECT DISTINCT ON (agent) agent, version, definition FROM agent_views"
                " WHERE tenant_id = %s AND agent > %s ORDER BY agent, version DESC"
                ") latest WHERE definition IS NOT NULL ORDER BY agent LIMIT %s",
                (tenant, after_agent, limit + 1))
            rows = await cur.fetchall()
        views = [View.from_definition(r["agent"], r["definition"], r["version"]) for r in rows[:limit]]
        return views, len(rows) > limit


async def _lock(conn: TenantConn, agent: str) -> None:
    """Serialises changes of one agent's view, so versions never collide."""
    tenant = conn.tenant
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 2))", ("memoryd-view\x1f" + tenant + "\x1f" + agent,))


async def _latest_version(conn: TenantConn, agent: str) -> int:
    tenant = conn.tenant
    cur = await conn.execute("SELECT COALESCE(max(version), 0) AS v FROM agent_views WHERE tenant_id = %s AND agent = %s",
                             (tenant, agent))
    row = await cur.fetchone()
    return int(row["v"]) if row else 0


async def _current(conn: TenantConn, agent: str) -> View | None:
    tenant = conn.tenant
    cur = await conn.execute(
        "SELECT version, definition FROM agent_views WHERE tenant_id = %s AND agent = %s ORDER BY version DESC LIMIT 1",
        (tenant, agent))
    row = await cur.fetchone()
    if row is None or row["definition"] is None:
        return None
    return View.from_definition(agent, row["definition"], int(row["version"]))

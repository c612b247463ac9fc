"""ResolveConflict: settle the pending values of one keyed memory by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg import sql

from memoryd.domain import AuditTag, Memory, NotFound, ReadFilter, Resolution

from ..postgres import audit
from ..postgres import counters
from . import _trust as trust
from .._filters import LIVE_NOW, read_conditions
from ._rows import MEMORY_COLUMNS, memory_from_row

if TYPE_CHECKING:
    from ._session import StoreSession


async def _current(conn: Any, tenant: str, flt: ReadFilter, memory_id: str) -> dict[str, Any] | None:
    where, params = read_conditions(tenant, flt)
    cur = await conn.execute(
        sql.SQL("SELECT {cols} FROM memories WHERE {where} AND id = %s AND {live} AND key_label <> '\\x' "
                "FOR UPDATE").format(cols=sql.SQL(MEMORY_COLUMNS), where=where, live=sql.SQL(LIVE_NOW)),
        [*params, memory_id],
    )
    return await cur.fetchone()  # type: ignore[no-any-return]


async def resolve(conn: Any, session: StoreSession, subject: str, flt: ReadFilter, memory_id: str,
                  resolution: Resolution, pending_id: str, tag: AuditTag) -> Memory:
    """Keep the current value (dropping the pending value ``pending_id``, or all of them) or
    accept ``pending_id`` as the new current value, with its own provenance and trust.

    The memory must be a live keyed memory the filter reads (else NotFound, as for an id
    that does not exist). Whether the caller may change it is decided before, by its guard.
    """
    tenant, agent, keys = session.tenant, session.agent, session.keys
    row = await _current(conn, tenant, flt, memory_id)
    if row is None:
        raise NotFound("no such keyed memory for this subject")
    opened = (await keys.open_rows(conn, tenant, [row]))[0]
    owner = row["subject"]
    details: dict[str, Any] = {"resolution": resolution.value}
    if resolution is Resolution.KEEP_CURRENT:
        dropped = await trust.discard(conn, tenant, [memory_id], pending_id)
        if not dropped:
            raise NotFound("this memory has no such pending value" if pending_id else "this memory has no pending values")
        details["discarded"] = dropped
    else:
        held = await trust.take(conn, keys, tenant, memory_from_row(opened), pending_id)
        if held is None:
            raise NotFound("this memory has no such pending value")
        writer = session.item_writer(conn, subject, agent=held.agent)
        result = await writer.accept(row, held.draft, owner, held.trust)
        details.update(accepted=held.id, version=result.version)
    await counters.bump(conn, tenant, {counters.CONFLICTS_RESOLVED: 1})
    await audit.append(conn, tenant, agent, subject, "resolve_conflict", [memory_id], tag, details)
    cur = await conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s AND id = %s",
                             (tenant, memory_id))
    after = await cur.fetchone()
    assert after is not None
    memory = memory_from_row((await keys.open_rows(conn, tenant, [after]))[0])
    return (await trust.with_pending(conn, keys, tenant, [memory]))[0]

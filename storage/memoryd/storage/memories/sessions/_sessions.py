"""Sessions in Postgres (migration 0030): which memories a subject's session holds, its end, the
snapshot a reader's filter reads of it, and the idle sweep's claims.

A Write with a session_id opens the session (or reopens an ended one) and links what it wrote
(``join_session``, in the write's transaction); ending it (``SessionSnapshots.close_session``,
in the transaction that writes its summary) records when, sets the snapshot's expiry on the
summary and caps the session-scoped members' own. A snapshot is read through the reader's
filter only (``SessionSnapshots.session_snapshot``): which session is "the latest", and which
members it lists, depend on the memories that filter reads and nothing else.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from psycopg import sql

from memoryd.domain import (
    SESSION_SUMMARY_KEY,
    Category,
    IdleSession,
    Memory,
    ReadFilter,
    Scope,
    SessionSnapshot,
    SourceKind,
)

from ...postgres import Postgres
from ..._filters import read_conditions
from .._reads import Reading

# The reader's live members of a session and the session they make "the latest": among the
# ended, unexpired sessions (or the one asked for), the one whose newest member the filter
# reads is the newest, ties by session id. One statement; the members come back newest first.
_MEMBERS = """
WITH candidates AS (
    SELECT l.session_id, l.memory_id FROM session_memories l
    JOIN sessions s ON s.tenant_id = l.tenant_id AND s.subject = l.subject AND s.session_id = l.session_id
    WHERE l.tenant_id = %s AND l.subject = %s AND {ended} {one_l}
), readable AS (
    SELECT id, updated_at, source_kind FROM memories WHERE {where}
    AND id IN (SELECT memory_id FROM candidates)
), chosen AS (
    SELECT c.session_id, max(r.updated_at) AS newest FROM readable r JOIN candidates c ON c.memory_id = r.id
    GROUP BY c.session_id ORDER BY newest DESC, c.session_id DESC LIMIT 1
)
SELECT c.session_id, r.id::text AS id, r.source_kind FROM chosen
JOIN candidates c ON c.session_id = chosen.session_id JOIN readable r ON r.id = c.memory_id
ORDER BY r.updated_at DESC, r.id DESC
"""


async def join_session(conn: Any, agent: str, subject: str, session_id: str, memory_ids: list[str], *,
                       reopen: bool = True) -> None:
    """Open ``subject``'s session ``session_id``, note ``agent`` as its last writer, and link
    ``memory_ids`` to it, in the caller's transaction (a Write's, or an extraction job's). A
    Write in an ended session reopens it; a job (``reopen=False``) that finishes after its
    session ended only adds what it wrote to the snapshot."""
    tenant = conn.tenant
    update = ("agent = EXCLUDED.agent, last_active_at = now(), ended_at = NULL, expires_at = NULL, "
              "claimed_until = NULL" if reopen else
              "agent = CASE WHEN sessions.ended_at IS NULL THEN EXCLUDED.agent ELSE sessions.agent END, "
              "last_active_at = CASE WHEN sessions.ended_at IS NULL THEN now() ELSE sessions.last_active_at END")
    await conn.execute(
        "INSERT INTO sessions (tenant_id, subject, session_id, agent) VALUES (%s, %s, %s, %s) "
        f"ON CONFLICT (tenant_id, subject, session_id) DO UPDATE SET {update}",
        (tenant, subject, session_id, agent))
    await _link(conn, subject, session_id, memory_ids)


async def _link(conn: Any, subject: str, session_id: str, memory_ids: list[str]) -> None:
    if memory_ids:
        await conn.execute(
            "INSERT INTO session_memories (tenant_id, subject, session_id, memory_id) "
            "SELECT %s, %s, %s, unnest(%s::uuid[]) ON CONFLICT DO NOTHING",
            (conn.tenant, subject, session_id, sorted(set(memory_ids))))


async def drop_subject_sessions(conn: Any, subject: str) -> int:
    """Delete every session of ``subject`` (their links go with them): a subject's purge."""
    cur = await conn.execute("DELETE FROM sessions WHERE tenant_id = %s AND subject = %s RETURNING 1",
                             (conn.tenant, subject))
    return len(await cur.fetchall())


async def open_session_tenants(queue: Postgres) -> list[str]:
    """The tenants with an open session or an expired snapshot: what the idle sweep visits
    (through the worker role: tenant ids only)."""
    async with queue.worker_tx() as conn:
        cur = await conn.execute("SELECT DISTINCT tenant_id FROM sessions WHERE ended_at IS NULL OR expires_at < now() "
                                 "ORDER BY tenant_id")
        return [r["tenant_id"] for r in await cur.fetchall()]


def _is_summary(m: Memory, session_id: str) -> bool:
    return (m.category is Category.CONTEXT and m.key == SESSION_SUMMARY_KEY and m.scope is Scope.SESSION
            and m.session_id == session_id)


class SessionSnapshots(Reading):
    """The session's part that reads snapshots, ends sessions and claims idle ones."""

    async def session_snapshot(self, flt: ReadFilter, session_id: str, now: datetime, *, ended: bool = True,
                               cap: int = 100) -> SessionSnapshot | None:
        """The snapshot ``flt`` reads of ``flt.subject``'s session ``session_id`` (or, with
        none named, of the latest ended, unexpired one it reads a live member of): None if it
        reads no such member. ``ended=False``: the named session whether it ended or not (what
        EndSession summarises). Each list holds at most ``cap`` memories."""
        tenant, subject = self.tenant, flt.subject
        async with self.transaction(pipelined=True) as conn:
            flt = await self.label(conn, flt)
            where, params = read_conditions(self, flt, live_at=now)
            one_l, asked = (sql.SQL("AND l.session_id = %s"), [session_id]) if session_id else (sql.SQL(""), [])
            ended_at = (sql.SQL("s.ended_at IS NOT NULL AND s.expires_at > %s"), [now]) if ended else (sql.SQL("true"), [])
            query = sql.SQL(_MEMBERS).format(where=where, one_l=one_l, ended=ended_at[0])
            cur = await conn.execute(query, [tenant, subject, *ended_at[1], *asked, *params])
            rows = await cur.fetchall()
            if not rows:
                return None
            chosen = rows[0]["session_id"]
            # The summary is an inference: its kind's list may hold one more.
            room = {SourceKind.INPUT.value: cap, SourceKind.INFERENCE.value: cap + 1}
            ids = []
            for row in rows:
                if room.get(row["source_kind"], 0) > 0:
                    room[row["source_kind"]] -= 1
                    ids.append(row["id"])
            found = {m.id: m for m in await self._read_active(conn, flt, now, sql.SQL("id = ANY(%s::uuid[])"), ids)}
        members = [found[i] for i in ids if i in found]
        summary = next((m for m in members if _is_summary(m, chosen)), None)
        rest = [m for m in members if m is not summary]
        return SessionSnapshot(chosen, summary,
                               tuple(m for m in rest if m.source_kind is SourceKind.INPUT)[:cap],
                               tuple(m for m in rest if m.source_kind is SourceKind.INFERENCE)[:cap])

    async def close_session(self, conn: Any, subject: str, session_id: str, expires_at: datetime, summary_id: str,
                            idle_since: datetime | None) -> bool:
        """End the session in the caller's transaction (which wrote its summary ``summary_id``,
        '' for none): the snapshot expires at ``expires_at``, and so do its session-scoped
        members unless they end sooner (pinned ones never do). ``idle_since``: the idle
        sweep's claim — only if no write came since (else False, nothing changed)."""
        tenant = self.tenant
        if idle_since is None:
            cur = await conn.execute(
                "INSERT INTO sessions (tenant_id, subject, session_id, agent, ended_at, expires_at) "
                "VALUES (%s, %s, %s, %s, now(), %s) ON CONFLICT (tenant_id, subject, session_id) DO UPDATE "
                "SET ended_at = now(), expires_at = EXCLUDED.expires_at, claimed_until = NULL RETURNING 1",
                (tenant, subject, session_id, self.agent, expires_at))
        else:
            cur = await conn.execute(
                "UPDATE sessions SET ended_at = now(), expires_at = %s, claimed_until = NULL WHERE tenant_id = %s "
                "AND subject = %s AND session_id = %s AND ended_at IS NULL AND last_active_at = %s RETURNING 1",
                (expires_at, tenant, subject, session_id, idle_since))
        if await cur.fetchone() is None:
            return False
        if summary_id:
            await _link(conn, subject, session_id, [summary_id])
            # The summary's version was recorded by this transaction, before its expiry was
            # known: record the expiry there too, so what Watch and GetHistory show of that
            # version is what a read shows.
            await conn.execute(
                "UPDATE memory_versions SET expires_at = %s WHERE tenant_id = %s AND memory_id = %s::uuid "
                "AND version = (SELECT version FROM memories WHERE tenant_id = %s AND id = %s::uuid)",
                (expires_at, tenant, summary_id, tenant, summary_id))
        await conn.execute(
            "UPDATE memories SET expires_at = CASE WHEN id = %s::uuid THEN %s ELSE LEAST(COALESCE(expires_at, %s), %s) END "
            "WHERE tenant_id = %s AND status = 'active' AND scope = 'session' AND NOT pinned AND id IN "
            "(SELECT memory_id FROM session_memories WHERE tenant_id = %s AND subject = %s AND session_id = %s)",
            (summary_id or None, expires_at, expires_at, expires_at, tenant, tenant, subject, session_id))
        return True

    async def drop_expired_sessions(self, now: datetime) -> int:
        """Forget the sessions whose snapshot expired before ``now`` (no resume can return them):
        their rows and links go, the memories stay with their own lifetimes. How many."""
        async with self.transaction() as conn:
            cur = await conn.execute("DELETE FROM sessions WHERE tenant_id = %s AND ended_at IS NOT NULL "
                                     "AND expires_at < %s RETURNING 1", (self.tenant, now))
            return len(await cur.fetchall())

    async def claim_idle_sessions(self, idle_seconds: float, now: datetime, *, lease_seconds: float = 300.0,
                                  limit: int = 100) -> list[IdleSession]:
        """Claim (for ``lease_seconds``) up to ``limit`` open sessions nobody wrote in for
        ``idle_seconds`` as of ``now``; a session another sweep holds is skipped, so several
        workers share the work."""
        tenant = self.tenant
        async with self.transaction() as conn:
            # The claim is a MATERIALIZED CTE: a subquery in FROM may be rescanned for each row
            # the UPDATE joins (a nested loop on small tables), and each rescan locks the next
            # rows it does not skip — one sweep then took more than `limit` and another none
            # (seen once in CI under load).
            cur = await conn.execute(
                "WITH c AS MATERIALIZED (SELECT subject, session_id FROM sessions WHERE tenant_id = %s "
                "AND ended_at IS NULL AND last_active_at < %s AND (claimed_until IS NULL OR claimed_until < now()) "
                "ORDER BY last_active_at LIMIT %s FOR UPDATE SKIP LOCKED) "
                "UPDATE sessions s SET claimed_until = now() + make_interval(secs => %s) FROM c "
                "WHERE s.tenant_id = %s AND s.subject = c.subject AND s.session_id = c.session_id "
                "RETURNING s.subject, s.session_id, s.agent, s.last_active_at",
                (tenant, now - timedelta(seconds=idle_seconds), limit, lease_seconds, tenant))
            rows = await cur.fetchall()
        return [IdleSession(r["subject"], r["session_id"], r["agent"], r["last_active_at"]) for r in rows]


__all__ = ["SessionSnapshots", "drop_subject_sessions", "join_session", "open_session_tenants"]

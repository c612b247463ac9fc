"""Fingerprints of deployment-wide secrets, recorded by the first process that starts and
compared by every later one (see migration 0010 for why)."""

from __future__ import annotations

import psycopg

from memoryd.domain import FailedPrecondition

from ._postgres import translate


async def require_fingerprint(owner_dsn: str, name: str, fingerprint: bytes, *, fix: str) -> None:
    """Record ``fingerprint`` for ``name`` if none is; otherwise refuse (FailedPrecondition,
    with ``fix`` as the way out) unless it is the recorded one."""
    try:
        async with await psycopg.AsyncConnection.connect(owner_dsn, autocommit=True, connect_timeout=10) as conn:
            await conn.execute(
                "INSERT INTO secret_fingerprints (name, fingerprint) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                (name, fingerprint))
            cur = await conn.execute("SELECT fingerprint FROM secret_fingerprints WHERE name = %s", (name,))
            row = await cur.fetchone()
    except psycopg.Error as exc:
        raise translate(exc) from exc
    if row is None or bytes(row[0]) != fingerprint:
        raise FailedPrecondition(f"this process's {name} secret is not the one this database was written with: {fix}")

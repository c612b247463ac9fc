"""Versioned schema migrations, applied in order, once, by the owner role.

Migrations are the files ``migrations/NNNN_name.sql`` shipped with this package. Each runs in
its own transaction together with its row in ``schema_migrations``; an advisory lock keeps two
starting servers from applying the same migration twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg

from memoryd.domain import Unavailable

_LOCK_ID = 0x6D656D6F7279  # "memory": serialises concurrent migrators
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available() -> list[Migration]:
    """The migrations shipped with this version, oldest first."""
    found = []
    for entry in resources.files("memoryd.storage").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text()))
    found.sort(key=lambda m: m.version)
    return found


async def migrate(dsn: str) -> list[Migration]:
    """Apply every migration not yet applied; return those applied now."""
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise Unavailable("cannot connect to Postgres to migrate") from exc
    applied_now: list[Migration] = []
    async with conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur = await conn.execute("SELECT version FROM schema_migrations")
            done = {row[0] for row in await cur.fetchall()}
            for migration in available():
                if migration.version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(migration.sql.encode())
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (migration.version, migration.name),
                    )
                applied_now.append(migration)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
    return applied_now


async def register_index_model(dsn: str, model_id: str, collection: str, dim: int, *,
                               activate_if_first: bool = True) -> str:
    """Record the embedding model's collection; unless told otherwise, the first one
    registered becomes active (a model being built by ``memoryd reindex`` is not).

    Returns the active model id ('' if none). Run with the owner's connection.
    """
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        async with conn.transaction():
            await conn.execute("LOCK TABLE index_models IN SHARE ROW EXCLUSIVE MODE")
            await conn.execute(
                "INSERT INTO index_models (model_id, collection, dim) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (model_id, collection, dim),
            )
            cur = await conn.execute("SELECT model_id FROM index_models WHERE active")
            row = await cur.fetchone()
            if row is not None:
                return str(row[0])
            if not activate_if_first:
                return ""
            await conn.execute(
                "UPDATE index_models SET active = true, activated_at = now() WHERE model_id = %s", (model_id,)
            )
            return model_id

"""Versioned schema migrations, applied in order, once, by the owner role.

Migrations are the files ``migrations/NNNN_name.sql`` shipped with this package. Each runs in
its own transaction together with its row in ``schema_migrations``; an advisory lock keeps two
starting servers from applying the same migration twice.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources

import psycopg

from memoryd.domain import FailedPrecondition, Unavailable

from ._postgres import connect_failure

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


LOGIN_ROLES = ("memoryd_app", "memoryd_worker")


def scram_verifier(password: str, iterations: int = 4096) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for ``password`` (RFC 5802/7677), made
    here so the password itself never reaches the server or its statement log."""
    if not password:
        raise ValueError("a login password must not be empty")
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", unicodedata.normalize("NFKC", password).encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    b64 = base64.b64encode
    return (f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}"
            f"${b64(hashlib.sha256(client_key).digest()).decode()}:{b64(server_key).decode()}")


async def set_login_passwords(dsn: str, passwords: dict[str, str]) -> None:
    """Give memoryd_app / memoryd_worker their login passwords, as the owner that created them
    (a CREATEROLE owner may; no membership in the roles is needed)."""
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        for role, password in passwords.items():
            if role not in LOGIN_ROLES:
                raise ValueError(f"unknown role {role}")
            await conn.execute(sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(scram_verifier(password))))


async def require_current_schema(dsn: str) -> None:
    """Refuse to run on a database whose schema is older than this version's migrations (a
    process without the owner's login cannot apply them)."""
    latest = available()[-1]
    try:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            cur = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
            row = await cur.fetchone()
    except (psycopg.errors.UndefinedTable, psycopg.errors.InsufficientPrivilege) as exc:
        raise FailedPrecondition("the database has no memoryd schema readable by this login: run "
                                 "'memoryd migrate' with the owner's MEMORYD_POSTGRES_DSN first") from exc
    except psycopg.OperationalError as exc:
        raise connect_failure(exc, "memoryd_app", "MEMORYD_POSTGRES_APP_DSN") from exc
    version = int(row[0]) if row else 0
    if version < latest.version:
        raise FailedPrecondition(f"the database schema is at version {version}, this memoryd needs {latest.version}: "
                                 "run 'memoryd migrate' with the owner's MEMORYD_POSTGRES_DSN")


async def register_index_model(dsn: str, model_id: str, collection: str, dim: int, *,
                               activate_if_first: bool = True) -> str:
    """Record the embedding model's collection; unless told otherwise, the first one
    registered becomes active (a model being built by ``memoryd reindex`` is not).

    Returns the active model id ('' if none). Run with the owner's or memoryd_app's login.
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

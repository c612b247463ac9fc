"""Postgres connection handling: the app-role pool, tenant transactions, error translation."""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

import psycopg
from psycopg.abc import Params, QueryNoTemplate
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from memoryd.domain import FailedPrecondition, Internal, MemorydError, Unavailable

# Every pooled connection returns rows as dicts (``dict_row`` below): its type says so.
Connection: TypeAlias = psycopg.AsyncConnection[DictRow]

APP_ROLE = "memoryd_app"
WORKER_ROLE = "memoryd_worker"

_log = logging.getLogger("memoryd.storage.postgres")

# Errors after which a retry may succeed: the caller gets UNAVAILABLE, nothing was written.
_RETRYABLE = (
    psycopg.OperationalError,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.QueryCanceled,
)


@dataclass(frozen=True)
class PostgresSettings:
    """Where and how to connect.

    ``dsn`` is the owner's connection (used for migrations). ``app_dsn`` is the connection of
    the non-owner role the server runs its queries as, ``worker_dsn`` that of the outbox
    worker's role; when empty, the owner's connection is used with ``SET ROLE``.
    """

    dsn: str
    app_dsn: str = ""
    worker_dsn: str = ""
    pool_min: int = 1
    pool_max: int = 10
    timeout_seconds: float = 5.0

    @property
    def setup_dsn(self) -> str:
        """The connection for start-up bookkeeping (secret fingerprints, index models): the
        owner's when given, else memoryd_app's login (granted that much by migration 0013)."""
        return self.dsn or self.app_dsn


def translate(exc: BaseException) -> MemorydError:
    """Map a driver exception to the domain error tree."""
    if isinstance(exc, MemorydError):
        return exc
    if isinstance(exc, (PoolTimeout, *_RETRYABLE)):
        return Unavailable("the memory store is unavailable; retry later")
    return Internal(f"postgres error: {type(exc).__name__}")


def connect_failure(exc: psycopg.OperationalError, role: str, setting: str) -> MemorydError:
    """Why a login failed, in one line without secrets: a refused login is a setting to fix
    (FailedPrecondition), anything else a server that may come back (Unavailable)."""
    text = str(exc).strip()
    reason = text.splitlines()[-1].removeprefix("FATAL:").strip() if text else type(exc).__name__
    if any(s in reason for s in ("authentication failed", "does not exist", "not permitted", "no password")):
        return FailedPrecondition(f"Postgres refused the {role} login ({setting}): {reason}")
    return Unavailable(f"cannot connect to Postgres as {role}: {reason}")


# A connection handed back less than this long ago is handed out again without a check: the
# check is a round trip of its own, a quarter of a short read's (BEGIN, set_config, SELECT,
# COMMIT). One idle longer is checked first, so connections broken by a Postgres restart or an
# idle timeout are replaced before use; a break inside the window fails that one call with
# Unavailable, which clients retry.
CHECK_AFTER_IDLE_SECONDS = 2.0
_returned_at: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()


async def _mark_used(conn: Connection) -> None:
    _returned_at[conn] = time.monotonic()


async def _check_if_idle(conn: Connection) -> None:
    if time.monotonic() - _returned_at.get(conn, float("-inf")) >= CHECK_AFTER_IDLE_SECONDS:
        await AsyncConnectionPool.check_connection(conn)


# psycopg_pool retries a lost connection after 1, 2, 4, 8, 16, ... s (doubling until
# reconnect_timeout): a replica whose PostgreSQL came back after a 20 s restart waited for the
# attempt due at 31 s — 9-12 s of UNAVAILABLE answers after the server accepted connections
# again (bench/probes/postgres_restart_probe.py, bench/RESULTS.md). Capped, the pool tries every
# second: an attempt against a server that is down is one refused connection (or one
# connect_timeout where packets are dropped), for each of at most pool_max connections.
RECONNECT_MAX_DELAY_SECONDS = 1.0
# Each failed attempt is a warning of psycopg_pool's; at one a second per lost connection that
# is kept to one line per pool every this many seconds.
RECONNECT_LOG_SECONDS = 10.0


class _ReconnectAttempt(AttemptWithBackoff):
    """psycopg_pool's backoff, at most ``RECONNECT_MAX_DELAY_SECONDS`` between attempts."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_MAX_DELAY_SECONDS)


class _Pool(AsyncConnectionPool[Connection]):
    """The pool, reconnecting with ``_ReconnectAttempt``. psycopg_pool has no setting for its
    backoff: its own ``_add_connection`` makes the first attempt of each lost connection and
    hands the same object to every retry (psycopg-pool is pinned; tests/storage/
    test_postgres_reconnect.py fails if a release changes this)."""

    async def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        await super()._add_connection(attempt or _ReconnectAttempt(timeout=self.reconnect_timeout), growing)


class _QuietReconnects(logging.Filter):
    """Lets through one "error connecting" line per pool every ``RECONNECT_LOG_SECONDS``."""

    def __init__(self) -> None:
        super().__init__()
        self._said: dict[object, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith("error connecting in")) \
                or not isinstance(record.args, tuple):
            return True
        pool, now = record.args[0], time.monotonic()
        if now - self._said.get(pool, float("-inf")) < RECONNECT_LOG_SECONDS:
            return False
        self._said[pool] = now
        return True


logging.getLogger("psycopg.pool").addFilter(_QuietReconnects())


@dataclass(frozen=True, slots=True)
class TenantConn:
    """The connection of one tenant's transaction, bound to that tenant: made once by
    ``Postgres.tenant_tx``, so what works inside the transaction is given the tenant with the
    connection instead of as a loose string. It answers ``execute`` and ``cursor`` like the
    connection."""

    conn: Connection
    tenant: str

    async def execute(self, query: QueryNoTemplate, params: Params | None = None, *, prepare: bool | None = None,
                      binary: bool = False) -> psycopg.AsyncCursor[DictRow]:
        return await self.conn.execute(query, params, prepare=prepare, binary=binary)

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return self.conn.cursor(*args, **kwargs)


def _login(settings: PostgresSettings, role: str) -> str:
    """The role's own login, or '' when it connects through the owner's login and ``SET ROLE``."""
    return settings.app_dsn if role == APP_ROLE else settings.worker_dsn


@asynccontextmanager
async def role_connection(settings: PostgresSettings, role: str = APP_ROLE) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """One autocommit connection as ``role``, made the way the pool makes its connections: the
    role's own login, or the owner's with ``SET ROLE``."""
    login = _login(settings, role)
    async with await psycopg.AsyncConnection.connect(login or settings.dsn, autocommit=True,
                                                     connect_timeout=5) as conn:
        if not login:
            await conn.execute(f"SET ROLE {role}")
        yield conn


class Postgres:
    """A pool of connections as the app role, handing out tenant-scoped transactions."""

    def __init__(self, settings: PostgresSettings, role: str = APP_ROLE) -> None:
        if role not in (APP_ROLE, WORKER_ROLE):
            raise ValueError(f"unknown role {role}")
        self._settings = settings
        self.role = role
        login = _login(settings, role)
        conninfo = login or settings.dsn

        async def configure(conn: Connection) -> None:
            if not login:
                await conn.execute(f"SET ROLE {role}")

        self._pool = _Pool(
            conninfo,
            connection_class=Connection,
            min_size=settings.pool_min,
            max_size=settings.pool_max,
            timeout=settings.timeout_seconds,
            open=False,
            kwargs={"autocommit": True, "row_factory": dict_row, "connect_timeout": 5},
            configure=configure,
            check=_check_if_idle,
            reset=_mark_used,
            name=f"memoryd-{role}",
        )

    async def open(self) -> None:
        """Open the pool and check that the app role cannot bypass row level security."""
        await self._probe()
        try:
            await self._pool.open(wait=True, timeout=self._settings.timeout_seconds)
        except (PoolTimeout, psycopg.Error) as exc:
            raise Unavailable(f"cannot connect to Postgres as {self.role}") from exc
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT current_user AS role, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
            )
            row = await cur.fetchone()
        if row is None or row["rolsuper"] or row["rolbypassrls"]:
            await self._pool.close()
            raise Internal("the app role must be a non-superuser role without BYPASSRLS")

    async def _probe(self) -> None:
        """One connection made the way the pool makes them, so a wrong setting fails with its
        reason (the pool would only time out): a refused login, or an owner that may not
        ``SET ROLE`` (on PostgreSQL 15 a CREATEROLE owner is no member of the roles it
        creates; on 16+ it holds them WITH ADMIN but without SET)."""
        login = _login(self._settings, self.role)
        setting = "MEMORYD_POSTGRES_APP_DSN" if self.role == APP_ROLE else "MEMORYD_POSTGRES_WORKER_DSN"
        try:
            async with role_connection(self._settings, self.role):
                pass
        except pg_errors.InsufficientPrivilege as exc:
            raise FailedPrecondition(
                f"the owner's login may not SET ROLE {self.role}: give {self.role} a login of its own in {setting} "
                '(docs/scaling.md, "Database roles")') from exc
        except psycopg.OperationalError as exc:
            raise connect_failure(exc, self.role, setting if login else "MEMORYD_POSTGRES_DSN") from exc

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def tenant_tx(self, tenant: str, *, pipelined: bool = False) -> AsyncIterator[TenantConn]:
        """A transaction in which row level security shows only ``tenant``'s rows.

        Any driver error becomes a domain error; the transaction is rolled back, so a failed
        call writes nothing.

        ``pipelined``: the transaction runs in psycopg's pipeline mode — statements are sent
        without waiting for their answers until one is fetched, so BEGIN and the tenant go
        with the first query and COMMIT with the last. For callers that fetch every answer
        they use (a cursor's ``rowcount`` is only known once the pipeline has synced).
        """
        if not tenant:
            raise Internal("tenant_tx needs a tenant")
        async with self._transaction(tenant, pipelined) as conn:
            yield TenantConn(conn, tenant)

    @asynccontextmanager
    async def worker_tx(self) -> AsyncIterator[Connection]:
        """A transaction across tenants, for the outbox worker's role only."""
        if self.role != WORKER_ROLE:
            raise Internal("only the worker role works across tenants")
        async with self._transaction(None) as conn:
            yield conn

    @asynccontextmanager
    async def catalog_tx(self) -> AsyncIterator[Connection]:
        """A transaction without a tenant, for catalog tables that hold no tenant data
        (index_models). Row level security still hides every tenant row in it."""
        async with self._transaction(None) as conn:
            yield conn

    @asynccontextmanager
    async def _transaction(self, tenant: str | None,
                           pipelined: bool = False) -> AsyncIterator[Connection]:
        try:
            async with self._pool.connection() as conn, \
                    (_pipelined_transaction(conn) if pipelined else conn.transaction()):
                if tenant is not None:
                    await conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                yield conn
        except MemorydError:
            raise
        except (PoolTimeout, psycopg.Error) as exc:
            err = translate(exc)
            if isinstance(err, Internal):
                _log.error("postgres error in tenant transaction", exc_info=exc)
            raise err from exc

    def pool_stats(self) -> PoolStats:
        """How the pool's connections are used now (read by the metrics reader's thread: plain
        reads of the pool's counters, no lock and no query)."""
        for _ in range(3):
            try:
                stats = self._pool.get_stats()
                break
            except RuntimeError:  # its counter dict changed size under the copy; read again
                continue
        else:
            stats = {}
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        return PoolStats(self.role, max(0, size - idle), idle, stats.get("requests_waiting", 0),
                         stats.get("pool_max", self._settings.pool_max))


@asynccontextmanager
async def _pipelined_transaction(conn: Connection) -> AsyncIterator[None]:
    """BEGIN, the body (the tenant first) and COMMIT in one pipeline. Written out rather than
    ``conn.transaction()``, which in pipeline mode syncs after BEGIN and again before COMMIT:
    two round trips that wait for nothing."""
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            yield
            await conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.pgconn.transaction_status in (pq.TransactionStatus.INTRANS,
                                                                   pq.TransactionStatus.INERROR):
            try:
                await conn.execute("ROLLBACK")
            except psycopg.Error:
                pass  # the pool discards a connection it cannot return to idle
        raise


@dataclass(frozen=True)
class PoolStats:
    """One pool's connections: in use by a transaction, idle in the pool, and the requests
    waiting for one (``pool`` is the role it connects as)."""

    pool: str
    used: int
    idle: int
    waiting: int
    max: int

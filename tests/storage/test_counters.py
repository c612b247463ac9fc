"""Per-tenant counters in one table (``pipeline_counts``, ``memoryd.storage.postgres._counters``).

Migration 0022 moved the lifecycle and conflict counters out of their own table: the counts
kept before it must be there after it, under row level security and grants that let no role
do more than before — run as a deployment runs it, by an owner that is no superuser (row
level security is forced on the table owner too). Then every kind of writer — the write
path, ResolveConflict, the lifecycle sweeper, extraction jobs, consolidation — adds to that
one table, and the readers (metrics, ``memoryd lifecycle counts``) find what they read before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from memoryd.domain import Category, Draft, Outcome, ReadFilter, Resolution, SourceKind, TenantPolicy, Turn
from memoryd.server._config import Scoring
from memoryd.storage import (
    APP_ROLE,
    WORKER_ROLE,
    Consolidations,
    ExtractionJobs,
    LifecycleSweeper,
    LocalKeyProvider,
    Postgres,
    Stores,
    PostgresSettings,
    TermHasher,
    available,
    migrate,
    tenant_metrics,
)

from ..support import database_before, fresh_database, unique

EVERYTHING = tuple((c, ("*",)) for c in Category)
AGENT = "agent-1"
ONE_TABLE = 22  # the migration that merged lifecycle_counts into pipeline_counts


def _grants(conn: psycopg.Connection[Any], table: str) -> set[tuple[str, str]]:
    """(role, privilege) granted on ``table`` to anyone but its owner (PUBLIC included)."""
    rows = conn.execute(
        "SELECT COALESCE(r.rolname, 'PUBLIC'), a.privilege_type FROM pg_class c "
        "CROSS JOIN LATERAL aclexplode(c.relacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee "
        "WHERE c.oid = %s::regclass AND a.grantee <> c.relowner", (table,)).fetchall()
    return {(role, privilege) for role, privilege in rows}


def _security(conn: psycopg.Connection[Any], table: str) -> tuple[Any, ...]:
    """Whether row level security is on and forced, and the table's policies."""
    flags = conn.execute("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass",
                         (table,)).fetchone()
    policies = conn.execute(
        "SELECT polname, polroles::regrole[]::text[], pg_get_expr(polqual, polrelid), "
        "pg_get_expr(polwithcheck, polrelid) FROM pg_policy WHERE polrelid = %s::regclass ORDER BY polname",
        (table,)).fetchall()
    return flags, policies


def _counts(conn: psycopg.Connection[Any], table: str, tenant: str) -> dict[str, int]:
    with conn.transaction():
        conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
        return dict(conn.execute(f"SELECT name, value FROM {table} WHERE tenant_id = %s", (tenant,)).fetchall())


async def test_the_migration_moves_the_lifecycle_counts_into_the_one_table(postgres: Any) -> None:
    a, b = unique("counts"), unique("counts")
    with database_before(postgres.owner_dsn, ONE_TABLE, "counts") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
                                ).fetchone() == (False, False)
            # Counters as the version before kept them (that code is gone), in both tables.
            # One name is in both for tenant b: never written so, but it must add up, not vanish.
            rows = {"lifecycle_counts": [(a, "lifecycle.expired", 3), (a, "conflicts.pending", 2),
                                         (b, "lifecycle.evicted", 7), (b, "conflicts.settled", 1)],
                    "pipeline_counts": [(a, "extraction.jobs_queued", 5), (b, "conflicts.settled", 10)]}
            for table, counted in rows.items():
                for tenant, counter, value in counted:
                    with conn.transaction():
                        conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                        conn.execute(f"INSERT INTO {table} (tenant_id, name, value) VALUES (%s, %s, %s)",
                                     (tenant, counter, value))
            pipeline_before = _grants(conn, "pipeline_counts"), _security(conn, "pipeline_counts")
            lifecycle_grants = _grants(conn, "lifecycle_counts")

        assert [m.version for m in await migrate(dsn)] == [m.version for m in available() if m.version >= ONE_TABLE]

        with psycopg.connect(dsn, autocommit=True) as conn:
            # The old table stays for servers of the version before during a rolling upgrade,
            # its row level security forced as before, its rows no longer read.
            assert _security(conn, "lifecycle_counts")[0] == (True, True)
            assert _counts(conn, "pipeline_counts", a) == {"lifecycle.expired": 3, "conflicts.pending": 2,
                                                           "extraction.jobs_queued": 5}
            assert _counts(conn, "pipeline_counts", b) == {"lifecycle.evicted": 7, "conflicts.settled": 11}
            # No role may do more than before, and the app role still does what it did on both.
            assert (_grants(conn, "pipeline_counts"), _security(conn, "pipeline_counts")) == pipeline_before
            assert lifecycle_grants <= pipeline_before[0]
            assert pipeline_before[0] == {(APP_ROLE, p) for p in ("SELECT", "INSERT", "UPDATE", "DELETE")}
            assert pipeline_before[1][0] == (True, True)
        with psycopg.connect(make_conninfo(dsn, user=APP_ROLE), autocommit=True) as app:
            assert app.execute("SELECT count(*) FROM pipeline_counts").fetchone() == (0,)  # no tenant set
            assert _counts(app, "pipeline_counts", a) == {"lifecycle.expired": 3, "conflicts.pending": 2,
                                                          "extraction.jobs_queued": 5}
            with app.transaction():  # tenant a cannot see or count into tenant b's rows
                app.execute("SELECT set_config('memoryd.tenant', %s, true)", (a,))
                assert app.execute("SELECT count(*) FROM pipeline_counts WHERE tenant_id = %s", (b,)).fetchone() == (0,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege), app.transaction():
                app.execute("SELECT set_config('memoryd.tenant', %s, true)", (a,))
                app.execute("INSERT INTO pipeline_counts (tenant_id, name, value) VALUES (%s, 'lifecycle.expired', 1)",
                            (b,))
        with psycopg.connect(make_conninfo(dsn, user=WORKER_ROLE), autocommit=True) as worker:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                worker.execute("SELECT count(*) FROM pipeline_counts")


# --- every writer, one table -----------------------------------------------------------------


@pytest.fixture(scope="module")
def database(postgres: Any) -> Iterator[str]:
    """A database of this module's own, so the suite server's workers never touch its rows."""
    with fresh_database(postgres.owner_dsn, "counters") as dsn:
        yield dsn


@pytest.fixture
async def store(database: str) -> AsyncIterator[Stores]:
    db = Postgres(PostgresSettings(database))
    await db.open()
    yield Stores(db, TermHasher(b"counters test terms secret"), LocalKeyProvider(b"\x09" * 32))
    await db.close()


async def _write(store: Stores, tenant: str, draft: Draft) -> tuple[str, Outcome]:
    [result] = await store.session(tenant, AGENT).write("alice", [draft])
    return result.memory_id, result.outcome


async def test_every_kind_of_writer_counts_into_the_one_table(store: Stores, database: str) -> None:
    tenant = unique("counts")
    city = [Draft(Category.FACT, f"lives in {town}", key="city", source_kind=source) for town, source in
            (("Lyon", SourceKind.INPUT), ("Paris", SourceKind.INFERENCE), ("Porto", SourceKind.SYNC),
             ("Rome", SourceKind.INFERENCE))]
    # Source trust: a less trusted value is held (pending); a more trusted one settles it
    # (counted by the batched write path); ResolveConflict discards another (resolved).
    fact, outcome = await _write(store, tenant, city[0])
    assert outcome is Outcome.CREATED
    assert [(await _write(store, tenant, d))[1] for d in city[1:]] == [Outcome.PENDING, Outcome.VERSIONED,
                                                                        Outcome.PENDING]
    await store.session(tenant, AGENT).resolve_conflict("alice", ReadFilter(subject="alice", rules=EVERYTHING), fact,
                                 Resolution.KEEP_CURRENT, "")
    await _write(store, tenant, Draft(Category.CONTEXT, "on call this week", key="duty"))
    # The lifecycle sweeper: the context memory's 7 days are over.
    sweeper = LifecycleSweeper(store.db, None, lambda _: TenantPolicy(), Scoring().half_life_days)
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=8), [tenant])).expired == 1
    # Extraction jobs and consolidation.
    turns = (Turn("t1", "alice", "I moved to Porto", datetime.now(UTC)),)
    await ExtractionJobs(store).enqueue(store.session(tenant, AGENT), "alice", turns)
    consolidations = Consolidations(store)
    await consolidations.count(consolidations.session(tenant), {"consolidation.skipped": 2,
                                                                 "consolidation.unavailable": 0})

    every = {"conflicts.pending": 2, "conflicts.settled": 1, "conflicts.resolved": 1, "lifecycle.expired": 1,
             "extraction.jobs_queued": 1, "consolidation.skipped": 2}
    with psycopg.connect(database, autocommit=True) as conn:
        assert _counts(conn, "pipeline_counts", tenant) == every
    # `memoryd lifecycle counts` prints the lifecycle and conflict counters, as before.
    assert await store.session(tenant).lifecycle_counts() == {k: v for k, v in every.items()
                                                    if k.startswith(("lifecycle.", "conflicts."))}
    # Metrics read every counter with the active memories, in one pipelined transaction.
    async with store.db.tenant_tx(tenant, pipelined=True) as conn:
        read = await tenant_metrics(conn)
    assert (read.active, read.counts) == (1, every)

"""Postgres enforces tenant isolation by itself: RLS is FORCEd and the app role cannot bypass it."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from memoryd.domain import Category, Draft, ReadFilter
from memoryd.storage import (
    APP_ROLE,
    WORKER_ROLE,
    LocalKeyProvider,
    Postgres,
    Stores,
    PostgresSettings,
    TermHasher,
    available,
    migrate,
)

from ..support import unique

TENANT_TABLES = ["memories", "memory_versions", "outbox", "audit_log", "erasure_log", "erasure_checks", "erasure_rechecks",
                 "idempotency_keys", "memory_terms", "index_routes", "subject_keys", "pending_values", "pipeline_counts", "revoked_tokens",
                 "keyword_stats", "memory_changes", "memory_change_horizon"]
EVERYTHING = tuple((c, ("*",)) for c in Category)


@pytest.fixture
async def store(postgres):
    db = Postgres(PostgresSettings(postgres.owner_dsn))  # owner DSN + SET ROLE memoryd_app
    await db.open()
    yield Stores(db, TermHasher(b"test terms secret"), LocalKeyProvider(b"\x07" * 32))
    await db.close()


async def _seed(store: Stores) -> str:
    tenant = unique("rls")
    await store.session(tenant, "agent-1").write("alice", [Draft(Category.FACT, "lives in Lyon", key="home_city")])
    return tenant


@pytest.mark.parametrize("dsn_kind", ["app_login", "owner_with_set_role"])
async def test_app_role_without_tenant_setting_sees_nothing(postgres, store, dsn_kind):
    await _seed(store)
    dsn = postgres.app_dsn if dsn_kind == "app_login" else postgres.owner_dsn
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        if dsn_kind == "owner_with_set_role":
            await conn.execute(f"SET ROLE {APP_ROLE}")
        for table in TENANT_TABLES:
            cur = await conn.execute(f"SELECT count(*) FROM {table}")
            assert (await cur.fetchone())[0] == 0, table
        # The owner (a superuser here) does see the row: the data is there, RLS hides it.
        async with await psycopg.AsyncConnection.connect(postgres.owner_dsn) as owner:
            cur = await owner.execute("SELECT count(*) FROM memories")
            assert (await cur.fetchone())[0] >= 1


async def test_tenant_setting_shows_only_that_tenants_rows(postgres, store):
    a, b = await _seed(store), await _seed(store)
    async with await psycopg.AsyncConnection.connect(postgres.app_dsn) as conn:
        await conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (a,))
        cur = await conn.execute("SELECT DISTINCT tenant_id FROM memories")
        assert [r[0] for r in await cur.fetchall()] == [a]
        cur = await conn.execute("SELECT count(*) FROM memories WHERE tenant_id = %s", (b,))
        assert (await cur.fetchone())[0] == 0


async def test_app_role_cannot_write_rows_of_another_tenant(postgres, store):
    a = await _seed(store)
    async with await psycopg.AsyncConnection.connect(postgres.app_dsn) as conn:
        await conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (a,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(
                "INSERT INTO audit_log (tenant_id, agent, subject, action) VALUES ('someone-else', 'x', 'y', 'z')"
            )


async def test_app_role_cannot_rewrite_the_audit_log(postgres, store):
    a = await _seed(store)
    async with await psycopg.AsyncConnection.connect(postgres.app_dsn) as conn:
        await conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (a,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute("DELETE FROM audit_log")


async def test_app_role_is_not_superuser_and_cannot_bypass_rls(postgres):
    async with await psycopg.AsyncConnection.connect(postgres.app_dsn) as conn:
        cur = await conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert await cur.fetchone() == (False, False)
        cur = await conn.execute(
            "SELECT relname FROM pg_class WHERE relname = ANY(%s) AND NOT (relrowsecurity AND relforcerowsecurity)",
            (TENANT_TABLES,),
        )
        assert await cur.fetchall() == []


async def test_store_reads_are_confined_to_the_given_tenant(store):
    a, b = await _seed(store), unique("rls")
    flt = ReadFilter(subject="alice", rules=EVERYTHING)
    assert len(await store.session(a).recall_keys(flt, ["home_city"], datetime.now(UTC))) == 1
    assert await store.session(b).recall_keys(flt, ["home_city"], datetime.now(UTC)) == []


async def test_migrations_are_recorded_and_not_applied_twice(postgres):
    assert await migrate(postgres.owner_dsn) == []
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn) as conn:
        cur = await conn.execute("SELECT version FROM schema_migrations ORDER BY version")
        assert [r[0] for r in await cur.fetchall()] == [m.version for m in available()]


async def test_a_view_without_rules_reads_nothing(store):
    a = await _seed(store)
    assert await store.session(a).recall_keys(ReadFilter(subject="alice"), ["home_city"], datetime.now(UTC)) == []


async def test_worker_role_sees_outbox_ids_of_every_tenant_but_no_memory_content(postgres, store):
    a = await _seed(store)
    # The suite's server drains this shared outbox at any moment; a row due in an hour stays
    # put, so the worker role's read below is not a race with it.
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn, autocommit=True) as owner:
        await owner.execute("INSERT INTO outbox (tenant_id, memory_id, subject, op, next_attempt_at) "
                            "VALUES (%s, gen_random_uuid(), 'alice', 'upsert', now() + interval '1 hour')", (a,))
    async with await psycopg.AsyncConnection.connect(postgres.worker_dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM outbox WHERE tenant_id = %s", (a,))
        assert (await cur.fetchone())[0] >= 1
        for table in ("memories", "memory_versions", "memory_terms", "audit_log", "subject_keys", "pending_values",
                      "pipeline_counts"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(f"SELECT count(*) FROM {table}")
        cur = await conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert await cur.fetchone() == (False, False)
        assert (await (await conn.execute("SELECT current_user")).fetchone())[0] == WORKER_ROLE
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn, autocommit=True) as owner:
        await owner.execute("DELETE FROM outbox WHERE tenant_id = %s", (a,))


@pytest.mark.parametrize("pipelined", [False, True])
async def test_a_tenant_transaction_carries_the_tenant_row_level_security_shows(store, pipelined):
    # What works inside a tenant transaction takes the tenant from it (``TenantConn``), so the
    # two must be one: in a plain and in a pipelined transaction, the tenant RLS is set to.
    tenant = await _seed(store)
    async with store.db.tenant_tx(tenant, pipelined=pipelined) as conn:
        cur = await conn.execute("SELECT current_setting('memoryd.tenant') AS tenant, "
                                 "(SELECT count(*) FROM memories) AS memories")
        row = await cur.fetchone()
    assert conn.tenant == row["tenant"] == tenant
    assert row["memories"] == 1  # its own memory only

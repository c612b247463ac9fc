"""Every source turn of a memory (migration 0026): the backfill of what was stored with one turn,
and the erase by turn over rows a server of the version before writes during a rolling upgrade
(it knows ``source_turn_id`` only)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from memoryd.domain import Category, Draft, EraseMode, EraseSelector, Page, ReadFilter
from memoryd.storage import LocalKeyProvider, Postgres, Stores, available, migrate
from memoryd.storage.keywords._keywords import TermHasher

from ..support import database_before, unique

SOURCE_TURNS = 26  # the migration that keeps every source turn
HASHER = TermHasher(b"test-source-turns-secret-0123456")
KEYS = LocalKeyProvider(b"\x0b" * 32)
EVERYTHING = tuple((c, ("*",)) for c in Category)


def _in_tenant(conn: psycopg.Connection[Any], tenant: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with conn.transaction():
        conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


async def test_the_migration_gives_every_tenants_rows_their_one_turn(postgres: Any) -> None:
    tenants = [unique("turns"), unique("turns")]
    with database_before(postgres.owner_dsn, SOURCE_TURNS, "turns") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for tenant in tenants:  # as the version before stored them
                for turn in ("t1", ""):
                    memory_id = str(uuid.uuid4())
                    _in_tenant(conn, tenant,
                               "INSERT INTO memories (tenant_id, id, subject, scope, category, text, text_hash, "
                               "importance, confidence, stability, agent, source_kind, source_turn_id) VALUES "
                               "(%s, %s, 'alice', 'subject', 'event', 'x', '\\x00', 0.5, 1, 'stable', 'a', 'input', %s)",
                               tenant, memory_id, turn)
                    _in_tenant(conn, tenant,
                               "INSERT INTO memory_versions (tenant_id, memory_id, version, change, subject, scope, "
                               "session_id, category, key, text, importance, confidence, stability, pinned, tags, "
                               "agent, source_kind, source_turn_id, status, created_at) SELECT tenant_id, id, 1, "
                               "'created', subject, scope, session_id, category, key, text, importance, confidence, "
                               "stability, pinned, tags, agent, source_kind, source_turn_id, status, created_at "
                               "FROM memories WHERE tenant_id = %s AND id = %s", tenant, memory_id)
                    _in_tenant(conn, tenant,
                               "INSERT INTO pending_values (tenant_id, id, memory_id, subject, text_ct, text_hash, "
                               "importance, confidence, stability, pinned, agent, source_kind, source_turn_id, trust) "
                               "VALUES (%s, %s, %s, 'alice', '\\x00', '\\x00', 0.5, 1, 'stable', false, 'a', 'input', "
                               "%s, 0.5)", tenant, str(uuid.uuid4()), memory_id, turn)

        assert [m.version for m in await migrate(dsn)] == [m.version for m in available() if m.version >= SOURCE_TURNS]

        with psycopg.connect(dsn, autocommit=True) as conn:
            for tenant in tenants:
                for table in ("memories", "memory_versions", "pending_values"):
                    found = _in_tenant(conn, tenant, f"SELECT source_turn_id, source_turn_ids FROM {table} "
                                                     "WHERE tenant_id = %s ORDER BY source_turn_id", tenant)
                    assert found == [("", []), ("t1", ["t1"])], table
            forced = conn.execute("SELECT relname, relforcerowsecurity FROM pg_class WHERE relname IN "
                                  "('memories', 'memory_versions', 'pending_values')").fetchall()
            assert sorted(forced) == [("memories", True), ("memory_versions", True), ("pending_values", True)]


async def test_erase_by_turn_finds_what_a_server_of_the_version_before_wrote(db: Postgres) -> None:
    store = Stores(db, HASHER, KEYS)
    tenant = unique("turns")
    everything = ReadFilter(subject="alice", rules=EVERYTHING)
    new, replaced, old = (r.memory_id for r in await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.EVENT, "Flew to Porto", source_turn_ids=("t1", "t2")),
        Draft(Category.FACT, "Lives in Lyon", key="home_city", source_turn_ids=("t3", "t4")),
        Draft(Category.EVENT, "Bought a bike")]))
    async with db.tenant_tx(tenant) as conn:
        # The version before replaces a value's one turn and leaves source_turn_ids alone, and
        # writes new rows with source_turn_id alone.
        await conn.execute("UPDATE memories SET source_turn_id = 't9' WHERE tenant_id = %s AND id = %s",
                           (tenant, replaced))
        await conn.execute("UPDATE memories SET source_turn_id = 't7' WHERE tenant_id = %s AND id = %s",
                           (tenant, old))
    listed = {m.id: m.source_turn_ids for m in (await store.session(tenant).list(everything, Page())).memories}
    assert listed == {new: ("t1", "t2"), replaced: ("t9",), old: ("t7",)}

    gone = {}
    for turn in ("t9", "t7", "t2"):
        receipt = await store.session(tenant, "agent-1").erase("alice", everything, EraseSelector(source_turn_id=turn),
                                    EraseMode.PURGE)
        assert receipt.verified
        gone[turn] = receipt.counts.memories
    assert gone == {"t9": 1, "t7": 1, "t2": 1}
    assert (await store.session(tenant).list(everything, Page())).memories == []

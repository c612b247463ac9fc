"""A Write of many items is one transaction however its statements are batched: all items or
none, items meeting each other in one batch behave as if written one after the other, and
concurrent writers of the same keys keep gapless versions and an intact audit chain."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from memoryd.domain import Category, Draft, MemorydError, Outcome, Page, ReadFilter, Status
from memoryd.storage import LocalKeyProvider, Postgres, Stores, PostgresSettings, TermHasher

from ..support import unique

EVERYTHING = tuple((c, ("*",)) for c in Category)
HASHER = TermHasher(b"test-keyword-secret-0123456789ab")


@pytest.fixture
async def store(private_database: str) -> AsyncIterator[Stores]:
    # A database of its own: the suite's server, on the shared one, runs an outbox worker that
    # would take this file's index work while a test counts it.
    db = Postgres(PostgresSettings(private_database, pool_max=8))  # owner DSN + SET ROLE memoryd_app
    await db.open()
    yield Stores(db, HASHER, LocalKeyProvider(os.urandom(32)))
    await db.close()


async def owner_rows(dsn: str, query: str, *params: Any) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(dsn, row_factory=dict_row) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall()


async def test_a_batch_with_one_failing_item_writes_nothing(private_database, store):
    tenant = unique("all-or-none")
    drafts = [Draft(Category.FACT, f"fact {i}", key=f"k{i}") for i in range(30)]
    drafts.insert(17, Draft(Category.EVENT, "out of range", importance=2.0))  # the table's CHECK refuses it
    with pytest.raises(MemorydError):
        await store.session(tenant, "agent-1").write("alice", drafts)
    for table in ("memories", "memory_versions", "outbox", "memory_terms", "audit_log"):
        assert await owner_rows(private_database, f"SELECT 1 FROM {table} WHERE tenant_id = %s", tenant) == [], table
    # The connection went back to the pool usable: the same batch without the bad item is written.
    del drafts[17]
    assert [r.outcome for r in await store.session(tenant, "agent-1").write("alice", drafts)] == [Outcome.CREATED] * 30


async def test_items_meeting_each_other_in_one_batch_behave_as_if_written_in_turn(private_database, store):
    tenant = unique("in-turn")
    results = await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.PREFERENCE, "tea", key="drink"),
        Draft(Category.EVENT, "went to Porto", tags=("trip",)),
        Draft(Category.PREFERENCE, "coffee", key="drink"),
        Draft(Category.EVENT, "Went to  porto", tags=("city",)),
        Draft(Category.PREFERENCE, "coffee", key="drink"),
        Draft(Category.CONSTRAINT, "no peanuts", key="diet"),
        Draft(Category.CONSTRAINT, "no peanuts", key="diet"),
    ])
    assert [(r.outcome, r.version) for r in results] == [
        (Outcome.CREATED, 1), (Outcome.CREATED, 1), (Outcome.UPDATED, 2), (Outcome.MERGED, 2),
        (Outcome.UNCHANGED, 2), (Outcome.CREATED, 1), (Outcome.UNCHANGED, 1)]
    assert results[0].memory_id == results[2].memory_id == results[4].memory_id
    assert results[1].memory_id == results[3].memory_id
    assert results[5].memory_id == results[6].memory_id
    listing = await store.session(tenant).list(ReadFilter(subject="alice", rules=EVERYTHING), Page())
    by_id = {m.id: m for m in listing.memories}
    assert by_id[results[0].memory_id].text == "coffee"
    assert set(by_id[results[1].memory_id].tags) == {"trip", "city"}
    versions = await owner_rows(private_database, "SELECT version, change, status FROM memory_versions "
                                "WHERE tenant_id = %s AND memory_id = %s ORDER BY version", tenant, results[0].memory_id)
    assert [(v["version"], v["change"], v["status"]) for v in versions] == [
        (1, "created", "superseded"), (2, "updated", "active")]
    # One outbox row per memory: the batch's earlier index work was folded.
    queued = await owner_rows(private_database, "SELECT memory_id FROM outbox WHERE tenant_id = %s", tenant)
    assert sorted(str(r["memory_id"]) for r in queued) == sorted({r.memory_id for r in results})


async def test_concurrent_batches_on_the_same_keys_keep_versions_and_the_audit_chain(private_database, store):
    tenant = unique("concurrent")
    writers, rounds = 6, 4

    async def writer(n: int) -> None:
        for r in range(rounds):
            keys = ["home_city", "drink"] if n % 2 else ["drink", "home_city"]  # opposite lock orders
            drafts = [Draft(Category.FACT if k == "home_city" else Category.PREFERENCE, f"{k} {n}.{r}", key=k)
                      for k in keys]
            drafts += [Draft(Category.EVENT, f"event {n}.{r}.{i}") for i in range(5)]
            await store.session(tenant, f"agent-{n}").write("alice", drafts)

    await asyncio.gather(*(writer(n) for n in range(writers)))
    for key_text in ("home_city", "drink"):
        rows = await owner_rows(private_database, "SELECT id, version, status FROM memories WHERE tenant_id = %s "
                                "AND key_label = %s", tenant, store.term_hasher(tenant).label(key_text))
        assert [(r["version"], r["status"]) for r in rows] == [(writers * rounds, Status.ACTIVE.value)]
        versions = await owner_rows(private_database, "SELECT version FROM memory_versions WHERE tenant_id = %s "
                                                      "AND memory_id = %s ORDER BY version", tenant, rows[0]["id"])
        assert [v["version"] for v in versions] == list(range(1, writers * rounds + 1))
    report = await store.session(tenant).verify_audit()
    assert report.intact and report.events == writers * rounds


async def test_the_write_tells_which_of_its_memories_still_wait_for_the_index(private_database, store):
    tenant = unique("index-state")
    written = await store.session(tenant, "agent-1").write_with_index_state("alice", [
        Draft(Category.PREFERENCE, "tea", key="drink"), Draft(Category.EVENT, "went to Porto")])
    assert written.unindexed == {r.memory_id for r in written.results}
    # A worker indexed them (their outbox rows are gone): an unchanged repeat waits for nothing.
    async with await psycopg.AsyncConnection.connect(private_database, autocommit=True) as conn:
        await conn.execute("DELETE FROM outbox WHERE tenant_id = %s", (tenant,))
    again = await store.session(tenant, "agent-1").write_with_index_state(
        "alice", [Draft(Category.PREFERENCE, "tea", key="drink")])
    assert [r.outcome for r in again.results] == [Outcome.UNCHANGED] and again.unindexed == frozenset()
    # A dead letter still counts as not indexed.
    async with await psycopg.AsyncConnection.connect(private_database, autocommit=True) as conn:
        await conn.execute("INSERT INTO outbox (tenant_id, memory_id, subject, op, dead) VALUES (%s, %s, 'alice', "
                           "'upsert', true)", (tenant, written.results[0].memory_id))
    dead = await store.session(tenant, "agent-1").write_with_index_state(
        "alice", [Draft(Category.PREFERENCE, "tea", key="drink")])
    assert dead.unindexed == {written.results[0].memory_id}

"""The store seals memory content with per-subject data keys: rows written before that are
read as stored and sealed by the start-up backfill, content whose key is lost reads as
unavailable (never as garbage) while everything else works, and a PURGE of a subject and a
write to it are ordered by the subject's key row."""

from __future__ import annotations

import asyncio
import os
import uuid
from types import SimpleNamespace
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memoryd.domain import (
    Category,
    DataKeyUnavailable,
    Draft,
    EraseMode,
    EraseSelector,
    Outcome,
    Page,
    ReadFilter,
    Scope,
    Status,
)
from memoryd.storage import (
    LocalKeyProvider,
    Postgres,
    Stores,
    PostgresSettings,
    TermHasher,
    seal_plaintext,
)
from memoryd.storage.keys._envelope import legacy_digest

from ..support import unique, until_blocked_by

EVERYTHING = tuple((c, ("*",)) for c in Category)
HASHER = TermHasher(b"test-keyword-secret-0123456789ab")
MASTER = os.urandom(32)


def alice(**fields: Any) -> ReadFilter:
    return ReadFilter(subject="alice", rules=EVERYTHING, **fields)


async def listed(store: Stores, tenant: str) -> list[Any]:
    return (await store.session(tenant).list(alice(), Page())).memories


@pytest.fixture
def store(db: Postgres) -> Stores:
    return Stores(db, HASHER, LocalKeyProvider(MASTER))


async def owner(postgres: Any, query: str, *params: Any) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn, autocommit=True,
                                                     row_factory=dict_row) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []


async def insert_legacy(postgres: Any, tenant: str, category: str, text: str, key: str = "",
                        data: dict[str, Any] | None = None, tags: tuple[str, ...] = ()) -> str:
    """A memory and its first version in the shape written before encryption (plaintext)."""
    memory_id = str(uuid.uuid4())
    await owner(postgres,
                "INSERT INTO memories (tenant_id, id, subject, scope, category, key, text, text_hash, data, importance, "
                "confidence, stability, agent, source_kind, tags) VALUES (%s, %s, 'alice', 'subject', %s, %s, %s, %s, "
                "%s, 0.5, 1.0, 'stable', 'agent-1', 'input', %s)",
                tenant, memory_id, category, key, text, legacy_digest(text), Jsonb(data) if data else None, list(tags))
    await owner(postgres,
                "INSERT INTO memory_versions (tenant_id, memory_id, version, change, subject, scope, session_id, "
                "category, key, text, data, importance, confidence, stability, pinned, tags, agent, source_kind, "
                "source_turn_id, status, created_at) SELECT tenant_id, id, 1, 'created', subject, scope, session_id, "
                "category, key, text, data, importance, confidence, stability, pinned, tags, agent, source_kind, "
                "source_turn_id, status, created_at FROM memories WHERE tenant_id = %s AND id = %s",
                tenant, memory_id)
    return memory_id


@pytest.fixture
async def alone(private_database: str) -> AsyncIterator[tuple[Any, Postgres, Stores]]:
    """A database of its own: the suite's server runs an outbox worker on the shared one,
    which would drain the index work this test checks is queued."""
    database = Postgres(PostgresSettings(private_database))
    await database.open()
    yield SimpleNamespace(owner_dsn=private_database), database, Stores(database, HASHER,
                                                                                     LocalKeyProvider(MASTER))
    await database.close()


async def test_plaintext_rows_read_as_stored_and_the_backfill_seals_them(alone):
    postgres, db, store = alone
    tenant = unique("legacy")
    fact = await insert_legacy(postgres, tenant, "fact", "Lives in Lyon", "home_city", {"zip": "69001"},
                               tags=("travel",))
    event = await insert_legacy(postgres, tenant, "event", "Visited Rome", tags=("italy", "travel"))
    now = datetime.now(UTC)

    async def reads() -> tuple[Any, ...]:
        versions, _ = await store.session(tenant).history(alice(), fact, 0, 10)
        listing = sorted((m.text, m.key, m.tags) for m in await listed(store, tenant))
        return [(v.memory.text, v.memory.key, v.memory.data) for v in versions], listing

    # Before the backfill (which runs before a server serves) rows read as stored.
    before = await reads()
    assert before == ([("Lives in Lyon", "home_city", {"zip": "69001"})],
                      [("Lives in Lyon", "home_city", ("travel",)), ("Visited Rome", "", ("italy", "travel"))])

    report = await seal_plaintext(PostgresSettings(postgres.owner_dsn), db, store.keys, store.term_hasher,
                                  batch_size=1)

    assert report.memories >= 2 and report.versions >= 2 and report.labelled >= 4
    rows = await owner(postgres, "SELECT text, data, text_ct, data_ct, text_hash FROM memories WHERE tenant_id = %s "
                                 "UNION ALL SELECT text, data, text_ct, data_ct, NULL FROM memory_versions "
                                 "WHERE tenant_id = %s", tenant, tenant)
    assert len(rows) == 4 and all(r["text"] is None and r["data"] is None and r["text_ct"] for r in rows)
    assert legacy_digest("Visited Rome") not in [bytes(r["text_hash"]) for r in rows if r["text_hash"]]
    # Keys and tags: only labels and sealed copies are left, and both memories are queued for
    # the index again (its copy held the names).
    rows = await owner(postgres, "SELECT key, tags, key_label, key_ct, tag_labels, tags_ct FROM memories "
                                 "WHERE tenant_id = %s UNION ALL SELECT key, tags, key_label, key_ct, tag_labels, "
                                 "tags_ct FROM memory_versions WHERE tenant_id = %s", tenant, tenant)
    assert all(r["key"] == "" and r["tags"] == [] and r["tags_ct"] and len(r["tag_labels"]) >= 1 for r in rows)
    assert sorted(bool(r["key_ct"]) and len(r["key_label"]) == 16 for r in rows) == [False, False, True, True]
    queued = await owner(postgres, "SELECT memory_id::text FROM outbox WHERE tenant_id = %s AND op = 'upsert'", tenant)
    assert {r["memory_id"] for r in queued} == {fact, event}
    assert await reads() == before
    [m] = await store.session(tenant).recall_keys(alice(), ["home_city"], now)
    assert (m.id, m.text, m.data, m.tags) == (fact, "Lives in Lyon", {"zip": "69001"}, ("travel",))
    # Repeats are still recognised under the keyed digest the backfill wrote.
    merged, unchanged = await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.EVENT, "visited  ROME"), Draft(Category.FACT, "Lives in Lyon", key="home_city",
                                                      data={"zip": "69001"}, tags=("travel",))])
    assert (merged.memory_id, merged.outcome) == (event, Outcome.MERGED)
    assert (unchanged.memory_id, unchanged.outcome) == (fact, Outcome.UNCHANGED)
    # Nothing left to do on the next start.
    again = await seal_plaintext(PostgresSettings(postgres.owner_dsn), db, store.keys, store.term_hasher)
    assert await owner(postgres, "SELECT 1 FROM memories WHERE tenant_id = %s AND text_ct IS NULL", tenant) == []
    assert again.skipped == 0 and again.labelled == 0


async def test_with_another_master_key_content_is_unavailable_and_writes_to_that_subject_fail(postgres, db, store):
    tenant = unique("wrongkey")
    [written] = await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.FACT, "Lives in Lyon", key="home_city", data={"zip": "69001"})])
    await store.session(tenant, "agent-1").write("alice", [Draft(Category.FACT, "Lives in Nice", key="home_city")])
    other = Stores(db, HASHER, LocalKeyProvider(os.urandom(32)))
    now = datetime.now(UTC)

    [m] = await other.session(tenant).recall_keys(alice(), ["home_city"], now)
    assert (m.id, m.text, m.data, m.content_unavailable) == (written.memory_id, "", None, True)
    versions, _ = await other.session(tenant).history(alice(), written.memory_id, 0, 10)
    assert [(v.memory.text, v.memory.content_unavailable) for v in versions] == [("", True), ("", True)]
    assert [text for _, text in await other.session(tenant).index_rows([written.memory_id])] == [None]

    with pytest.raises(DataKeyUnavailable):
        await other.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, "Visited Rome")])
    assert len(await listed(store, tenant)) == 1
    # Another subject is unaffected; the right key still reads everything.
    [new] = await other.session(tenant, "agent-1").write("carol", [Draft(Category.EVENT, "Visited Rome")])
    assert new.outcome is Outcome.CREATED
    [m] = await store.session(tenant).recall_keys(alice(), ["home_city"], now)
    assert (m.text, m.content_unavailable) == ("Lives in Nice", False)


async def test_ciphertext_moved_to_another_memory_does_not_decrypt(postgres, store):
    tenant = unique("moved")
    first, second = await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.FACT, "Lives in Lyon", key="home_city"), Draft(Category.FACT, "Born in Oslo", key="birthplace")])
    await owner(postgres, "UPDATE memories SET text_ct = (SELECT text_ct FROM memories WHERE tenant_id = %s "
                          "AND id = %s) WHERE tenant_id = %s AND id = %s",
                tenant, first.memory_id, tenant, second.memory_id)

    found = {m.id: m for m in await store.session(tenant).recall_keys(alice(), ["home_city", "birthplace"],
                                                     datetime.now(UTC))}

    assert (found[first.memory_id].text, found[first.memory_id].key) == ("Lives in Lyon", "home_city")
    assert not found[first.memory_id].content_unavailable
    moved = found[second.memory_id]
    assert (moved.text, moved.key, moved.tags, moved.content_unavailable) == ("", "", (), True)


async def test_a_purge_of_the_subject_waits_for_a_write_holding_its_key(postgres, store):
    tenant = unique("order")
    await store.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, "Visited Rome")])
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn) as writer:
        # What a write transaction holds on its subject's key until it commits.
        await writer.execute("SELECT 1 FROM subject_keys WHERE tenant_id = %s AND subject = 'alice' FOR SHARE",
                             (tenant,))
        purge = asyncio.create_task(store.session(tenant, "agent-1").erase(
            "alice", alice(), EraseSelector(all_of_subject=True), EraseMode.PURGE))
        await until_blocked_by(writer.info.backend_pid, postgres.owner_dsn)
        assert not purge.done()
        await writer.commit()
    receipt = await purge
    assert (receipt.counts.keys, receipt.counts.memories, receipt.verified) == (1, 1, True)


async def test_a_write_waiting_for_a_purge_of_its_subject_gets_a_fresh_key(postgres, store):
    tenant = unique("order")
    await store.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, "Visited Rome")])
    [old] = await owner(postgres, "SELECT wrapped FROM subject_keys WHERE tenant_id = %s", tenant)
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn) as purger:
        # What a PURGE of the whole subject holds: the key row, locked and then deleted.
        await purger.execute("SELECT 1 FROM subject_keys WHERE tenant_id = %s AND subject = 'alice' FOR UPDATE",
                             (tenant,))
        await purger.execute("DELETE FROM subject_keys WHERE tenant_id = %s AND subject = 'alice'", (tenant,))
        write = asyncio.create_task(store.session(tenant, "agent-1").write("alice",
                                                                           [Draft(Category.EVENT, "Visited Oslo")]))
        await until_blocked_by(purger.info.backend_pid, postgres.owner_dsn)
        assert not write.done()
        await purger.commit()
    [result] = await write
    assert result.outcome is Outcome.CREATED
    [new] = await owner(postgres, "SELECT wrapped FROM subject_keys WHERE tenant_id = %s", tenant)
    assert bytes(new["wrapped"]) != bytes(old["wrapped"])
    texts = sorted((m.text, m.content_unavailable) for m in await listed(store, tenant))
    assert texts == [("", True), ("Visited Oslo", False)]  # the old key is gone for good


async def test_org_memories_use_the_organisations_key_and_survive_a_subject_purge(postgres, store):
    tenant = unique("org")
    await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.CONSTRAINT, "No alcohol at work events", key="diet", scope=Scope.ORG),
        Draft(Category.FACT, "Lives in Lyon", key="home_city")])
    keys = await owner(postgres, "SELECT subject FROM subject_keys WHERE tenant_id = %s ORDER BY subject", tenant)
    assert [k["subject"] for k in keys] == ["", "alice"]

    receipt = await store.session(tenant, "agent-1").erase("alice", alice(), EraseSelector(all_of_subject=True),
                                EraseMode.PURGE)

    assert receipt.counts.keys == 1
    [m] = await store.session(tenant).recall_keys(alice(include_org=True), ["diet"], datetime.now(UTC))
    assert (m.text, m.content_unavailable, m.status) == ("No alcohol at work events", False, Status.ACTIVE)

"""The memory lifecycle against a real PostgreSQL: TTLs per category and tenant, expiry at
read time and by the sweeper, forgetting of stale memories, the episodic cap, and that every
lifecycle action is audited and counted and takes the vector out of the index (outbox).

The sweeper's clock is the test's: it is called with ``now`` in the future instead of waiting.
Times the store sets itself (updated_at, last_access_at) are moved into the past with the
owner's connection where a test needs an old memory. The module has a database of its own,
so the suite server's sweeper (which runs on the real clock) never sweeps these tenants.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from memoryd.domain import Category, Draft, Outcome, Page, ReadFilter, Scope, Status, TenantPolicy
from memoryd.server._config import Scoring
from memoryd.storage import (
    LifecycleSweeper,
    LocalKeyProvider,
    Postgres,
    Stores,
    PostgresSettings,
    TermHasher,
    migrate,
)
from memoryd.storage.memories._write_batch import SNAPSHOTS, VERSION_COLUMNS

from ..support import database_before, fresh_database, unique

# How the version before 0026 wrote version rows: one source turn, no list of them.
VERSION_COLUMNS_0022 = VERSION_COLUMNS.replace(" source_turn_ids,", "")
SNAPSHOTS_0022 = SNAPSHOTS.replace(" m.source_turn_ids,", "")

EVERYTHING = tuple((c, ("*",)) for c in Category)
AGENT = "agent-1"
TTL_DAYS = {"fact": 730, "preference": 180, "goal": 30, "context": 7, "constraint": None, "event": None,
            "decision": None}
OVERRIDE = "acme"  # tenants whose name starts with this get the override policy


def policy_for(tenant: str) -> TenantPolicy:
    if tenant.startswith(OVERRIDE):
        base = TenantPolicy()
        return replace(base, ttl_days={**base.ttl_days, Category.CONTEXT: 1.0, Category.FACT: None},
                       session_ttl_hours=2.0, episodic_cap=3)
    return TenantPolicy()


@pytest.fixture(scope="module")
def database(postgres: Any) -> Iterator[str]:
    """The owner DSN of a migrated database of this module's own."""
    with fresh_database(postgres.owner_dsn, "lifecycle") as dsn:
        yield dsn


@pytest.fixture
async def db(database: str) -> AsyncIterator[Postgres]:
    pool = Postgres(PostgresSettings(database))
    await pool.open()
    yield pool
    await pool.close()


@pytest.fixture
def store(db: Postgres) -> Stores:
    return Stores(db, TermHasher(b"lifecycle test terms secret"), LocalKeyProvider(b"\x05" * 32),
                               policy_for)


@pytest.fixture
def sweeper(db: Postgres) -> LifecycleSweeper:
    return LifecycleSweeper(db, None, policy_for, Scoring().half_life_days, batch_size=2)


def owner_sql(database: str, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with psycopg.connect(database, autocommit=True, row_factory=dict_row) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


async def write(store: Stores, tenant: str, *drafts: Draft, subject: str = "alice") -> list[str]:
    return [r.memory_id for r in await store.session(tenant, AGENT).write(subject, list(drafts))]


async def listed(store: Stores, tenant: str, now: datetime | None = None,
                 statuses: tuple[Status, ...] = (Status.ACTIVE,), subject: str = "alice") -> dict[str, Any]:
    flt = ReadFilter(subject=subject, rules=EVERYTHING, any_session=True, statuses=statuses)
    return {m.id: m for m in (await store.session(tenant).list(flt, Page(size=500), now)).memories}


def event(text: str, importance: float = 0.5, **kwargs: Any) -> Draft:
    return Draft(Category.EVENT, text, importance=importance, **kwargs)


def audit_events(database: str, tenant: str, action: str) -> list[dict[str, Any]]:
    return owner_sql(database, "SELECT agent, subject, memory_ids::text[] AS ids FROM audit_log "
                               "WHERE tenant_id = %s AND action = %s ORDER BY seq", (tenant, action))


# --- TTL at write time -----------------------------------------------------------------------


@pytest.mark.parametrize("category", list(TTL_DAYS), ids=list(TTL_DAYS))
async def test_a_new_memory_expires_after_its_categorys_ttl(store, category):
    tenant = unique("life")
    key = "" if Category(category).episodic else "k"
    [memory_id] = await write(store, tenant, Draft(Category(category), "a value", key=key))
    m = (await listed(store, tenant))[memory_id]
    if TTL_DAYS[category] is None:
        assert m.expires_at is None
    else:
        assert m.expires_at - m.updated_at == timedelta(days=TTL_DAYS[category])


async def test_session_memories_live_24_hours_and_a_tenant_can_change_ttls(store):
    tenant, acme = unique("life"), unique(OVERRIDE)
    session = Draft(Category.FACT, "in a meeting", key="status", scope=Scope.SESSION, session_id="s1")
    for who, ttl in ((tenant, timedelta(hours=24)), (acme, timedelta(hours=2))):
        [memory_id] = await write(store, who, session)
        m = (await listed(store, who))[memory_id]
        assert m.expires_at - m.updated_at == ttl
    [context, fact] = await write(store, acme, Draft(Category.CONTEXT, "in Paris", key="city"),
                                  Draft(Category.FACT, "born 1990", key="born"))
    memories = await listed(store, acme)
    assert memories[context].expires_at - memories[context].updated_at == timedelta(days=1)
    assert memories[fact].expires_at is None  # ttl_days.fact = 0: no TTL for this tenant


async def test_pinned_memories_never_expire_and_a_change_refreshes_the_ttl(store, database):
    tenant = unique("life")
    [pinned] = await write(store, tenant, Draft(Category.CONTEXT, "on call", key="duty", pinned=True))
    assert (await listed(store, tenant))[pinned].expires_at is None
    [memory_id] = await write(store, tenant, Draft(Category.CONTEXT, "in Paris", key="city"))
    owner_sql(database, "UPDATE memories SET expires_at = now() + interval '1 hour' WHERE tenant_id = %s AND id = %s",
              (tenant, memory_id))
    await write(store, tenant, Draft(Category.CONTEXT, "in Rome", key="city"))
    m = (await listed(store, tenant))[memory_id]
    assert m.expires_at - m.updated_at == timedelta(days=7)


# --- expiry ----------------------------------------------------------------------------------


async def test_an_expired_memory_is_never_read_even_before_the_sweeper_runs(store):
    tenant = unique("life")
    [memory_id] = await write(store, tenant, Draft(Category.CONTEXT, "staying at the Ritz", key="hotel"))
    flt = ReadFilter(subject="alice", rules=EVERYTHING)
    later = datetime.now(UTC) + timedelta(days=8)
    assert [m.id for m in await store.session(tenant).recall_keys(flt, ["hotel"], datetime.now(UTC))] == [memory_id]
    assert await store.session(tenant).recall_keys(flt, ["hotel"], later) == []
    assert await store.session(tenant).fetch(flt, [memory_id], later) == []
    assert await store.session(tenant).keyword_search(flt, "Ritz", 10, later) == []
    assert memory_id not in await listed(store, tenant, later)


async def test_the_sweeper_forgets_expired_memories_audits_counts_and_deletes_their_vectors(store, sweeper, database):
    tenant = unique("life")
    [context, pinned, fact] = await write(store, tenant, Draft(Category.CONTEXT, "in Paris", key="city"),
                                          Draft(Category.CONTEXT, "on call", key="duty", pinned=True),
                                          Draft(Category.FACT, "speaks French", key="language"))
    owner_sql(database, "DELETE FROM outbox WHERE tenant_id = %s", (tenant,))  # as if indexed

    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=6), [tenant])).expired == 0
    report = await sweeper.sweep(datetime.now(UTC) + timedelta(days=8), [tenant])
    assert (report.tenants, report.expired, report.forgotten_stale, report.evicted) == (1, 1, 0, 0)

    assert set(await listed(store, tenant)) == {pinned, fact}
    forgotten = (await listed(store, tenant, statuses=(Status.FORGOTTEN,)))[context]
    assert forgotten.version == 2
    history, _ = await store.session(tenant).history(
        ReadFilter(subject="alice", rules=EVERYTHING, statuses=tuple(Status)), context, 0, 10)
    assert history[0].change.value == "forgotten"
    assert audit_events(database, tenant, "lifecycle.expire") == [{"agent": "memoryd", "subject": "alice",
                                                                   "ids": [context]}]
    assert (await store.session(tenant).lifecycle_counts())["lifecycle.expired"] == 1
    assert owner_sql(database, "SELECT memory_id::text AS id, op FROM outbox WHERE tenant_id = %s",
                     (tenant,)) == [{"id": context, "op": "delete"}]
    # Sweeping again finds nothing more to do.
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=8), [tenant])).expired == 0


async def test_expiry_sweeps_in_batches_and_leaves_other_tenants_alone(store, sweeper):
    tenant, other = unique("life"), unique("life")
    drafts = [Draft(Category.CONTEXT, f"value {i}", key=f"k{i}") for i in range(5)]
    await write(store, tenant, *drafts)
    await write(store, other, *drafts)
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=8), [tenant])).expired == 5  # batches of 2
    assert await listed(store, tenant) == {}
    assert len(await listed(store, other)) == 5


# --- staleness -------------------------------------------------------------------------------


async def test_unused_unimportant_memories_are_forgotten_after_stale_days(store, sweeper, database):
    tenant = unique("life")
    [trivial, important, pinned, recalled] = await write(
        store, tenant, event("had a coffee", 0.2), event("got married", 0.9), event("likes jazz", 0.1, pinned=True),
        event("bought a bike", 0.2))
    # Recall reinforces: a memory read recently is in use, however old its last change.
    owner_sql(database, "UPDATE memories SET updated_at = now() - interval '200 days' WHERE tenant_id = %s", (tenant,))
    owner_sql(database, "UPDATE memories SET last_access_at = now() - interval '10 days' WHERE tenant_id = %s "
                        "AND id = %s", (tenant, recalled))

    assert (await sweeper.sweep(datetime.now(UTC), [tenant])).forgotten_stale == 1
    assert set(await listed(store, tenant)) == {important, pinned, recalled}
    assert audit_events(database, tenant, "lifecycle.forget_stale") == [{"agent": "memoryd", "subject": "alice",
                                                                         "ids": [trivial]}]
    # 81 days later the recalled one is unused for 91 days too.
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=81), [tenant])).forgotten_stale == 1
    assert set(await listed(store, tenant)) == {important, pinned}
    assert (await store.session(tenant).lifecycle_counts())["lifecycle.forgotten_stale"] == 2


async def test_a_memory_changed_recently_is_not_stale(store, sweeper):
    tenant = unique("life")
    await write(store, tenant, event("had a coffee", 0.2))
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=89), [tenant])).forgotten_stale == 0
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=91), [tenant])).forgotten_stale == 1


# --- episodic cap ----------------------------------------------------------------------------


async def test_the_episodic_cap_evicts_the_least_important_and_least_recent_never_pinned(store, sweeper, database):
    tenant = unique(OVERRIDE)  # episodic_cap = 3
    [low, pinned_low, high, mid_old, mid_new] = await write(
        store, tenant, event("low", 0.3), event("pinned low", 0.3, pinned=True), event("high", 0.9),
        event("mid old", 0.6), event("mid new", 0.6, tags=("x",)))
    await write(store, tenant, event("someone else's", 0.1), subject="bob")
    owner_sql(database, "UPDATE memories SET updated_at = now() - interval '60 days' WHERE tenant_id = %s AND id = %s",
              (tenant, mid_old))  # event half-life 30 days: 0.6 * 0.25 = 0.15 < 0.3

    report = await sweeper.sweep(datetime.now(UTC), [tenant])
    assert report.evicted == 2
    assert set(await listed(store, tenant)) == {pinned_low, high, mid_new}
    assert len(await listed(store, tenant, subject="bob")) == 1
    [evict] = audit_events(database, tenant, "lifecycle.evict")
    assert (evict["agent"], evict["subject"], sorted(evict["ids"])) == ("memoryd", "alice", sorted([low, mid_old]))
    assert (await store.session(tenant).lifecycle_counts())["lifecycle.evicted"] == 2
    assert (await sweeper.sweep(datetime.now(UTC), [tenant])).evicted == 0


@pytest.mark.parametrize("repeats", [False, True], ids=["flood", "repeat-then-flood"])
async def test_one_writer_flooding_a_subject_evicts_only_its_own_events(store, sweeper, repeats):
    # A writer without erase rights must not be able to push other agents' events out with
    # a flood of important ones: the cap counts per writer — per creator, so not even after
    # it repeated one of them (a merge, which makes the repeater its last writer).
    tenant = unique(OVERRIDE)  # episodic_cap = 3
    theirs = [r.memory_id for r in await store.session(tenant, "support-bot").write("alice",
                                                     [event("refund asked", 0.2), event("parcel late", 0.2)])]
    if repeats:
        [repeat] = await store.session(tenant, "flooder").write("alice", [event("refund asked", 0.1)])
        assert (repeat.outcome, repeat.memory_id) == (Outcome.MERGED, theirs[0])
    flood = [r.memory_id for r in await store.session(tenant, "flooder").write("alice",
                                                    [event(f"noise {i}", 1.0) for i in range(6)])]
    report = await sweeper.sweep(datetime.now(UTC), [tenant])
    assert report.evicted == 3
    left = set(await listed(store, tenant))
    assert set(theirs) <= left
    assert len(left & set(flood)) == 3


def test_rows_from_before_creators_were_recorded_count_as_their_first_versions_agent(postgres):
    # Migration 0023 fills created_by, across every tenant, from each memory's first version
    # (its creator), else from its last writer; row level security stays forced afterwards.
    merged, unversioned = str(uuid.uuid4()), str(uuid.uuid4())
    with database_before(postgres.owner_dsn, 23, "creators") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for tenant, memory_id, last_writer, versions in (("t1", merged, "flooder", ["support-bot", "flooder"]),
                                                             ("t2", unversioned, "old-agent", [])):
                with conn.transaction():
                    conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                    conn.execute("INSERT INTO memories (tenant_id, id, subject, scope, category, text, text_hash, "
                                 "importance, confidence, stability, agent, source_kind) VALUES "
                                 "(%s, %s, 'alice', 'subject', 'event', 'a', '\\x00', 0.5, 1, 'stable', %s, 'input')",
                                 (tenant, memory_id, versions[0] if versions else last_writer))
                    for n, agent in enumerate(versions, start=1):  # as the version before wrote them
                        conn.execute("UPDATE memories SET agent = %s, version = %s WHERE id = %s", (agent, n, memory_id))
                        conn.execute(f"INSERT INTO memory_versions ({VERSION_COLUMNS_0022}) {SNAPSHOTS_0022}",
                                     ([memory_id], ["created" if n == 1 else "merged"], tenant))
        asyncio.run(migrate(dsn))
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)  # forced again: no tenant set
            assert conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE relname = 'memories'"
                                ).fetchone() == (True,)
            creators = {}
            for tenant in ("t1", "t2"):
                with conn.transaction():
                    conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                    creators.update(conn.execute("SELECT id::text, created_by FROM memories").fetchall())
        assert creators == {merged: "support-bot", unversioned: "old-agent"}


async def test_the_cap_never_evicts_pinned_memories_even_above_the_cap(store, sweeper):
    tenant = unique(OVERRIDE)
    ids = await write(store, tenant, *(event(f"pinned {i}", 0.1, pinned=True) for i in range(4)))
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=365), [tenant])).evicted == 0
    assert set(await listed(store, tenant)) == set(ids)


async def test_pinned_memories_never_expire_decay_or_go_stale(store, sweeper):
    tenant = unique("life")
    ids = await write(store, tenant, Draft(Category.CONTEXT, "on call", key="duty", pinned=True, importance=0.0),
                      event("pinned event", 0.0, pinned=True))
    report = await sweeper.sweep(datetime.now(UTC) + timedelta(days=3650), [tenant])
    assert (report.expired, report.forgotten_stale, report.evicted) == (0, 0, 0)
    assert set(await listed(store, tenant)) == set(ids)


# --- trust (storage level) -------------------------------------------------------------------


async def test_pending_values_are_sealed_and_dropped_with_their_memory(store, database):
    from memoryd.domain import EraseMode, EraseSelector, SourceKind

    tenant = unique("life")
    [memory_id] = await write(store, tenant, Draft(Category.PREFERENCE, "tea", key="drink",
                                                   source_kind=SourceKind.SYNC))
    [result] = await store.session(tenant, AGENT).write("alice",
                                                        [Draft(Category.PREFERENCE, "secret coffee", key="drink")])
    assert (result.outcome, result.memory_id) == (Outcome.PENDING, memory_id)
    rows = owner_sql(database, "SELECT text_ct, text_hash FROM pending_values WHERE tenant_id = %s", (tenant,))
    assert len(rows) == 1 and b"secret coffee" not in bytes(rows[0]["text_ct"])
    [pending] = (await listed(store, tenant))[memory_id].pending
    assert (pending.text, pending.source_kind, pending.trust) == ("secret coffee", SourceKind.INPUT, 0.6)
    await store.session(tenant, AGENT).erase("alice", ReadFilter(subject="alice", rules=EVERYTHING),
                      EraseSelector(ids=(memory_id,)), EraseMode.PURGE)
    assert owner_sql(database, "SELECT 1 FROM pending_values WHERE tenant_id = %s", (tenant,)) == []

"""A write meets only what a read would serve (issue 37, item 1).

A memory whose validity or time to live has run out is gone for every read, even while its
row is still ``active`` (before the lifecycle sweeper marks it forgotten). What a write looks
up — the constraint already recorded, the exact repeat of an event, a key's current value, a
near-duplicate to merge into — uses the same liveness, so restating something that lapsed
makes it readable again instead of being answered UNCHANGED or MERGED into a memory no read
returns. Lapsed rows are made with the owner's connection (times in the past), as the
lifecycle tests do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from memoryd.domain import Category, Draft, Outcome, ReadFilter, SourceKind
from memoryd.storage import LocalKeyProvider, Postgres, Stores, PostgresSettings, TermHasher

from ..support import fresh_database, unique

EVERYTHING = tuple((c, ("*",)) for c in Category)
AGENT = "agent-1"
# The two ways a memory lapses while its row stays active.
LAPSES = {
    "expired": "UPDATE memories SET expires_at = now() - interval '1 second' WHERE tenant_id = %s AND id = %s",
    "no-longer-valid": "UPDATE memories SET valid_until = now() - interval '1 second' WHERE tenant_id = %s AND id = %s",
}


@pytest.fixture(scope="module")
def database(postgres: Any) -> Iterator[str]:
    with fresh_database(postgres.owner_dsn, "liveness") as dsn:
        yield dsn


@pytest.fixture
async def store(database: str) -> AsyncIterator[Stores]:
    pool = Postgres(PostgresSettings(database))
    await pool.open()
    yield Stores(pool, TermHasher(b"liveness test terms secret"), LocalKeyProvider(b"\x06" * 32))
    await pool.close()


def lapse(database: str, how: str, tenant: str, memory_id: str) -> None:
    with psycopg.connect(database, autocommit=True, row_factory=dict_row) as conn:
        assert conn.execute(LAPSES[how], (tenant, memory_id)).rowcount == 1


async def write(store: Stores, tenant: str, draft: Draft) -> tuple[Outcome, str]:
    [result] = await store.session(tenant, AGENT).write("alice", [draft])
    return result.outcome, result.memory_id


async def served(store: Stores, tenant: str, *, key: str = "", words: str = "") -> list[str]:
    """What a read serves now: by key, or by words (the keyword channel)."""
    flt = await store.session(tenant).labelled(ReadFilter(subject="alice", rules=EVERYTHING))
    now = datetime.now(UTC)
    if key:
        return [m.id for m in await store.session(tenant).recall_keys(flt, [key], now)]
    return [hit.memory_id for hit in await store.session(tenant).keyword_search(flt, words, 10, now)]


@pytest.mark.parametrize("how", list(LAPSES))
async def test_a_constraint_restated_after_it_lapsed_is_kept_again(store, database, how):
    tenant = unique("live")
    allergy = Draft(Category.CONSTRAINT, "severe shellfish allergy", key="diet")
    outcome, first = await write(store, tenant, allergy)
    assert (outcome, await write(store, tenant, allergy)) == (Outcome.CREATED, (Outcome.UNCHANGED, first))
    lapse(database, how, tenant, first)
    assert await served(store, tenant, key="diet") == []

    outcome, again = await write(store, tenant, allergy)
    assert outcome is Outcome.CREATED and again != first
    assert await served(store, tenant, key="diet") == [again]


@pytest.mark.parametrize("how", list(LAPSES))
async def test_an_event_repeated_after_it_lapsed_is_a_memory_of_its_own(store, database, how):
    tenant = unique("live")
    visit = Draft(Category.EVENT, "Visited the Lyon office for the launch", importance=0.4)
    _, first = await write(store, tenant, visit)
    assert await write(store, tenant, visit) == (Outcome.MERGED, first)
    lapse(database, how, tenant, first)

    outcome, again = await write(store, tenant, visit)
    assert outcome is Outcome.CREATED and again != first
    assert await served(store, tenant, words="Lyon launch") == [again]


@pytest.mark.parametrize("how", list(LAPSES))
async def test_a_keyed_value_restated_after_it_lapsed_is_current_again(store, database, how):
    tenant = unique("live")
    tea = Draft(Category.PREFERENCE, "green tea", key="drink")
    _, memory_id = await write(store, tenant, tea)
    assert await write(store, tenant, tea) == (Outcome.UNCHANGED, memory_id)
    lapse(database, how, tenant, memory_id)
    assert await served(store, tenant, key="drink") == []

    outcome, again = await write(store, tenant, tea)
    assert (outcome, again) == (Outcome.UPDATED, memory_id)  # the slot's row, its lapsed value kept as a version
    assert await served(store, tenant, key="drink") == [memory_id]
    [current] = await store.session(tenant).fetch(ReadFilter(subject="alice", rules=EVERYTHING), [memory_id],
                                  datetime.now(UTC))
    assert (current.text, current.version, current.valid_until) == ("green tea", 2, None)
    assert current.expires_at is not None and current.expires_at > datetime.now(UTC)


async def test_a_lapsed_value_holds_no_trust_against_a_new_one(store, database):
    tenant = unique("live")
    _, memory_id = await write(store, tenant, Draft(Category.FACT, "Lyon", key="home_city",
                                                     source_kind=SourceKind.SYNC))
    assert (await write(store, tenant, Draft(Category.FACT, "Paris", key="home_city")))[0] is Outcome.PENDING
    lapse(database, "expired", tenant, memory_id)

    assert await write(store, tenant, Draft(Category.FACT, "Paris", key="home_city")) == (Outcome.VERSIONED,
                                                                                          memory_id)
    [current] = await store.session(tenant).fetch(ReadFilter(subject="alice", rules=EVERYTHING), [memory_id],
                                  datetime.now(UTC))
    assert (current.text, current.pending) == ("Paris", ())  # the value that waited on the lapsed one went


@pytest.mark.parametrize("how", list(LAPSES))
async def test_a_near_duplicate_never_merges_into_a_lapsed_memory(store, database, how):
    tenant = unique("live")
    _, memory_id = await write(store, tenant, Draft(Category.EVENT, "Moved to a flat in Lyon"))
    lapse(database, how, tenant, memory_id)
    session = store.session(tenant, AGENT)
    async with session.transaction() as conn:
        merged = await session.item_writer(conn, "alice").merge_similar(
            Draft(Category.EVENT, "Moved into a flat in Lyon"), memory_id)
    assert merged is None

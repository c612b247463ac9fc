"""Sessions in PostgreSQL (migration 0030): what a Write with a session id links, what a purge
leaves (nothing of the subject's sessions, counted in the erasure log), and idle sweeps on
several workers never claiming the same session."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from memoryd.domain import Category, Draft, EraseMode, EraseSelector, ReadFilter, Scope
from memoryd.storage import LocalKeyProvider, Postgres, PostgresSettings, Stores, TermHasher

from ..support import unique

EVERYTHING = tuple((c, ("*",)) for c in Category)


@pytest.fixture
async def store(postgres: Any):
    db = Postgres(PostgresSettings(postgres.owner_dsn))  # owner DSN + SET ROLE memoryd_app
    await db.open()
    yield Stores(db, TermHasher(b"sessions test terms"), LocalKeyProvider(b"\x09" * 32))
    await db.close()


def owner_sql(postgres: Any, query: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    with psycopg.connect(postgres.owner_dsn, autocommit=True, row_factory=dict_row) as conn:
        return conn.execute(query, params).fetchall()


def rows(postgres: Any, tenant: str, subject: str) -> tuple[int, int]:
    """(sessions, session_memories) rows of ``subject``, as the owner sees them."""
    [row] = owner_sql(postgres, "SELECT (SELECT count(*) FROM sessions WHERE tenant_id = %s AND subject = %s) AS s, "
                                "(SELECT count(*) FROM session_memories WHERE tenant_id = %s AND subject = %s) AS l",
                      (tenant, subject, tenant, subject))
    return row["s"], row["l"]


async def test_a_write_links_the_subjects_memories_but_not_the_organisations(postgres, store):
    tenant = unique("sessions")
    session = store.session(tenant, "agent-1")
    await session.write("alice", [Draft(Category.FACT, "lives in Lyon", key="home_city"),
                                  Draft(Category.CONTEXT, "planning a trip", key="topic", scope=Scope.SESSION,
                                        session_id="s1"),
                                  Draft(Category.FACT, "office closes at six", key="hours", scope=Scope.ORG)],
                        session_id="s1")
    assert rows(postgres, tenant, "alice") == (1, 2)


async def test_a_subject_purge_deletes_its_sessions_and_counts_them(postgres, store):
    tenant = unique("sessions")
    session = store.session(tenant, "agent-1")
    for subject in ("alice", "bob"):
        await session.write(subject, [Draft(Category.FACT, "lives in Lyon", key="home_city")], session_id="s1")
        await session.write(subject, [Draft(Category.EVENT, "called support")], session_id="s2")
    assert rows(postgres, tenant, "alice") == (2, 2)
    receipt = await session.erase("alice", ReadFilter(subject="alice", rules=EVERYTHING),
                                  EraseSelector(all_of_subject=True), EraseMode.PURGE)
    assert receipt.verified
    assert rows(postgres, tenant, "alice") == (0, 0) and rows(postgres, tenant, "bob") == (2, 2)
    [logged] = owner_sql(postgres, "SELECT counts FROM erasure_log WHERE tenant_id = %s", (tenant,))
    assert logged["counts"]["sessions"] == 2 and logged["counts"]["answered"]["sessions"] == 0


async def test_a_purge_by_id_takes_its_links_and_leaves_the_session(postgres, store):
    tenant = unique("sessions")
    session = store.session(tenant, "agent-1")
    [kept, purged] = await session.write("alice", [Draft(Category.FACT, "lives in Lyon", key="home_city"),
                                                   Draft(Category.EVENT, "called support")], session_id="s1")
    await session.erase("alice", ReadFilter(subject="alice", rules=EVERYTHING),
                        EraseSelector(ids=(purged.memory_id,)), EraseMode.PURGE)
    assert rows(postgres, tenant, "alice") == (1, 1)
    assert owner_sql(postgres, "SELECT memory_id::text AS id FROM session_memories WHERE tenant_id = %s",
                     (tenant,)) == [{"id": kept.memory_id}]


async def test_idle_sweeps_on_several_workers_share_sessions_without_claiming_one_twice(store):
    tenant = unique("sessions")
    session = store.session(tenant, "agent-1")
    for i in range(6):
        await session.write("alice", [Draft(Category.EVENT, f"said {i}")], session_id=f"s{i}")
    later = datetime.now(UTC) + timedelta(hours=1)
    claims = await asyncio.gather(*(store.session(tenant).claim_idle_sessions(1800, later, limit=2)
                                    for _ in range(3)))
    claimed = [c.session_id for batch in claims for c in batch]
    assert sorted(claimed) == [f"s{i}" for i in range(6)]  # each once
    # Held by their leases: another sweep claims none of them, and nothing is idle yet by the clock.
    assert await store.session(tenant).claim_idle_sessions(1800, later) == []
    assert await store.session(tenant).claim_idle_sessions(1800, datetime.now(UTC)) == []
    # A write after the claim keeps the session open: ending it as idle changes nothing.
    [first] = claims[0][:1]
    await session.write("alice", [Draft(Category.EVENT, "one more thing")], session_id=first.session_id)
    assert not await session.end_session("alice", first.session_id, None, blind=True, expires_at=later,
                                         idle_since=first.last_active_at)


async def test_a_session_whose_snapshot_expired_is_forgotten_and_its_memories_stay(postgres, store):
    tenant = unique("sessions")
    session = store.session(tenant, "agent-1")
    [written] = await session.write("alice", [Draft(Category.FACT, "lives in Lyon", key="home_city")],
                                    session_id="s1")
    await session.write("alice", [Draft(Category.FACT, "works nights", key="shift")], session_id="s2")
    now = datetime.now(UTC)
    assert await session.end_session("alice", "s1", None, blind=True, expires_at=now + timedelta(minutes=1))
    assert await session.end_session("alice", "s2", None, blind=True, expires_at=now + timedelta(hours=1))
    assert await store.session(tenant).drop_expired_sessions(now + timedelta(minutes=2)) == 1
    assert owner_sql(postgres, "SELECT session_id FROM sessions WHERE tenant_id = %s", (tenant,)) == [
        {"session_id": "s2"}]
    flt = ReadFilter(subject="alice", rules=EVERYTHING)
    assert [m.id for m in await session.fetch(flt, [written.memory_id], now)] == [written.memory_id]

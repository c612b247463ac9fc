"""The change log Watch streams from (migration 0029): every path that changes a memory logs
it, numbered at commit; a subject's purge leaves nothing of the subject but one row saying it
went; retention prunes up to a horizon below which a cursor cannot resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from memoryd.domain import (Category, ChangeKind, Draft, EraseMode, EraseSelector, FailedPrecondition, ReadFilter,
                            Resolution, SourceKind, TenantPolicy)
from memoryd.server._config import Scoring
from memoryd.storage import LifecycleSweeper, LocalKeyProvider, Postgres, PostgresSettings, Stores, TermHasher

from ..support import unique

EVERYTHING = tuple((c, ("*",)) for c in Category)
ALL = ReadFilter(subject="alice", rules=EVERYTHING, any_session=True)


@pytest.fixture
async def store(postgres) -> AsyncIterator[Stores]:
    db = Postgres(PostgresSettings(postgres.owner_dsn))
    await db.open()
    yield Stores(db, TermHasher(b"change log test terms"), LocalKeyProvider(b"\x0b" * 32))
    await db.close()


async def _log(store: Stores, tenant: str, subject: str | None = "alice") -> list[tuple[str, int, str]]:
    changes = await store.session(tenant).changes_after(0, None if subject is None else [subject], 1000)
    return [(c.kind.value, c.version, c.memory_id) for c in changes]


async def test_every_path_that_changes_a_memory_logs_it_in_commit_order(store: Stores):
    tenant = unique("log")
    session = store.session(tenant, "agent-1")
    [city] = await session.write("alice", [Draft(Category.FACT, "Lyon", key="city", source_kind=SourceKind.SYNC)])
    await session.write("alice", [Draft(Category.FACT, "Paris", key="city", source_kind=SourceKind.SYNC)])
    # A less trusted value waits pending (no new version, nothing logged) until accepted.
    [held] = await session.write("alice", [Draft(Category.FACT, "Rome", key="city", source_kind=SourceKind.INPUT)])
    pending = (await session.history(ALL, city.memory_id, 0, 10))[0][0].memory.pending
    await session.resolve_conflict("alice", ALL, city.memory_id, Resolution.ACCEPT_PENDING, pending[0].id)
    await session.erase("alice", ALL, EraseSelector(key="city"), EraseMode.FORGET)
    [duty] = await session.write("alice", [Draft(Category.CONTEXT, "on call", key="duty")])
    sweeper = LifecycleSweeper(store.db, None, lambda _: TenantPolicy(), Scoring().half_life_days,
                               change_retention=timedelta(days=30))  # the log itself kept
    assert (await sweeper.sweep(datetime.now(UTC) + timedelta(days=8), [tenant])).expired == 1
    [trip] = await session.write("alice", [Draft(Category.EVENT, "flew to Rome")])
    await session.erase("alice", ALL, EraseSelector(ids=(trip.memory_id,)), EraseMode.PURGE)
    assert held.memory_id == city.memory_id
    assert await _log(store, tenant) == [
        ("created", 1, city.memory_id), ("changed", 2, city.memory_id), ("changed", 3, city.memory_id),
        ("forgotten", 4, city.memory_id), ("created", 1, duty.memory_id), ("forgotten", 2, duty.memory_id),
        ("created", 1, trip.memory_id), ("erased", 1, trip.memory_id)]
    # The erased row keeps the key sealed, opened for the reader (its label is gone).
    erased = (await session.changes_after(0, ["alice"], 100))[-1]
    assert (erased.kind, erased.category, erased.key) == (ChangeKind.ERASED, Category.EVENT, "")


async def test_concurrent_writers_are_numbered_in_commit_order_and_a_poller_misses_none(store: Stores):
    tenant = unique("order")
    writers, each = 6, 10
    seen: list[int] = []
    done = asyncio.Event()

    async def poll() -> None:
        position = 0
        while True:
            finished = done.is_set()
            for change in await store.session(tenant).changes_after(position, None, 7):
                seen.append(change.seq)
                position = change.seq
            if finished and len(seen) >= writers * each:
                return
            await asyncio.sleep(0.005)

    async def write(n: int) -> None:
        for i in range(each):
            await store.session(tenant, f"w{n}").write(f"s{n}", [Draft(Category.EVENT, f"{n}-{i}")])

    poller = asyncio.ensure_future(poll())
    await asyncio.gather(*(write(n) for n in range(writers)))
    done.set()
    await asyncio.wait_for(poller, 60)
    assert seen == sorted(set(seen)) and len(seen) == writers * each  # in order, none twice, none lost


async def test_a_subjects_purge_leaves_only_that_it_was_erased(store: Stores):
    tenant = unique("purge")
    session = store.session(tenant, "agent-1")
    await session.write("alice", [Draft(Category.FACT, "Lyon", key="city"), Draft(Category.EVENT, "flew")])
    await session.write("bob", [Draft(Category.FACT, "Porto", key="city")])
    receipt = await session.erase("alice", ALL, EraseSelector(all_of_subject=True), EraseMode.PURGE)
    assert receipt.verified
    assert [(kind, memory_id) for kind, _, memory_id in await _log(store, tenant)] == [("subject_erased", "")]
    assert [kind for kind, _, _ in await _log(store, tenant, "bob")] == ["created"]


async def test_retention_prunes_up_to_a_horizon_below_which_no_cursor_resumes(store: Stores):
    tenant = unique("retain")
    session = store.session(tenant, "agent-1")
    await session.write("alice", [Draft(Category.EVENT, "old")])
    head = await session.change_head()
    sweeper = LifecycleSweeper(store.db, None, lambda _: TenantPolicy(), Scoring().half_life_days,
                               change_retention=timedelta(hours=1))
    await sweeper.sweep_tenant(tenant, datetime.now(UTC) + timedelta(hours=2))
    await session.write("alice", [Draft(Category.EVENT, "new")])
    with pytest.raises(FailedPrecondition) as refused:
        await session.changes_after(head - 1, ["alice"], 10)
    assert refused.value.reason == "CURSOR_EXPIRED"
    assert [c.kind for c in await session.changes_after(head, ["alice"], 10)] == [ChangeKind.CREATED]
    assert await session.change_head() > head

"""BM25's collection statistics kept with the writes (``keyword_stats``, migration 0017).

A keyword search reads N and the summed document length from rows the writes append, not
from a scan of every memory it may see. These tests hold the kept numbers to the scan's,
exactly, after every kind of change a memory goes through — and the scores with them — for
the reads a view and a request can make; and check that folding keeps them, that a purged
subject leaves no row and that the migration counts the memories stored before it.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from memoryd.domain import Category, Draft, EraseMode, EraseSelector, ReadFilter, Scope
from memoryd.storage import LocalKeyProvider, Postgres, Stores, PostgresSettings
from memoryd.storage.keywords._bm25 import FOLD_AT, _totals, fold_stats, keyword_search
from memoryd.storage.keywords._keywords import TermHasher
from memoryd.storage.postgres._migrate import available

from ..support import database_before, unique

HASHER = TermHasher(b"test-keyword-secret-0123456789ab")
KEYS = LocalKeyProvider(b"\x07" * 32)
EVERYTHING = tuple((c, ("*",)) for c in Category)
WORDS = "garden bees honey lyon paris train coffee tea python deadline launch budget review".split()
KEYED = [Category.FACT, Category.PREFERENCE, Category.GOAL, Category.CONTEXT]


def _store(db: Postgres) -> Stores:
    return Stores(db, HASHER, KEYS)


async def _totals_of(db: Postgres, tenant: str, flt: ReadFilter, now: datetime, *, kept: bool) -> tuple[float, float]:
    session = _store(db).session(tenant)
    flt = await session.labelled(flt)
    owners = [flt.subject, ""] if flt.include_org else [flt.subject]
    query, params = _totals(session, flt, owners, now, kept)
    async with db.tenant_tx(tenant) as conn:
        cur = await conn.execute(query, params)
        row = await cur.fetchone()
    assert row is not None
    return row["n"], row["len"]


async def _scores(db: Postgres, tenant: str, flt: ReadFilter, query: str, now: datetime,
                  *, kept: bool) -> list[tuple[str, float]]:
    flt = await _store(db).session(tenant).labelled(flt)
    async with db.tenant_tx(tenant) as conn:
        return await keyword_search(conn, flt, query, HASHER, 50, now, kept=kept)


async def _rows(db: Postgres, tenant: str) -> list[dict[str, Any]]:
    async with db.tenant_tx(tenant) as conn:
        cur = await conn.execute("SELECT subject, scope, session_id, category, docs, length FROM keyword_stats "
                                 "WHERE tenant_id = %s", (tenant,))
        return list(await cur.fetchall())


async def _churn(db: Postgres, tenant: str, rng: random.Random) -> None:
    """Memories of two subjects and the organisation, in sessions and not, of every category,
    with keys and tags; then every change a memory goes through: a new version of a key, an
    edit of the text (a new doc_len), a forget, a purge, TTLs and validity that lapse."""
    store = _store(db)
    now = datetime.now(UTC)
    for round_no in range(3):
        for subject in ("alice", "bob"):
            drafts = []
            for i in range(12):
                category = rng.choice(list(Category))
                scope = rng.choice([Scope.SUBJECT, Scope.SUBJECT, Scope.SESSION, Scope.ORG])
                drafts.append(Draft(
                    category, " ".join(rng.choices(WORDS, k=rng.randint(2, 9))) + f" r{round_no} n{i}",
                    scope=scope, session_id=rng.choice(["s1", "s2"]) if scope is Scope.SESSION else "",
                    key=f"k{rng.randint(0, 3)}" if category in KEYED else "",
                    tags=("work",) if rng.random() < 0.3 else (),
                    valid_until=now + timedelta(days=rng.choice([-2, 3])) if rng.random() < 0.2 else None))
            await store.session(tenant, "agent-1").write(subject, drafts)
    # And what each read of FILTERS is sure to see, whatever the random rounds wrote.
    await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.FACT, "lives near the garden", key="k1"), Draft(Category.EVENT, "coffee in the garden"),
        Draft(Category.PREFERENCE, "tea over coffee", key="k0", scope=Scope.SESSION, session_id="s2")])
    await store.session(tenant, "agent-1").write("bob", [
        Draft(Category.CONTEXT, "budget review ahead", key="k0"), Draft(Category.GOAL, "launch by june", key="k1"),
        Draft(Category.DECISION, "python for the launch"), Draft(Category.EVENT, "train to lyon", session_id="s1",
                                                                   scope=Scope.SESSION)])
    async with db.tenant_tx(tenant) as conn:
        cur = await conn.execute("SELECT id::text AS id, subject FROM memories "
                                 "WHERE tenant_id = %s AND status = 'active' "
                                 "ORDER BY created_at, id", (tenant,))
        active = list(await cur.fetchall())[:-7]  # the random rounds' memories
        # TTLs: some lapsed already, some later; and an edit that changes doc_len.
        for row in active[::5]:
            await conn.execute("UPDATE memories SET expires_at = %s WHERE tenant_id = %s AND id = %s",
                               (now + timedelta(hours=rng.choice([-1, 5])), tenant, row["id"]))
        await conn.execute("UPDATE memories SET doc_len = doc_len + 3 WHERE tenant_id = %s AND id = %s",
                           (tenant, active[1]["id"]))
    everything = ReadFilter(subject="alice", rules=EVERYTHING, include_org=True, any_session=True)
    alice = [r["id"] for r in active if r["subject"] == "alice"]
    session = store.session(tenant, "agent-1")
    await session.erase("alice", everything, EraseSelector(ids=tuple(alice[:3])), EraseMode.FORGET)
    await session.erase("alice", everything, EraseSelector(ids=tuple(alice[3:5])), EraseMode.PURGE)


FILTERS = {
    "everything of alice": ReadFilter(subject="alice", rules=EVERYTHING),
    "with the organisation, in session s1": ReadFilter(subject="alice", rules=EVERYTHING, include_org=True,
                                                       session_id="s1"),
    "every session": ReadFilter(subject="bob", rules=EVERYTHING, any_session=True),
    "two categories asked for": ReadFilter(subject="alice", rules=EVERYTHING,
                                           categories=(Category.EVENT, Category.FACT), include_org=True),
    "a view of some keys and one whole category": ReadFilter(
        subject="alice", include_org=True, session_id="s2",
        rules=((Category.FACT, ("k1", "k2")), (Category.PREFERENCE, ("k0",)), (Category.EVENT, ("*",)))),
    "a category both whole and by key": ReadFilter(
        subject="bob", rules=((Category.GOAL, ("k1",)), (Category.GOAL, ("*",)), (Category.DECISION, ("*",)))),
    "only some keys": ReadFilter(subject="bob", include_org=True, rules=((Category.CONTEXT, ("k0", "k3")),)),
    "keys asked for (a scan)": ReadFilter(subject="alice", rules=EVERYTHING, keys=("k1",)),
    "tags asked for (a scan)": ReadFilter(subject="alice", rules=EVERYTHING, tags=("work",)),
    "nothing readable": ReadFilter(subject="alice", rules=()),
}


async def test_kept_counts_are_exactly_the_scans_after_every_kind_of_change(db: Postgres) -> None:
    tenant = unique("kstats")
    await _churn(db, tenant, random.Random(14))
    now = datetime.now(UTC)
    for name, flt in FILTERS.items():
        for when in (now + timedelta(days=5), now + timedelta(days=1), now):  # more lapse later
            scanned = await _totals_of(db, tenant, flt, when, kept=False)
            assert await _totals_of(db, tenant, flt, when, kept=True) == scanned, name
        if name != "nothing readable":
            assert scanned[0] > 0, name  # each read sees something now, so the comparison means something
        kept_scores = await _scores(db, tenant, flt, "garden honey coffee budget", now, kept=True)
        assert kept_scores == await _scores(db, tenant, flt, "garden honey coffee budget", now, kept=False), name


async def test_what_a_view_cannot_read_moves_no_kept_count(db: Postgres) -> None:
    """Non-interference: another subject's, another session's and a hidden category's
    memories change nothing a reader of alice's events is given."""
    tenant, now = unique("kstats"), datetime.now(UTC)
    flt = ReadFilter(subject="alice", rules=((Category.EVENT, ("*",)),))
    store = _store(db)
    await store.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, "bees in the garden"),
                                                   Draft(Category.EVENT, "honey from the bees")])
    before = (await _totals_of(db, tenant, flt, now, kept=True), await _scores(db, tenant, flt, "bees", now, kept=True))
    await store.session(tenant, "agent-1").write("bob", [Draft(Category.EVENT, "bees bees bees everywhere today")])
    await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.FACT, "bees are my whole life", key="hobby"),
        Draft(Category.EVENT, "bees in session", scope=Scope.SESSION, session_id="s9"),
        Draft(Category.EVENT, "bees for everyone", scope=Scope.ORG)])
    after = (await _totals_of(db, tenant, flt, now, kept=True), await _scores(db, tenant, flt, "bees", now, kept=True))
    assert after == before
    assert before[0] == (2.0, before[0][1])


async def test_folding_leaves_one_row_per_group_and_the_same_totals(db: Postgres) -> None:
    tenant, now = unique("kstats"), datetime.now(UTC)
    store = _store(db)
    for i in range(5):
        await store.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, f"note {i} about the garden")])
    everything = ReadFilter(subject="alice", rules=EVERYTHING, any_session=True)
    session = store.session(tenant, "agent-1")
    ids = [r.memory_id for r in await session.write("alice", [Draft(Category.DECISION, "sell it")])]
    await session.erase("alice", everything, EraseSelector(ids=tuple(ids)), EraseMode.FORGET)
    before = await _totals_of(db, tenant, everything, now, kept=True)
    assert len(await _rows(db, tenant)) > 2
    async with db.tenant_tx(tenant) as conn:
        assert await fold_stats(conn) > 0
    rows = await _rows(db, tenant)
    # One row for the events; the decision, written and forgotten, sums to nothing and goes.
    assert [(r["category"], r["docs"]) for r in rows] == [("event", 5)]
    assert await _totals_of(db, tenant, everything, now, kept=True) == before == (5.0, before[1])
    async with db.tenant_tx(tenant) as conn:
        assert await fold_stats(conn) == 0  # nothing left to fold


async def test_writes_fold_their_subject_so_a_search_sums_few_rows(db: Postgres) -> None:
    tenant, now = unique("kstats"), datetime.now(UTC)
    store = _store(db)
    for i in range(FOLD_AT + 20):
        await store.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, f"visit {i} to the garden")])
    rows = await _rows(db, tenant)
    assert len(rows) <= FOLD_AT + 2  # two per one-item Write (its insert, its length); folded past FOLD_AT
    everything = ReadFilter(subject="alice", rules=EVERYTHING)
    assert await _totals_of(db, tenant, everything, now, kept=True) == await _totals_of(
        db, tenant, everything, now, kept=False)
    assert (await _totals_of(db, tenant, everything, now, kept=True))[0] == FOLD_AT + 20


async def test_folding_beside_concurrent_writes_loses_no_count(db: Postgres) -> None:
    tenant, now = unique("kstats"), datetime.now(UTC)
    store = _store(db)
    everything = ReadFilter(subject="alice", rules=EVERYTHING)

    async def writes() -> None:
        for i in range(15):
            await store.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, f"event {i} in paris")])

    async def folds() -> None:
        for _ in range(15):
            async with db.tenant_tx(tenant) as conn:
                await fold_stats(conn)
            await asyncio.sleep(0.005)

    await asyncio.gather(writes(), folds())
    assert await _totals_of(db, tenant, everything, now, kept=True) == await _totals_of(
        db, tenant, everything, now, kept=False)
    assert (await _totals_of(db, tenant, everything, now, kept=True))[0] == 15


async def test_a_purged_subject_leaves_no_kept_count(db: Postgres) -> None:
    tenant = unique("kstats")
    store = _store(db)
    await store.session(tenant, "agent-1").write("alice", [Draft(Category.EVENT, "a walk in lyon"),
                                                   Draft(Category.FACT, "lives in lyon", key="city")])
    await store.session(tenant, "agent-1").write("bob", [Draft(Category.EVENT, "a walk in paris")])
    everything = ReadFilter(subject="alice", rules=EVERYTHING, include_org=True, any_session=True)
    receipt = await store.session(tenant, "agent-1").erase("alice", everything, EraseSelector(all_of_subject=True),
                                EraseMode.PURGE)
    assert receipt.verified
    assert {r["subject"] for r in await _rows(db, tenant)} == {"bob"}


async def test_the_migration_counts_the_memories_stored_before_it(postgres: Any) -> None:
    tenants = [unique("kstats"), unique("kstats")]
    rng = random.Random(17)
    with database_before(postgres.owner_dsn, 17, "kstats", own_role=False) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            # Rows as the version before kept them (that code is gone): two tenants, every
            # owner, scope, category and status, some with lapsed validity.
            for tenant in tenants:
                with conn.transaction():
                    conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                    for _ in range(200):
                        scope = rng.choice(["subject", "session", "org"])
                        conn.execute(
                            "INSERT INTO memories (tenant_id, subject, scope, session_id, category, text, text_hash, "
                            "importance, confidence, stability, agent, source_kind, status, doc_len, valid_until) "
                            "VALUES (%s, %s, %s, %s, %s, '', '\\x00', 0.5, 1, 'stable', 'a', 'input', %s, %s, %s)",
                            (tenant, "" if scope == "org" else rng.choice(["alice", "bob"]), scope,
                             "s1" if scope == "session" else "", rng.choice(list(Category)).value,
                             rng.choice(["active", "active", "forgotten"]), rng.randint(1, 30),
                             datetime.now(UTC) - timedelta(days=1) if rng.random() < 0.2 else None))
        from memoryd.storage import migrate

        assert [m.version for m in await migrate(dsn)] == [m.version for m in available() if m.version >= 17]
        db = Postgres(PostgresSettings(dsn))
        await db.open()
        try:
            now = datetime.now(UTC)
            for tenant in tenants:
                for flt in (ReadFilter(subject="alice", rules=EVERYTHING, include_org=True, session_id="s1"),
                            ReadFilter(subject="bob", rules=EVERYTHING, categories=(Category.EVENT, Category.FACT))):
                    scanned = await _totals_of(db, tenant, flt, now, kept=False)
                    assert scanned[0] > 0
                    assert await _totals_of(db, tenant, flt, now, kept=True) == scanned
        finally:
            await db.close()

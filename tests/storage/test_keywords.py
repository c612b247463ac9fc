"""The keyword channel: tokenising, keyed term hashes, and BM25 in SQL under the read filter.

Memories are written through the store and indexed with ``replace_terms`` in a tenant
transaction, as the write path does. Every test works in fresh tenants of the suite's real
PostgreSQL.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from memoryd.domain import Category, Draft, EraseMode, EraseSelector, Internal, KeywordHit, ReadFilter, Scope
from memoryd.storage import LocalKeyProvider, Postgres, Stores
from memoryd.storage.postgres import TenantConn
from memoryd.storage.keywords._bm25 import B, K1, keyword_search
from memoryd.storage.keywords._keywords import TermHasher, delete_terms, replace_terms, tokenize

from ..support import unique

EVERYTHING = tuple((c, ("*",)) for c in Category)
HASHER = TermHasher(b"test-keyword-secret-0123456789ab")
KEYS = LocalKeyProvider(b"\x07" * 32)


def _store(db: Postgres) -> Stores:
    return Stores(db, HASHER, KEYS)


async def _remember(db: Postgres, tenant: str, subject: str, text: str, category: Category = Category.EVENT,
                    **fields: Any) -> str:
    """Write one memory through the store, then index it in a tenant transaction."""
    draft = Draft(category, text, **fields)
    [result] = await _store(db).session(tenant, "agent-1").write(subject, [draft])
    owner = "" if draft.scope is Scope.ORG else subject
    async with db.tenant_tx(tenant) as conn:
        await replace_terms(conn, owner, result.memory_id, draft.key, draft.text, HASHER)
    return result.memory_id


async def _search(db: Postgres, tenant: str, query: str, flt: ReadFilter | None = None, limit: int = 10,
                  now: datetime | None = None) -> list[KeywordHit]:
    flt = await _store(db).session(tenant).labelled(flt or ReadFilter(subject="alice", rules=EVERYTHING))
    async with db.tenant_tx(tenant) as conn:
        return await keyword_search(conn, flt, query, HASHER, limit, now or datetime.now(UTC))


async def _ids(db: Postgres, tenant: str, query: str, flt: ReadFilter | None = None) -> list[str]:
    return [hit.memory_id for hit in await _search(db, tenant, query, flt)]


async def test_rare_query_words_rank_above_a_common_word(db: Postgres) -> None:
    tenant = unique("kw")
    common = [await _remember(db, tenant, "alice", f"customer mentioned topic {i}") for i in range(6)]
    target = await _remember(db, tenant, "alice", "customer is allergic to peanuts")
    results = await _search(db, tenant, "customer allergic peanuts")
    assert results[0].memory_id == target
    assert {hit.memory_id for hit in results[1:]} == set(common)
    assert results[0].score > 2 * results[1].score


async def test_repeated_query_words_weigh_more(db: Postgres) -> None:
    tenant = unique("kw")
    python = await _remember(db, tenant, "alice", "writes python daily")
    rust = await _remember(db, tenant, "alice", "writes rust daily")
    assert (await _ids(db, tenant, "python python rust"))[0] == python
    assert (await _ids(db, tenant, "python rust rust"))[0] == rust


async def test_scores_follow_the_bm25_formula(db: Postgres) -> None:
    tenant = unique("kw")
    texts = ["tea in the morning, tea at noon", "coffee in the morning", "green tea with the neighbours tonight"]
    ids = [await _remember(db, tenant, "alice", text) for text in texts]
    docs = [Counter(tokenize(text)) for text in texts]
    avgdl = sum(sum(d.values()) for d in docs) / len(docs)
    query = Counter(tokenize("tea morning"))

    def bm25(doc: Counter[str]) -> float:
        score = 0.0
        for term, qtf in query.items():
            df = sum(1 for d in docs if term in d)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            tf, length = doc[term], sum(doc.values())
            score += qtf * idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl)) if tf else 0.0
        return score

    expected = sorted(((i, bm25(d)) for i, d in zip(ids, docs, strict=True)), key=lambda p: -p[1])
    got = await _search(db, tenant, "tea morning")
    assert [hit.memory_id for hit in got] == [i for i, _ in expected]
    assert [hit.score for hit in got] == pytest.approx([s for _, s in expected], rel=1e-9)


async def test_relevance_is_the_share_of_the_querys_term_weight_a_memory_matches(db: Postgres) -> None:
    tenant = unique("kw")
    texts = ["tea in the morning, tea at noon", "coffee in the morning", "green tea with the neighbours tonight"]
    ids = [await _remember(db, tenant, "alice", text) for text in texts]
    docs = [Counter(tokenize(text)) for text in texts]

    def idf(term: str) -> float:
        df = sum(1 for d in docs if term in d)
        return math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))

    for query in ("tea morning", "tea morning mongolia", "tea"):
        weight = sum(qtf * idf(term) for term, qtf in Counter(tokenize(query)).items())
        got = {hit.memory_id: hit for hit in await _search(db, tenant, query)}
        for hit in got.values():
            assert hit.relevance == pytest.approx(min(1.0, hit.score / weight), rel=1e-9)
    # A query word no memory holds weighs the most (the highest idf), so the same match is a
    # smaller share of that query; relevance never passes 1, however often a word repeats.
    both = {hit.memory_id: hit.relevance for hit in await _search(db, tenant, "tea morning")}
    diluted = {hit.memory_id: hit.relevance for hit in await _search(db, tenant, "tea morning mongolia")}
    assert diluted[ids[0]] < both[ids[0]] / 2
    assert all(0 < r <= 1 for r in [*both.values(), *diluted.values()])
    tea = {hit.memory_id: hit for hit in await _search(db, tenant, "tea")}
    assert tea[ids[0]].relevance == 1.0  # "tea" twice in a short memory: past the whole weight, capped


async def test_a_keyword_search_is_never_a_prepared_statement(db: Postgres) -> None:
    # psycopg prepares a statement after five runs on a connection, and Postgres may then keep
    # a generic plan, made without the tenant: for a tenant of 100,000 memories that plan took
    # 7.5 s where a plan for its own size takes 0.1 s (bench/RESULTS.md). Every keyword search
    # is planned for its own parameters.
    tenant = unique("kw")
    tea = await _remember(db, tenant, "alice", "tea in the morning")
    flt = await _store(db).session(tenant).labelled(ReadFilter(subject="alice", rules=EVERYTHING))
    async with db.tenant_tx(tenant) as conn:
        for _ in range(8):
            assert [hit.memory_id for hit in await keyword_search(conn, flt, "tea", HASHER, 10,
                                                                  datetime.now(UTC))] == [tea]
        cur = await conn.execute("SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE %s",
                                 ("%memory_terms%",))
        row = await cur.fetchone()
        assert row is not None and row["n"] == 0


async def test_chinese_query_finds_the_chinese_memory(db: Postgres) -> None:
    tenant = unique("kw")
    trip = await _remember(db, tenant, "alice", "我下个月要去上海出差")
    coding = await _remember(db, tenant, "alice", "我喜欢Python编程")
    await _remember(db, tenant, "alice", "likes hiking in the alps")
    assert await _ids(db, tenant, "上海出差") == [trip]
    assert await _ids(db, tenant, "下个月去哪里出差?") == [trip]
    assert await _ids(db, tenant, "编程") == [coding]
    assert await _ids(db, tenant, "python") == [coding]


async def test_limit_keeps_the_best(db: Postgres) -> None:
    tenant = unique("kw")
    best = await _remember(db, tenant, "alice", "tea tea tea")
    for i in range(4):
        await _remember(db, tenant, "alice", f"tea and biscuits number {i} with many other words around")
    results = await _search(db, tenant, "tea", limit=2)
    assert len(results) == 2 and results[0][0] == best


@pytest.mark.parametrize("query", ["", "the of and", "?!"], ids=["empty", "stopwords", "punctuation"])
async def test_query_without_terms_matches_nothing(db: Postgres, query: str) -> None:
    tenant = unique("kw")
    await _remember(db, tenant, "alice", "the of and ?! tea")
    assert await _search(db, tenant, query) == []


async def test_other_tenants_and_other_subjects_are_never_returned(db: Postgres) -> None:
    tenant, other_tenant = unique("kw"), unique("kw")
    own = await _remember(db, tenant, "alice", "prefers window seats on flights")
    await _remember(db, tenant, "bob", "prefers window seats on flights")
    await _remember(db, other_tenant, "alice", "prefers window seats on flights")
    assert await _ids(db, tenant, "window seats flights") == [own]
    # Naming the other tenant in the filter does not reach it either: RLS holds the tenant.
    flt = await _store(db).session(tenant).labelled(ReadFilter(subject="alice", rules=EVERYTHING))
    async with db.tenant_tx(tenant) as conn:
        misbound = TenantConn(conn.conn, other_tenant)  # the other tenant named, this one's transaction
        assert await keyword_search(misbound, flt, "window", HASHER, 10, datetime.now(UTC)) == []


async def test_scores_depend_only_on_memories_the_read_may_see(db: Postgres) -> None:
    tenant = unique("kw")
    await _remember(db, tenant, "alice", "booked a hotel in lisbon")
    await _remember(db, tenant, "alice", "likes quiet hotel rooms")
    before = await _search(db, tenant, "hotel lisbon")
    # The same words elsewhere: another subject, another category the view hides, forgotten.
    for _ in range(5):
        await _remember(db, tenant, "bob", "hotel lisbon hotel lisbon")
    await _remember(db, tenant, "alice", "hotel lisbon", category=Category.CONSTRAINT, key="stay")
    forgotten = await _remember(db, tenant, "alice", "hotel hotel lisbon")
    await _store(db).session(tenant, "agent-1").erase("alice", ReadFilter(subject="alice", rules=EVERYTHING),
                           EraseSelector(ids=(forgotten,)), EraseMode.FORGET)
    view = ReadFilter(subject="alice", rules=((Category.EVENT, ("*",)),))
    after = await _search(db, tenant, "hotel lisbon", view)
    assert [hit.memory_id for hit in after] == [hit.memory_id for hit in before]
    assert [hit.score for hit in after] == pytest.approx([hit.score for hit in before], rel=1e-12)
    assert [hit.relevance for hit in after] == pytest.approx([hit.relevance for hit in before], rel=1e-12)


async def test_forgotten_and_expired_memories_are_not_returned(db: Postgres) -> None:
    tenant, now = unique("kw"), datetime.now(UTC)
    current = await _remember(db, tenant, "alice", "membership renews in march")
    expired = await _remember(db, tenant, "alice", "membership discount code", valid_until=now - timedelta(days=1))
    later = await _remember(db, tenant, "alice", "membership trial ends", valid_until=now + timedelta(days=1))
    forgotten = await _remember(db, tenant, "alice", "membership cancelled")
    await _store(db).session(tenant, "agent-1").erase("alice", ReadFilter(subject="alice", rules=EVERYTHING),
                           EraseSelector(ids=(forgotten,)), EraseMode.FORGET)
    assert set(await _ids(db, tenant, "membership")) == {current, later}
    found_later = {hit.memory_id for hit in await _search(db, tenant, "membership", now=now + timedelta(days=2))}
    assert found_later == {current} and expired not in found_later


async def test_category_filter_applies(db: Postgres) -> None:
    tenant = unique("kw")
    fact = await _remember(db, tenant, "alice", "lives in lyon", category=Category.FACT, key="home_city")
    await _remember(db, tenant, "alice", "flew to lyon last week")
    flt = ReadFilter(subject="alice", categories=(Category.FACT,), rules=EVERYTHING)
    assert await _ids(db, tenant, "lyon", flt) == [fact]


@pytest.mark.parametrize(
    ("rules", "visible"),
    [
        (((Category.PREFERENCE, ("*",)),), {"preference"}),
        (((Category.FACT, ("home_*",)),), {"home-fact"}),
        ((), set()),
    ],
    ids=["one-category", "key-pattern", "no-rules"],
)
async def test_view_rules_apply(db: Postgres, rules: tuple[tuple[Category, tuple[str, ...]], ...],
                                visible: set[str]) -> None:
    tenant = unique("kw")
    ids = {
        "preference": await _remember(db, tenant, "alice", "coffee without sugar", Category.PREFERENCE, key="coffee"),
        "home-fact": await _remember(db, tenant, "alice", "coffee shop owner in lyon", Category.FACT, key="home_job"),
        "work-fact": await _remember(db, tenant, "alice", "coffee supplier", Category.FACT, key="work_vendor"),
        "event": await _remember(db, tenant, "alice", "spilled coffee on the laptop"),
    }
    found = set(await _ids(db, tenant, "coffee", ReadFilter(subject="alice", rules=rules)))
    assert found == {ids[name] for name in visible}


@pytest.mark.parametrize("include_org", [True, False], ids=["with-org", "without-org"])
async def test_org_memories_are_found_only_when_asked_for(db: Postgres, include_org: bool) -> None:
    tenant = unique("kw")
    own = await _remember(db, tenant, "alice", "expense reports are due friday")
    org = await _remember(db, tenant, "alice", "expense policy: receipts over 50 euros", scope=Scope.ORG)
    flt = ReadFilter(subject="alice", include_org=include_org, rules=EVERYTHING)
    assert set(await _ids(db, tenant, "expense", flt)) == ({own, org} if include_org else {own})


async def test_replace_terms_replaces_the_old_terms_and_sets_doc_len(db: Postgres) -> None:
    tenant = unique("kw")
    memory_id = await _remember(db, tenant, "alice", "drinks tea", Category.PREFERENCE, key="drink")
    async with db.tenant_tx(tenant) as conn:
        length = await replace_terms(conn, "alice", memory_id, "drink", "drinks black coffee", HASHER)
        cur = await conn.execute("SELECT doc_len FROM memories WHERE tenant_id = %s AND id = %s", (tenant, memory_id))
        row = await cur.fetchone()
    assert length == len(tokenize("drink drinks black coffee")) == row["doc_len"] == 4
    assert await _ids(db, tenant, "tea") == []
    assert await _ids(db, tenant, "coffee") == [memory_id]


async def test_replace_terms_refuses_a_memory_of_another_subject(db: Postgres) -> None:
    tenant = unique("kw")
    memory_id = await _remember(db, tenant, "alice", "drinks tea")
    with pytest.raises(Internal):
        async with db.tenant_tx(tenant) as conn:
            await replace_terms(conn, "bob", memory_id, "", "drinks tea", HASHER)


async def test_delete_terms_removes_the_rows_of_the_given_memories(db: Postgres) -> None:
    tenant = unique("kw")
    gone = await _remember(db, tenant, "alice", "plays chess on sundays")
    kept = await _remember(db, tenant, "alice", "plays chess badly")
    async with db.tenant_tx(tenant) as conn:
        assert await delete_terms(conn, [gone]) == len(set(tokenize("plays chess on sundays")))
        assert await delete_terms(conn, []) == 0
    assert await _ids(db, tenant, "chess") == [kept]


async def test_terms_never_outlive_their_memory(db: Postgres, postgres: Any) -> None:
    tenant = unique("kw")
    memory_id = await _remember(db, tenant, "alice", "collects vinyl records")
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn, autocommit=True) as owner:
        await owner.execute("DELETE FROM memories WHERE tenant_id = %s AND id = %s", (tenant, memory_id))
        cur = await owner.execute("SELECT count(*) FROM memory_terms WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone())[0] == 0


async def test_memory_terms_hold_no_plaintext(db: Postgres, postgres: Any) -> None:
    tenant = unique("kw")
    texts = ["Zanzibar holiday booked for Quetzalcoatl", "我下个月要去上海出差", "prefers marmalade"]
    for text in texts:
        await _remember(db, tenant, "alice", text, Category.PREFERENCE, key=f"secret_{len(text)}")
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn) as owner:
        cur = await owner.execute("SELECT * FROM memory_terms WHERE tenant_id = %s", (tenant,))
        rows = await cur.fetchall()
    dump = " ".join(str(value) for row in rows for value in row).casefold()
    words = {w.casefold() for text in texts for w in text.split()} | {t for text in texts for t in tokenize(text)}
    words |= {"secret", "上海", "出差", "zanzibar", "marmalad"}
    assert rows and not [w for w in words if w in dump]
    # What is there is exactly the keyed hashes of the terms.
    assert {row[3] for row in rows} == {HASHER.term(t) for text in texts for t in tokenize(f"secret_{len(text)} {text}")}


async def test_terms_are_invisible_without_the_tenant_setting(db: Postgres, postgres: Any) -> None:
    tenant = unique("kw")
    await _remember(db, tenant, "alice", "speaks portuguese")
    async with await psycopg.AsyncConnection.connect(postgres.app_dsn, autocommit=True) as app:
        cur = await app.execute("SELECT count(*) FROM memory_terms")
        assert (await cur.fetchone())[0] == 0
        cur = await app.execute(
            "SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE relname = 'memory_terms'"
        )
        assert (await cur.fetchone())[0] is True
    async with await psycopg.AsyncConnection.connect(postgres.app_dsn) as app:
        await app.execute("SELECT set_config('memoryd.tenant', %s, true)", (unique("kw"),))
        cur = await app.execute("SELECT count(*) FROM memory_terms WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone())[0] == 0
    async with await psycopg.AsyncConnection.connect(postgres.owner_dsn) as owner:
        cur = await owner.execute("SELECT count(*) FROM memory_terms WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone())[0] > 0

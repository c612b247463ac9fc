"""The one filter compiler, as a property: for random view rules over keys full of glob
metacharacters, labelled by the real store (``_labels``), Postgres's WHERE clause and the
Milvus expression admit exactly what the rules allow on the plaintext key — no store matches
a pattern — and the vector search returns the nearest of exactly that.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.domain import Category, Draft, EraseMode, EraseSelector, Page, ReadFilter, Scope, ViewRule
from memoryd.storage import LocalKeyProvider, MilvusIndex, Postgres, Stores, PostgresSettings, TermHasher
from memoryd.storage._filters import filter_expression

from .test_milvus_index import DIM, MODEL, NOW, blend, release_lite_server

# Keys a view's globs could confuse: `_` and `%` are LIKE wildcards, `.`/`-` are neighbours.
KEYS = ["billing_address", "billing-offshore", "billingXaddress", "billing_", "billing", "billing.x", "bill_ing",
        "iban", "iban_backup", "ibanx", "a_b", "a-b", "aXb", "a", "ab", "b_a", "x_y_z", "x-y-z", "50%", "5x0"]
CATEGORIES = [Category.FACT, Category.PREFERENCE]
PATTERN_PARTS = ["billing", "_", "*", "iban", "a", "b", "-", ".", "x", "y", "%", "5"]
EVERYTHING = tuple((c, ("*",)) for c in Category)


@dataclass
class Corpus:
    store: Stores
    index: MilvusIndex
    tenant: str
    rows: dict[str, tuple[Category, str, str]]  # id -> (category, key, subject)
    order: list[str]  # ids, nearest to the query first


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def corpus(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Corpus]:
    """Every key in every category, for alice and for the organisation, written through the
    real store and indexed from its rows; each memory's vector a little further from axis 0
    than the one before, so nearness has one order."""
    db = Postgres(PostgresSettings(postgres.owner_dsn))
    await db.open()
    store = Stores(db, TermHasher(b"test-keyword-secret-0123456789ab"), LocalKeyProvider(os.urandom(32)))
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    path = tmp_path_factory.mktemp("filters") / "f.db"
    index = MilvusIndex(str(path), model_id=MODEL, dim=DIM)
    rows: dict[str, tuple[Category, str, str]] = {}
    for scope in (Scope.SUBJECT, Scope.ORG):
        drafts = [Draft(category=c, text=f"{k} value", key=k, scope=scope, tags=(k, "shared"))
                  for c in CATEGORIES for k in KEYS]
        results = await store.session(tenant, "agent-1").write("alice", drafts)
        for draft, result in zip(drafts, results, strict=True):
            rows[result.memory_id] = (draft.category, draft.key, "" if scope is Scope.ORG else "alice")
    order = list(rows)
    indexed = {m.id: m for m, _ in await store.session(tenant).index_rows(order)}
    await index.partition(tenant).upsert([indexed[i] for i in order], [blend(0, 1, n / 100) for n in range(len(order))])
    yield Corpus(store, index, tenant, rows, order)
    await index.close()
    release_lite_server(path)
    await db.close()


def rules_allow(rules: tuple[tuple[Category, tuple[str, ...]], ...], category: Category, key: str) -> bool:
    """The oracle: the guard's own verdict on a plaintext key (a rule without patterns, or
    with ``*``, allows the whole category)."""
    return any(c is category and ("*" in patterns or not patterns or ViewRule(c, patterns).allows(category, key))
               for c, patterns in rules)


patterns = st.lists(st.sampled_from(PATTERN_PARTS), min_size=1, max_size=3).map("".join)
rule_sets = st.lists(st.tuples(st.sampled_from(CATEGORIES), st.lists(patterns, min_size=1, max_size=3)),
                     min_size=1, max_size=3).map(lambda rs: tuple((c, tuple(p)) for c, p in rs))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=rule_sets, include_org=st.booleans(), tag=st.sampled_from(["", "shared", "billing", "ab"]),
       limit=st.integers(1, 6))
@pytest.mark.asyncio(loop_scope="module")
async def test_both_stores_admit_exactly_what_the_rules_allow(corpus, rules, include_org, tag, limit):
    subjects = {"alice", ""} if include_org else {"alice"}
    exact = {i for i, (c, k, s) in corpus.rows.items()
             if s in subjects and rules_allow(rules, c, k) and (not tag or tag in ("shared", k))}
    flt = await corpus.store.session(corpus.tenant).labelled(ReadFilter(
        subject="alice", rules=rules, include_org=include_org, tags=(tag,) if tag else ()))

    listed = await corpus.store.session(corpus.tenant).list(flt, Page(size=1000))
    assert {m.id for m in listed.memories} == exact

    expression = filter_expression(corpus, flt, NOW)
    admitted = {str(r["id"]) for r in await corpus.index._run(lambda: corpus.index._connect().query(
        corpus.index.collection, filter=expression, output_fields=["id"], limit=1000))}
    assert admitted == exact

    own = corpus.index.partition(corpus.tenant)
    hits = [memory_id for memory_id, _, _ in await own.search(flt, blend(0, 1, 0.0), limit, NOW)]
    assert hits == [i for i in corpus.order if i in exact][:limit]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_index_and_the_tables_hold_labels_not_key_or_tag_names(corpus, postgres):
    """What the index keeps beside a vector, and the filter it is searched with, name no key
    or tag: a key or tag is a 32-hex-digit label there, and a glob is a list of labels."""
    rows = await corpus.index._run(lambda: corpus.index._connect().query(
        corpus.index.collection, filter=f'tenant == "{corpus.tenant}"', output_fields=["key", "tags"], limit=1000))
    assert rows and all(len(r["key"]) == 32 and r["key"] not in KEYS for r in rows)
    assert all(t not in KEYS + ["shared"] and len(t) == 32 for r in rows for t in r["tags"])
    flt = await corpus.store.session(corpus.tenant).labelled(ReadFilter(
        subject="alice", rules=((Category.FACT, ("billing*",)),), tags=("shared",)))
    expression = filter_expression(corpus, flt, NOW)
    assert "billing" not in expression and "shared" not in expression and "like" not in expression


async def test_a_glob_sees_keys_written_after_it_was_first_resolved_and_forgets_purged_ones(postgres):
    """Resolved key names are kept per process; what exists is asked every time, so a key
    another replica writes is matched at once, and one it purges is dropped (its name too)."""
    db = Postgres(PostgresSettings(postgres.owner_dsn))
    await db.open()
    provider = LocalKeyProvider(os.urandom(32))
    hasher = TermHasher(b"test-keyword-secret-0123456789ab")
    here, replica = Stores(db, hasher, provider), Stores(db, hasher, provider)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    globbed = ReadFilter(subject="alice", rules=((Category.PREFERENCE, ("billing_*",)),))

    async def keys_read() -> set[str]:
        return {m.key for m in (await here.session(tenant).list(globbed, Page(size=100))).memories}

    try:
        await here.session(tenant, "a").write("alice", [Draft(Category.PREFERENCE, "card", key="billing_method")])
        assert await keys_read() == {"billing_method"}
        await replica.session(tenant, "a").write("alice", [Draft(Category.PREFERENCE, "Lyon", key="billing_city"),
                                                   Draft(Category.PREFERENCE, "x", key="other")])
        assert await keys_read() == {"billing_method", "billing_city"}
        await replica.session(tenant, "a").erase("alice", ReadFilter(subject="alice", rules=EVERYTHING),
                            EraseSelector(key="billing_city"), EraseMode.PURGE)
        assert await keys_read() == {"billing_method"}
        [cached] = [entry for (t, _), entry in here.parts.names._cache.items() if t == tenant]
        assert sorted(cached.names.values()) == ["billing_method", "other"]
    finally:
        await db.close()

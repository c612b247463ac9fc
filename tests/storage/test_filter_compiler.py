"""The one filter compiler, as a property: for random view rules over keys full of glob
metacharacters, Postgres's WHERE clause admits exactly what the rules allow, the Milvus
expression admits at least that (never less), and the vector search — which re-checks
inexact hits — returns the nearest of exactly what the rules allow.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from memoryd.domain import Category, ReadFilter
from memoryd.storage import IndexedMemory, MilvusIndex
from memoryd.storage._filters import filter_expression, rules_allow, rules_condition

from .test_milvus_index import DIM, MODEL, NOW, RECENT, blend, release_lite_server

# Keys a view's globs could confuse: `_` and `%` are LIKE wildcards, `.`/`-` are neighbours.
KEYS = ["billing_address", "billing-offshore", "billingXaddress", "billing_", "billing", "billing.x", "bill_ing",
        "iban", "iban_backup", "ibanx", "a_b", "a-b", "aXb", "a", "ab", "b_a", "x_y_z", "x-y-z"]
CATEGORIES = [Category.FACT, Category.PREFERENCE]
PATTERN_PARTS = ["billing", "_", "*", "iban", "a", "b", "-", ".", "x", "y"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def corpus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[MilvusIndex, str, dict[str, tuple[Category, str]]]]:
    """Every key in every category, in one tenant of a real Milvus Lite index; each memory's
    vector a little further from axis 0 than the one before, so nearness has one order."""
    path = tmp_path_factory.mktemp("filters") / "f.db"
    index = MilvusIndex(str(path), model_id=MODEL, dim=DIM)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    rows: dict[str, tuple[Category, str]] = {}
    items, vectors = [], []
    for n, (category, key) in enumerate((c, k) for c in CATEGORIES for k in KEYS):
        memory_id = str(uuid.uuid4())
        rows[memory_id] = (category, key)
        items.append(IndexedMemory(memory_id, "alice", "subject", "", category.value, key, (), RECENT, None))
        vectors.append(blend(0, 1, n / 100))
    await index.upsert(tenant, items, vectors)
    yield index, tenant, rows
    await index.close()
    release_lite_server(path)


def postgres_admits(dsn: str, rules: tuple[tuple[Category, tuple[str, ...]], ...],
                    rows: dict[str, tuple[Category, str]]) -> set[str]:
    condition, params = rules_condition(rules)
    values = sql.SQL(", ").join(sql.SQL("(%s::uuid, %s, %s)") for _ in rows)
    query = sql.SQL("SELECT id::text FROM (VALUES {values}) AS memories(id, category, key) WHERE {condition}").format(
        values=values, condition=condition)
    flat = [v for memory_id, (category, key) in rows.items() for v in (memory_id, category.value, key)]
    with psycopg.connect(dsn) as conn:
        return {r[0] for r in conn.execute(query, [*flat, *params]).fetchall()}


patterns = st.lists(st.sampled_from(PATTERN_PARTS), min_size=1, max_size=3).map("".join)
rule_sets = st.lists(st.tuples(st.sampled_from(CATEGORIES), st.lists(patterns, min_size=1, max_size=3)),
                     min_size=1, max_size=3).map(lambda rs: tuple((c, tuple(p)) for c, p in rs))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=rule_sets, limit=st.integers(1, 6))
@pytest.mark.asyncio(loop_scope="module")
async def test_milvus_admits_a_superset_of_postgres_and_search_keeps_exactly_the_rules(corpus, postgres, rules, limit):
    index, tenant, rows = corpus
    exact = {i for i, (c, k) in rows.items() if rules_allow(rules, c, k)}
    assert postgres_admits(postgres.owner_dsn, rules, rows) == exact

    flt = ReadFilter(subject="alice", rules=rules)
    expression = filter_expression(tenant, flt, NOW)
    admitted = {str(r["id"]) for r in await index._run(lambda: index._connect().query(
        index.collection, filter=expression, output_fields=["id"], limit=1000))}
    assert admitted >= exact

    hits = [memory_id for memory_id, _, _ in await index.search(tenant, flt, blend(0, 1, 0.0), limit, NOW)]
    nearest = sorted(exact, key=lambda i: list(rows).index(i))[:limit]
    assert hits == nearest

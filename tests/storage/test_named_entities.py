"""Which entities a query names, among what the caller may read (``Stores.named_entities``).

Recall proposes the ``entity:`` tags a query's words would give and asks the store which of
them label a live memory that passes the read filter. A tag carried only by a memory the
filter hides, a forgotten or expired one, or another subject's, is not named: otherwise the
query's embedding and the lift would tell the caller it exists.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memoryd.domain import Category, Draft, ReadFilter
from memoryd.storage import LocalKeyProvider, Postgres, Stores
from memoryd.storage.keywords._keywords import TermHasher

from ..support import unique

HASHER = TermHasher(b"test-entities-secret-0123456789a")
KEYS = LocalKeyProvider(b"\x0a" * 32)
EVERYTHING = tuple((c, ("*",)) for c in Category)
NO_DECISIONS = tuple((c, ("*",)) for c in Category if c is not Category.DECISION)
ASKED = ["entity:ana", "entity:bo", "entity:cy", "entity:dee", "entity:eve", "entity:zed"]


@pytest.fixture
def store(db: Postgres) -> Stores:
    return Stores(db, HASHER, KEYS)


async def named(store: Stores, tenant: str, rules: Any = EVERYTHING, subject: str = "alice",
                tags: list[str] = ASKED) -> set[str]:
    return await store.session(tenant).named_entities(ReadFilter(subject=subject, rules=rules), tags, datetime.now(UTC))


async def test_only_tags_of_live_memories_the_filter_passes_are_named(store):
    tenant = unique("t")
    written = await store.session(tenant, "agent-1").write("alice", [
        Draft(Category.EVENT, "met Ana at the market", tags=("entity:ana", "market")),
        Draft(Category.DECISION, "Bo will lead the project", tags=("entity:bo",)),
        Draft(Category.EVENT, "Cy moved away", tags=("entity:cy",)),
        Draft(Category.EVENT, "Dee's visit", tags=("entity:dee",)),
        Draft(Category.EVENT, "untagged Eve"),
    ])
    await store.session(tenant, "agent-1").write("bob", [Draft(Category.EVENT, "Eve at bob's", tags=("entity:eve",))])
    async with store.db.tenant_tx(tenant) as conn:
        await conn.execute("UPDATE memories SET status = 'forgotten' WHERE tenant_id = %s AND id = %s",
                           (tenant, written[2].memory_id))
        await conn.execute("UPDATE memories SET expires_at = %s WHERE tenant_id = %s AND id = %s",
                           (datetime.now(UTC) - timedelta(minutes=1), tenant, written[3].memory_id))

    assert await named(store, tenant) == {"entity:ana", "entity:bo"}
    # The decision is outside this view: its tag is not named.
    assert await named(store, tenant, NO_DECISIONS) == {"entity:ana"}
    # Only what was asked about, and another subject's tags only for that subject.
    assert await named(store, tenant, tags=["entity:bo", "market"]) == {"entity:bo", "market"}
    assert await named(store, tenant, tags=[]) == set()
    assert await named(store, tenant, subject="bob") == {"entity:eve"}
    # Another tenant with the same tags names nothing here.
    assert await named(store, unique("t")) == set()

"""The size behind the large-tenant warning (``_tenant_size``): a tenant's active memories as the
writes keep them, read when a tenant is first indexed and again only once it can have passed
the limit — never on every batch — and one warning per tenant."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from memoryd.domain import Category, Draft, EraseMode, EraseSelector, ReadFilter, Scope
from memoryd.storage import LargeTenants, LocalKeyProvider, Postgres, Stores, TermHasher

from ..support import unique

HASHER = TermHasher(b"large-tenants-terms-secret-0123")
KEYS = LocalKeyProvider(b"\x05" * 32)
EVERYTHING = tuple((c, ("*",)) for c in Category)


class CountedSizes(LargeTenants):
    """Counts how often the size is read from Postgres."""

    reads = 0

    async def size(self, tenant: str) -> int:
        self.reads += 1
        return await super().size(tenant)


async def _notes(store: Stores, tenant: str, subject: str, n: int, **kwargs: Any) -> list[str]:
    written = await store.session(tenant, "agent-1").write(subject,
                                [Draft(Category.EVENT, f"{subject} note {i} {unique('n')}", **kwargs)
                                 for i in range(n)])
    return [r.memory_id for r in written]


async def test_the_size_is_every_active_memory_of_the_tenant_as_a_count_would_find(db: Postgres):
    store, tenant = Stores(db, HASHER, KEYS), unique("tenant")
    sizes = LargeTenants(store, 100)
    await _notes(store, tenant, "alice", 3)
    await _notes(store, tenant, "bob", 2, scope=Scope.SESSION, session_id="s1")
    await _notes(store, tenant, "", 1, scope=Scope.ORG)
    gone = await _notes(store, tenant, "alice", 2)
    await store.session(tenant, "agent-1").erase("alice", ReadFilter(subject="alice", rules=EVERYTHING, any_session=True),
                                                 EraseSelector(ids=tuple(gone)), EraseMode.FORGET)
    await _notes(store, unique("other"), "alice", 4)  # another tenant's count is not this one's
    assert await sizes.size(tenant) == await store.session(tenant).count_active() == 6


async def test_the_size_is_read_once_then_only_when_the_tenant_can_have_passed_the_limit(
        db: Postgres, caplog: pytest.LogCaptureFixture):
    store, tenant = Stores(db, HASHER, KEYS), unique("tenant")
    sizes = CountedSizes(store, 10)
    await _notes(store, tenant, "alice", 3)
    await sizes.indexed({tenant: 3})
    assert sizes.reads == 1  # first seen: 3, room for 7 more
    await _notes(store, tenant, "alice", 7)
    await sizes.indexed({tenant: 4})
    await sizes.indexed({tenant: 3})
    assert sizes.reads == 1  # 10: not past the limit, and no read needed to know it
    await _notes(store, tenant, "alice", 1)
    with caplog.at_level(logging.WARNING, logger="memoryd.storage.milvus"):
        await sizes.indexed({tenant: 1})
        assert sizes.reads == 2  # 11
        await _notes(store, tenant, "alice", 5)
        await sizes.indexed({tenant: 5})
    assert sizes.reads == 2  # warned: never read again in this process
    [warning] = [r for r in caplog.records if tenant in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert f"tenant {tenant} has 11 memories, more than 10 (MEMORYD_LITE_TENANT_WARNING)" in warning.getMessage()

"""The turns written next to a recalled turn (``Stores.neighbours``, migration 0019).

A turn is an episodic memory with a source turn id. Its neighbours are counted in the order
the turns were written, in its subject, scope and session, among what the read filter lets
through: a memory the caller may not read, a forgotten or expired one, a keyed fact or an
event without a turn id neither shows up nor takes a place.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memoryd.domain import Category, Draft, ReadFilter, Scope
from memoryd.storage import LocalKeyProvider, Postgres, Stores
from memoryd.storage.keywords._keywords import TermHasher

from ..support import unique

HASHER = TermHasher(b"test-neighbour-secret-0123456789")
KEYS = LocalKeyProvider(b"\x09" * 32)
EVERYTHING = tuple((c, ("*",)) for c in Category)
NO_DECISIONS = tuple((c, ("*",)) for c in Category if c is not Category.DECISION)


@pytest.fixture
def store(db: Postgres) -> Stores:
    return Stores(db, HASHER, KEYS)


def turn(text: str, turn_id: str, category: Category = Category.EVENT, **kwargs: Any) -> Draft:
    return Draft(category, text, source_turn_ids=(turn_id,) if turn_id else (), **kwargs)


async def conversation(store: Stores, tenant: str) -> dict[str, str]:
    """alice's turns t0–t5 in two Writes, with memories that are not her turns in between;
    returns each text's id."""
    first = [turn("t0 hello", "D1:0"), turn("t1 how was the trip", "D1:1"),
             Draft(Category.FACT, "f lives in Lyon", key="home_city"),
             turn("t2 what should I cook", "D1:2"),
             turn("d decided to sell the car", "D1:3", Category.DECISION),
             Draft(Category.EVENT, "e an event with no turn id")]
    second = [turn("t3 lasagne, grandma's recipe", "D1:4"), turn("t4 and a salad", "D1:5"),
              turn("t5 see you Saturday", "D1:6")]
    ids: dict[str, str] = {}
    for drafts in (first, second):
        results = await store.session(tenant, "agent-1").write("alice", drafts)
        ids.update((d.text.split()[0], r.memory_id) for d, r in zip(drafts, results, strict=True))
    # Another subject's and another session's turns, written after: never alice's neighbours.
    await store.session(tenant, "agent-1").write("bob", [turn("b0 bob's turn", "D1:7")])
    await store.session(tenant, "agent-1").write("alice", [turn("s0 a session turn", "D1:8", scope=Scope.SESSION,
                                                        session_id="s1")])
    return ids


async def around(store: Stores, tenant: str, ids: dict[str, str], anchor: str, *,
                 rules: tuple[tuple[Category, tuple[str, ...]], ...] = EVERYTHING, before: int = 1,
                 after: int = 2) -> list[tuple[str, int]]:
    names = {v: k for k, v in ids.items()}
    flt = ReadFilter(subject="alice", rules=rules)
    found = await store.session(tenant).neighbours(flt, [ids[anchor]], before, after, datetime.now(UTC))
    assert {a for _, a, _ in found} <= {ids[anchor]}
    return sorted(((names.get(m.id, m.text), place) for m, _, place in found), key=lambda pair: pair[1])


async def test_the_turns_around_a_turn_come_in_write_order_with_their_places(store):
    tenant = unique("t")
    ids = await conversation(store, tenant)

    assert await around(store, tenant, ids, "t2") == [("t1", -1), ("d", 1), ("t3", 2)]
    # Across the two Writes, and at the ends of the conversation.
    assert await around(store, tenant, ids, "t3", before=2, after=1) == [("t2", -2), ("d", -1), ("t4", 1)]
    assert await around(store, tenant, ids, "t0") == [("t1", 1), ("t2", 2)]
    assert await around(store, tenant, ids, "t5", before=1, after=3) == [("t4", -1)]
    assert await around(store, tenant, ids, "t2", before=0, after=0) == []


async def test_what_the_filter_hides_takes_no_place(store):
    tenant = unique("t")
    ids = await conversation(store, tenant)

    # Without decisions in the view, the next turn after t2 is t3: the decision is skipped,
    # not left as a gap (a world without it would give the same answer).
    assert await around(store, tenant, ids, "t2", rules=NO_DECISIONS) == [("t1", -1), ("t3", 1), ("t4", 2)]


async def test_forgotten_and_expired_turns_take_no_place(store, postgres):
    tenant = unique("t")
    ids = await conversation(store, tenant)
    async with store.db.tenant_tx(tenant) as conn:
        await conn.execute("UPDATE memories SET expires_at = %s WHERE tenant_id = %s AND id = %s",
                           (datetime.now(UTC) - timedelta(minutes=1), tenant, ids["t3"]))
        await conn.execute("UPDATE memories SET status = 'forgotten' WHERE tenant_id = %s AND id = %s",
                           (tenant, ids["t1"]))

    assert await around(store, tenant, ids, "t2", rules=NO_DECISIONS) == [("t0", -1), ("t4", 1), ("t5", 2)]


async def test_several_anchors_each_get_their_own_neighbours(store):
    tenant = unique("t")
    ids = await conversation(store, tenant)
    names = {v: k for k, v in ids.items()}
    flt = ReadFilter(subject="alice", rules=EVERYTHING)

    found = await store.session(tenant).neighbours(flt, [ids["t1"], ids["t4"]], 1, 1, datetime.now(UTC))

    assert sorted((names[anchor], names[m.id], place) for m, anchor, place in found) == [
        ("t1", "t0", -1), ("t1", "t2", 1), ("t4", "t3", -1), ("t4", "t5", 1)]
    # A turn next to two anchors comes once for each, with its place relative to each.
    found = await store.session(tenant).neighbours(flt, [ids["t2"], ids["t3"]], 1, 1, datetime.now(UTC))
    assert sorted((names[anchor], names[m.id], place) for m, anchor, place in found) == [
        ("t2", "d", 1), ("t2", "t1", -1), ("t3", "d", -1), ("t3", "t4", 1)]
    assert await store.session(tenant).neighbours(flt, [], 1, 2, datetime.now(UTC)) == []

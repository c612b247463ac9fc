"""The vector index on a real Milvus Lite: tenant isolation, the read filter as a Milvus
expression, literal matching of every value, reopening, routing modes and error translation.

Tests open Milvus Lite files under their ``tmp_path`` (the read-only filter and literal-matching
tests share one module-wide file, each in its own tenants), with small fake vectors (dim 8).
Expected results mirror ``memoryd.storage._filters.read_conditions``. The index stores what it
is given in ``key`` and ``tags`` (labels, in production) and is searched with a filter's labels;
these tests label with the identity, so key and tag values still reach the expression as they
are, and their literal matching is tested with hostile values.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from memoryd.domain import Category, Glob, Internal, ReadFilter, Unavailable
from memoryd.storage import IndexedMemory, MilvusIndex, collection_name, partition_name
from memoryd.storage.memories._labels import labels_for

from ..support import unique, wait_until

DIM = 8
MODEL = "test/model"
EVERYTHING = tuple((c, ("*",)) for c in Category)
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
RECENT = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
ROUTINGS = pytest.mark.parametrize("routing", ["partition", "partition_key"], ids=["partition", "partition-key"])


def axis(i: int) -> list[float]:
    """A unit vector along axis ``i``."""
    return [1.0 if j == i else 0.0 for j in range(DIM)]


def blend(i: int, j: int, weight: float) -> list[float]:
    """A unit vector between axes ``i`` and ``j``, closer to ``i`` for a smaller ``weight``."""
    raw = [(1.0 - weight) * a + weight * b for a, b in zip(axis(i), axis(j), strict=True)]
    length = sum(x * x for x in raw) ** 0.5
    return [x / length for x in raw]


# Every key name these tests give the index: what a glob is matched against when labelling.
NAMES: set[str] = set()


def memory(**fields: Any) -> IndexedMemory:
    values: dict[str, Any] = {
        "id": str(uuid.uuid4()), "subject": "alice", "scope": "subject", "session_id": "", "category": "fact",
        "key": "", "tags": (), "updated_at": RECENT, "valid_until": None,
    }
    values.update(fields)
    NAMES.add(values["key"])
    return IndexedMemory(**values)


def labelled(flt: ReadFilter) -> ReadFilter:
    """``flt`` labelled as the store would, with the identity for labels."""
    def matching(pattern: str) -> frozenset[str]:
        return frozenset(n for n in NAMES if n and Glob(pattern).matches(n))

    return flt if flt.labels is not None else replace(flt, labels=labels_for(flt, lambda value: value, matching))


def everything(subject: str = "alice", **fields: Any) -> ReadFilter:
    return labelled(ReadFilter(subject=subject, rules=EVERYTHING, **fields))


def release_lite_server(path: Path) -> None:
    """Stop pymilvus's in-process Milvus Lite server for ``path`` (it lives until process exit
    otherwise), as a process exit would."""
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(str(path))


@pytest.fixture
async def open_index(tmp_path: Path) -> AsyncIterator[Callable[..., MilvusIndex]]:
    """``open_index(path=..., model_id=..., dim=..., routing=...)``: every index opened is closed,
    and every Milvus Lite file's server released, at teardown."""
    opened: list[MilvusIndex] = []
    paths: set[Path] = set()

    def make(path: Path | None = None, *, model_id: str = MODEL, dim: int = DIM,
             routing: str = "partition") -> MilvusIndex:
        path = path or tmp_path / "m.db"
        index = MilvusIndex(str(path), model_id=model_id, dim=dim, routing=routing)
        opened.append(index)
        paths.add(path)
        return index

    yield make
    for index in opened:
        await index.close()
    for path in paths:
        release_lite_server(path)


@pytest.fixture
async def index(open_index: Callable[..., MilvusIndex]) -> MilvusIndex:
    return open_index()


async def found(index: MilvusIndex, tenant: str, flt: ReadFilter, *, now: datetime = NOW,
                vector: list[float] | None = None, limit: int = 100) -> set[str]:
    own = index.partition(tenant)
    return {memory_id for memory_id, _, _ in await own.search(labelled(flt), vector or axis(0), limit, now)}


async def seed(index: MilvusIndex, tenant: str, *items: IndexedMemory, vector: list[float] | None = None) -> None:
    await index.partition(tenant).upsert(list(items), [vector or axis(0) for _ in items])


# --- one tenant: upsert, search, vectors, count, delete ----------------------------------------

async def test_search_returns_the_nearest_vectors_first_with_cosine_similarity(index: MilvusIndex) -> None:
    tenant = unique("t")
    near, middle, far = memory(), memory(), memory()
    await index.partition(tenant).upsert([far, near, middle], [axis(1), axis(0), blend(0, 1, 0.5)])

    hits = await index.partition(tenant).search(everything(), axis(0), 10, NOW)

    assert [memory_id for memory_id, _, _ in hits] == [near.id, middle.id, far.id]
    scores = [score for _, score, _ in hits]
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert scores[1] == pytest.approx(0.5 ** 0.5, abs=1e-5)
    assert scores[2] == pytest.approx(0.0, abs=1e-5)
    assert hits[0][2] == pytest.approx(axis(0), abs=1e-6)
    nearest = await index.partition(tenant).search(everything(), axis(0), 1, NOW)
    assert [memory_id for memory_id, _, _ in nearest] == [near.id]


async def test_vectors_count_and_delete_work_by_id(index: MilvusIndex) -> None:
    tenant = unique("t")
    first, second, third = memory(), memory(), memory()
    await index.partition(tenant).upsert([first, second, third], [axis(0), axis(1), axis(2)])

    got = await index.partition(tenant).vectors([first.id, third.id, str(uuid.uuid4())])
    assert set(got) == {first.id, third.id}
    assert got[first.id] == pytest.approx(axis(0), abs=1e-6)
    assert got[third.id] == pytest.approx(axis(2), abs=1e-6)
    assert await index.partition(tenant).count() == 3
    assert await index.partition(tenant).count(ids=[first.id, second.id]) == 2
    assert await index.partition(tenant).count(ids=[]) == 0
    assert await index.partition(tenant).vectors([]) == {}

    assert await index.partition(tenant).delete([first.id]) == 1
    assert await index.partition(tenant).delete([]) == 0
    assert await index.partition(tenant).count() == 2
    assert await index.partition(tenant).vectors([first.id]) == {}
    assert first.id not in await found(index, tenant, everything())


async def test_upsert_of_an_existing_id_replaces_its_vector_and_fields(index: MilvusIndex) -> None:
    tenant = unique("t")
    item = memory(key="diet", category="preference", tags=("food",))
    await seed(index, tenant, item, vector=axis(0))

    await index.partition(tenant).upsert([replace(item, key="cuisine", tags=("cooking",))], [axis(3)])

    assert await index.partition(tenant).count() == 1
    assert (await index.partition(tenant).vectors([item.id]))[item.id] == pytest.approx(axis(3), abs=1e-6)
    assert await found(index, tenant, everything(keys=("diet",))) == set()
    assert await found(index, tenant, everything(tags=("food",))) == set()
    assert await found(index, tenant, everything(keys=("cuisine",), tags=("cooking",))) == {item.id}


@pytest.mark.parametrize("seal_between", [True, False], ids=["older-sealed", "both-unsealed"])
async def test_writing_a_memory_again_without_sealing_leaves_one_row_with_the_newer_vector(
        index: MilvusIndex, seal_between: bool) -> None:
    # The outbox worker writes with seal=False (on Milvus Lite, by insert: the newest version
    # of an id wins), so versions may sit in a sealed segment and in memory at once.
    tenant = unique("t")
    item = memory(key="diet", tags=("food",))
    await index.upsert_tenants({tenant: ([item], [axis(0)])}, seal=seal_between)
    await index.upsert_tenants({tenant: ([replace(item, key="cuisine")], [axis(3)])}, seal=False)

    for _ in range(2):  # before and after the seal
        assert await index.partition(tenant).count() == 1
        assert (await index.partition(tenant).vectors([item.id]))[item.id] == pytest.approx(axis(3), abs=1e-6)
        assert await found(index, tenant, everything(keys=("diet",))) == set()
        assert await found(index, tenant, everything(keys=("cuisine",))) == {item.id}
        await index.seal()


async def test_delete_subject_removes_only_that_subjects_vectors(index: MilvusIndex) -> None:
    tenant = unique("t")
    alice, bob = memory(subject="alice"), memory(subject="bob")
    await seed(index, tenant, alice, bob)

    assert await index.partition(tenant).delete_subject("alice") == 1

    assert await index.partition(tenant).count(subject="alice") == 0
    assert await index.partition(tenant).count(subject="bob") == 1


async def test_count_by_ids_and_subject_counts_either(index: MilvusIndex) -> None:
    """A purge of a whole subject reads back its ids and its subject with one count."""
    tenant = unique("t")
    alice, bob, carol = memory(subject="alice"), memory(subject="bob"), memory(subject="carol")
    await seed(index, tenant, alice, bob, carol)

    assert await index.partition(tenant).count(ids=[bob.id], subject="alice") == 2
    assert await index.partition(tenant).count(ids=[], subject="alice") == 1
    assert await index.partition(tenant).count(ids=[]) == 0
    assert await index.partition(tenant).count() == 3


async def test_a_tenant_that_never_wrote_has_nothing(index: MilvusIndex) -> None:
    await seed(index, unique("t"), memory())
    stranger = unique("t")

    assert await found(index, stranger, everything()) == set()
    assert await index.partition(stranger).count() == 0
    assert await index.partition(stranger).vectors([str(uuid.uuid4())]) == {}
    assert await index.partition(stranger).delete([str(uuid.uuid4())]) == 0
    assert await index.partition(stranger).delete_subject("alice") == 0


@pytest.mark.parametrize(
    "vectors", [[axis(0)[:7]], [axis(0), axis(1)]], ids=["wrong-dimension", "more-vectors-than-items"]
)
async def test_upsert_refuses_vectors_that_do_not_fit(index: MilvusIndex, vectors: list[list[float]]) -> None:
    tenant = unique("t")
    with pytest.raises(Internal):
        await index.partition(tenant).upsert([memory()], vectors)
    assert await index.partition(tenant).count() == 0


# --- tenant isolation ------------------------------------------------------------------------

@ROUTINGS
async def test_tenants_with_identical_vectors_never_see_each_others_ids(
    open_index: Callable[..., MilvusIndex], routing: str
) -> None:
    index = open_index(routing=routing)
    a, b = unique("tenant-a"), unique("tenant-b")
    a_items = [memory(key="home_city", tags=("x",)), memory(category="event"), memory(subject="", scope="org")]
    b_items = [replace(m, id=str(uuid.uuid4())) for m in a_items]  # the same fields, other ids
    a_ids, b_ids = [m.id for m in a_items], [m.id for m in b_items]
    await seed(index, a, *a_items)
    await seed(index, b, *b_items)

    for tenant, own, other in ((a, a_ids, b_ids), (b, b_ids, a_ids)):
        assert await found(index, tenant, everything(include_org=True)) == set(own)
        assert await index.partition(tenant).vectors(other) == {}
        assert set(await index.partition(tenant).vectors(own + other)) == set(own)
        assert await index.partition(tenant).count() == 3
        assert await index.partition(tenant).count(ids=other) == 0
        assert await index.partition(tenant).count(subject="alice") == 2

    assert await index.partition(b).delete(a_ids) == 0
    assert await index.partition(b).delete_subject("alice") == 2  # B's own two subject vectors
    assert await index.partition(a).count() == 3
    assert set(await index.partition(a).vectors(a_ids)) == set(a_ids)
    assert await found(index, a, everything(include_org=True)) == set(a_ids)


@pytest.mark.parametrize("routing", ["partition", "partition_key"], ids=["partition", "partition-key"])
def test_collection_name_carries_the_model_and_routing(routing: str) -> None:
    name = MilvusIndex("unused.db", model_id=MODEL, dim=DIM, routing=routing).collection
    assert name == collection_name(MODEL, routing)
    assert name.startswith("memoryd_test_model")
    assert name.endswith("_pk") == (routing == "partition_key")


@pytest.mark.parametrize(
    ("model_a", "model_b"),
    [
        ("test/model", "test/other"),
        ("org/model-v1", "org/model_v1"),
        ("openai/text-embedding-3-small", "openai/text.embedding.3.small"),
    ],
    ids=["different-names", "dash-or-underscore", "dash-or-dot"],
)
def test_collection_name_differs_per_model_id(model_a: str, model_b: str) -> None:
    for routing in ("partition", "partition_key"):
        assert collection_name(model_a, routing) != collection_name(model_b, routing)


async def test_each_model_has_its_own_collection_in_the_same_store(open_index: Callable[..., MilvusIndex]) -> None:
    small, large = open_index(model_id="test/model"), open_index(model_id="test/other", dim=4)
    tenant = unique("t")
    item = memory()
    await seed(small, tenant, item)

    assert small.collection != large.collection
    assert await large.partition(tenant).count() == 0
    assert await large.partition(tenant).search(everything(), [1.0, 0.0, 0.0, 0.0], 10, NOW) == []
    assert await small.partition(tenant).count() == 1


def test_partition_names_are_per_tenant_and_hide_the_tenant_id() -> None:
    a, b = partition_name("acme"), partition_name("globex")
    assert a != b
    assert a == partition_name("acme")
    assert "acme" not in a


@ROUTINGS
async def test_a_second_index_on_the_same_store_sees_tenants_the_first_created(
    open_index: Callable[..., MilvusIndex], routing: str
) -> None:
    # Two processes on one Milvus (a server replica and a `memoryd worker`, or two replicas):
    # the reader connected before the writer created the tenant's partition.
    reader = open_index(routing=routing)
    await reader.ping()
    writer = open_index(routing=routing)
    tenant = unique("t")
    item = memory()
    await seed(writer, tenant, item)

    assert await found(reader, tenant, everything()) == {item.id}
    assert await reader.partition(tenant).count(ids=[item.id]) == 1
    assert await reader.partition(tenant).delete([item.id]) == 1
    assert await writer.partition(tenant).count(ids=[item.id]) == 0


# --- the read filter as a Milvus expression ------------------------------------------------------

SEEDED: dict[str, dict[str, Any]] = {
    "home": {"category": "fact", "key": "home_city", "tags": ("travel", "work")},
    "pay": {"category": "preference", "key": "payment_method"},
    "plan": {"category": "preference", "key": "plan", "tags": ("work",)},
    "trip": {"category": "event", "tags": ("travel",)},
    "old": {"category": "fact", "key": "old_city", "updated_at": datetime(2020, 1, 1, tzinfo=UTC)},
    "later": {"category": "goal", "key": "trip", "valid_until": NOW + timedelta(days=30)},
    "expired": {"category": "goal", "key": "old_trip", "valid_until": NOW - timedelta(days=1)},
    "s1": {"category": "context", "key": "topic", "scope": "session", "session_id": "s1"},
    "s2": {"category": "context", "key": "topic", "scope": "session", "session_id": "s2"},
    "org": {"category": "fact", "key": "holiday_policy", "subject": "", "scope": "org"},
    "bob": {"category": "fact", "key": "home_city", "subject": "bob"},
}
ALICE_DEFAULT = {"home", "pay", "plan", "trip", "old", "later"}


@dataclass
class Seeded:
    index: MilvusIndex
    tenant: str
    ids: dict[str, str]

    async def names(self, flt: ReadFilter, now: datetime = NOW) -> set[str]:
        by_id = {v: k for k, v in self.ids.items()}
        return {by_id[memory_id] for memory_id in await found(self.index, self.tenant, flt, now=now)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_index(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MilvusIndex]:
    """One index for the read-only tests of this module (each seeds its own tenants)."""
    path = tmp_path_factory.mktemp("milvus") / "shared.db"
    index = MilvusIndex(str(path), model_id=MODEL, dim=DIM)
    yield index
    await index.close()
    release_lite_server(path)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seeded(shared_index: MilvusIndex) -> Seeded:
    tenant = unique("t")
    items = {name: memory(**fields) for name, fields in SEEDED.items()}
    await seed(shared_index, tenant, *items.values())
    # The same memories in a neighbouring tenant: no filter may ever reach them.
    await seed(shared_index, unique("t"), *(replace(m, id=str(uuid.uuid4())) for m in items.values()))
    return Seeded(shared_index, tenant, {name: m.id for name, m in items.items()})


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (everything(), ALICE_DEFAULT),
        (everything(include_org=True), ALICE_DEFAULT | {"org"}),
        (everything(session_id="s1"), ALICE_DEFAULT | {"s1"}),
        (everything(any_session=True), ALICE_DEFAULT | {"s1", "s2"}),
        (everything(session_id="s1", include_org=True), ALICE_DEFAULT | {"s1", "org"}),
        (everything(subject="bob"), {"bob"}),
        (everything(subject=""), set()),
        (everything(categories=(Category.PREFERENCE,)), {"pay", "plan"}),
        (everything(categories=(Category.FACT, Category.EVENT)), {"home", "old", "trip"}),
        (everything(keys=("home_city", "plan")), {"home", "plan"}),
        (everything(tags=("travel",)), {"home", "trip"}),
        (everything(tags=("travel", "work")), {"home"}),
        (everything(tags=("work", "unknown")), set()),
        (everything(updated_after=datetime(2024, 1, 1, tzinfo=UTC)), ALICE_DEFAULT - {"old"}),
        (everything(updated_before=datetime(2024, 1, 1, tzinfo=UTC)), {"old"}),
        (everything(updated_after=RECENT), ALICE_DEFAULT - {"old"}),
        (everything(updated_before=RECENT), {"old"}),
        (ReadFilter(subject="alice"), set()),
        (ReadFilter(subject="alice", rules=((Category.PREFERENCE, ("pay*",)),)), {"pay"}),
        (ReadFilter(subject="alice", rules=((Category.PREFERENCE, ("plan",)),)), {"plan"}),
        (ReadFilter(subject="alice", rules=((Category.PREFERENCE, ("pay*", "plan")),)), {"pay", "plan"}),
        (ReadFilter(subject="alice", rules=((Category.FACT, ("*",)), (Category.PREFERENCE, ("pay*",)))),
         {"home", "old", "pay"}),
        (ReadFilter(subject="alice", rules=((Category.FACT, ("home*",)),)), {"home"}),
        (ReadFilter(subject="alice", rules=((Category.FACT, ("*_city",)),)), {"home", "old"}),
        (ReadFilter(subject="alice", rules=((Category.EVENT, ()),)), {"trip"}),
        (ReadFilter(subject="alice", rules=((Category.CONTEXT, ("*",)),), session_id="s2"), {"s2"}),
        (ReadFilter(subject="alice", rules=((Category.FACT, ("*",)),), include_org=True), {"home", "old", "org"}),
    ],
    ids=[
        "subject-only", "include-org", "session-rule", "any-session", "session-and-org", "other-subject",
        "empty-subject-is-not-org", "one-category", "two-categories", "keys", "one-tag", "tags-contain-all",
        "tags-missing-one", "updated-after", "updated-before", "updated-after-is-inclusive",
        "updated-before-is-exclusive", "no-rules-reads-nothing", "rule-key-pattern", "rule-exact-key",
        "rule-two-patterns", "rules-combined", "rule-prefix", "rule-suffix", "rule-without-patterns",
        "rule-and-session", "rule-and-org",
    ],
)
async def test_search_applies_the_read_filter(seeded: Seeded, flt: ReadFilter, expected: set[str]) -> None:
    assert await seeded.names(flt) == expected


async def test_reads_straight_from_milvus_lite_answer_what_pymilvus_answers(
        index: MilvusIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recall's reads go straight to an in-process Milvus Lite's engine (no gRPC round trip):
    same hits, same order, same cosines and vectors as the same calls through pymilvus."""
    tenant = unique("t")
    items = {name: memory(**fields) for name, fields in SEEDED.items()}
    vectors = [blend(i % DIM, (i + 3) % DIM, 0.1 + 0.07 * i) for i in range(len(items))]
    await index.partition(tenant).upsert(list(items.values()), vectors)
    await seed(index, unique("t"), *(replace(m, id=str(uuid.uuid4())) for m in items.values()))
    ids = [m.id for m in items.values()] + [str(uuid.uuid4())]
    filters = [everything(), everything(include_org=True, any_session=True), everything(tags=("travel",)),
               ReadFilter(subject="alice", rules=((Category.FACT, ("*_city",)),))]

    async def answers() -> tuple[list[list[tuple[str, float, list[float]]]], dict[str, list[float]]]:
        found = [await index.partition(tenant).search(labelled(flt), blend(1, 2, 0.3), 5, NOW) for flt in filters]
        return found, await index.partition(tenant).vectors(ids)

    assert index._engine() is not None
    direct = await answers()
    monkeypatch.setattr(MilvusIndex, "_engine", lambda self: None)
    through_pymilvus = await answers()
    assert [[hit_id for hit_id, _, _ in hits] for hits in direct[0]] == \
        [[hit_id for hit_id, _, _ in hits] for hits in through_pymilvus[0]]
    assert [len(hits) for hits in direct[0]] == [5, 5, 2, 2]
    for hits, expected in zip(direct[0], through_pymilvus[0], strict=True):
        for (_, cosine, vector), (_, cosine_expected, vector_expected) in zip(hits, expected, strict=True):
            assert cosine == pytest.approx(cosine_expected, abs=1e-6)
            assert vector == pytest.approx(vector_expected, abs=1e-6)
    assert set(direct[1]) == set(through_pymilvus[1]) == set(ids[:-1])
    for memory_id, vector in direct[1].items():
        assert vector == pytest.approx(through_pymilvus[1][memory_id], abs=1e-6)


async def test_expired_vectors_are_not_returned(seeded: Seeded) -> None:
    assert "expired" not in await seeded.names(everything())
    assert "expired" in await seeded.names(everything(), now=NOW - timedelta(days=2))
    assert "later" not in await seeded.names(everything(), now=NOW + timedelta(days=31))


async def test_a_vector_expired_a_second_ago_is_not_returned(index: MilvusIndex) -> None:
    tenant = unique("t")
    item = memory(valid_until=NOW - timedelta(seconds=1))
    await seed(index, tenant, item)

    assert await found(index, tenant, everything(), now=NOW) == set()
    assert await found(index, tenant, everything(), now=NOW - timedelta(seconds=2)) == {item.id}


async def test_a_vector_valid_until_later_in_the_same_second_is_returned(index: MilvusIndex) -> None:
    # Postgres keeps it (valid_until > now); the index must not be narrower.
    tenant = unique("t")
    now = datetime(2025, 6, 1, 12, 0, 0, 100_000, tzinfo=UTC)
    item = memory(valid_until=now + timedelta(milliseconds=500))
    await seed(index, tenant, item)

    assert await found(index, tenant, everything(), now=now) == {item.id}


async def test_updated_before_later_in_the_same_second_keeps_the_vector(index: MilvusIndex) -> None:
    # Postgres keeps it (updated_at < updated_before); the index must not be narrower.
    tenant = unique("t")
    updated = datetime(2025, 5, 1, 9, 30, 0, 300_000, tzinfo=UTC)
    item = memory(updated_at=updated)
    await seed(index, tenant, item)

    assert await found(index, tenant, everything(updated_before=updated + timedelta(milliseconds=300))) == {item.id}


async def test_updated_after_earlier_in_the_same_second_keeps_the_vector(index: MilvusIndex) -> None:
    tenant = unique("t")
    updated = datetime(2025, 5, 1, 9, 30, 0, 600_000, tzinfo=UTC)
    item = memory(updated_at=updated)
    await seed(index, tenant, item)

    assert await found(index, tenant, everything(updated_after=updated - timedelta(milliseconds=300))) == {item.id}


# --- every value is matched literally --------------------------------------------------------------

TRICKY = ['"', "\\", "\\\\", '\\"', '" or true or "', '") or (true', "a\"b", "a\\\"b", "x\\", "中文", "中",
          "'", "%", "*", "_", "' or '1'='1", "emoji 🧠", "tag with spaces"]
TRICKY_IDS = ["quote", "backslash", "two-backslashes", "escaped-quote", "or-true", "paren-or-true", "inner-quote",
              "inner-escaped-quote", "trailing-backslash", "chinese", "one-chinese-char", "single-quote", "percent",
              "star", "underscore", "sql-style", "emoji", "spaces"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tricky(shared_index: MilvusIndex) -> Seeded:
    """One memory per tricky value (as its only tag and as its key), plus a plain decoy, and the
    same in a neighbouring tenant."""
    tenant = unique("t")
    items = {value: memory(key=value, tags=(value,), category="preference") for value in TRICKY}
    items["decoy"] = memory(key="decoy", tags=("decoy",), category="preference")
    await seed(shared_index, tenant, *items.values())
    await seed(shared_index, unique("t"), *(replace(m, id=str(uuid.uuid4())) for m in items.values()))
    return Seeded(shared_index, tenant, {name: m.id for name, m in items.items()})


@pytest.mark.parametrize("value", TRICKY, ids=TRICKY_IDS)
async def test_a_tag_is_matched_literally(tricky: Seeded, value: str) -> None:
    assert await tricky.names(everything(tags=(value,))) == {value}
    assert await tricky.names(everything(tags=(value, "decoy"))) == set()


@pytest.mark.parametrize("value", TRICKY, ids=TRICKY_IDS)
async def test_a_key_is_matched_literally(tricky: Seeded, value: str) -> None:
    assert await tricky.names(everything(keys=(value,))) == {value}


# Not the wildcards, and not the backslash: Milvus's `like` may take it as its escape character
# (engine-dependent). Keys and key patterns are validated to [A-Za-z0-9._:/-] before they get here.
PLAIN_PATTERNS = [(v, i) for v, i in zip(TRICKY, TRICKY_IDS, strict=True) if not set(v) & set("%*_\\")]


@pytest.mark.parametrize("value", [v for v, _ in PLAIN_PATTERNS], ids=[i for _, i in PLAIN_PATTERNS])
async def test_a_key_pattern_without_wildcards_matches_only_that_key(tricky: Seeded, value: str) -> None:
    rules = ((Category.PREFERENCE, (value,)),)
    assert await tricky.names(ReadFilter(subject="alice", rules=rules)) == {value}


@pytest.mark.parametrize(
    "subject",
    ['alice" or subject != "', 'alice\\" or subject != \\"', "alice' or '1'='1", '" or true or "', "alice\\"],
    ids=["or-other-subject", "escaped-or", "sql-style", "or-true", "trailing-backslash"],
)
async def test_a_subject_value_never_widens_the_search(tricky: Seeded, subject: str) -> None:
    assert await tricky.names(everything(subject=subject)) == set()
    assert await tricky.names(everything(subject=subject, include_org=True, any_session=True)) == set()


@pytest.mark.parametrize(
    "session_id", ['s" or scope == "session', '" or true or "'], ids=["or-session-scope", "or-true"]
)
async def test_a_session_value_never_widens_the_search(seeded: Seeded, session_id: str) -> None:
    assert await seeded.names(everything(session_id=session_id)) == ALICE_DEFAULT


@ROUTINGS
async def test_a_tenant_value_never_reaches_another_tenant(
    open_index: Callable[..., MilvusIndex], routing: str
) -> None:
    index = open_index(routing=routing)
    victim = unique("t")
    item = memory()
    await seed(index, victim, item)

    for tenant in (f'{victim}" or tenant != "', '" or true or "', f"{victim}\\"):
        assert await found(index, tenant, everything()) == set()
        assert await index.partition(tenant).count() == 0
        assert await index.partition(tenant).vectors([item.id]) == {}
        assert await index.partition(tenant).delete([item.id]) == 0
        assert await index.partition(tenant).delete_subject("alice") == 0
    assert await index.partition(victim).count(ids=[item.id]) == 1


@pytest.mark.parametrize(
    "value", ['" or true or "', f'{uuid.uuid4()}" or id != "', "\\"], ids=["or-true", "or-other-id", "backslash"]
)
async def test_an_id_value_never_widens_vectors_count_or_delete(index: MilvusIndex, value: str) -> None:
    tenant = unique("t")
    item = memory()
    await seed(index, tenant, item)

    assert await index.partition(tenant).vectors([value]) == {}
    assert await index.partition(tenant).count(ids=[value]) == 0
    assert await index.partition(tenant).delete([value]) == 0
    assert await index.partition(tenant).delete_subject('" or true or "') == 0
    assert await index.partition(tenant).count(subject='alice" or subject != "') == 0
    assert await index.partition(tenant).count() == 1


CONTROL_CASES: list[tuple[str, Callable[[MilvusIndex, str], Awaitable[object]]]] = [
    ("tag-newline", lambda ix, t: ix.partition(t).search(everything(tags=("a\nb",)), axis(0), 5, NOW)),
    ("key-nul", lambda ix, t: ix.partition(t).search(everything(keys=("a\x00",)), axis(0), 5, NOW)),
    ("subject-unit-separator", lambda ix, t: ix.partition(t).search(everything(subject="alice\x1f"), axis(0), 5, NOW)),
    ("session-delete-char", lambda ix, t: ix.partition(t).search(everything(session_id="s\x7f"), axis(0), 5, NOW)),
    ("tenant-carriage-return", lambda ix, t: ix.partition(t + "\r").search(everything(), axis(0), 5, NOW)),
    ("delete-id", lambda ix, t: ix.partition(t).delete(["x\n"])),
    ("delete-subject", lambda ix, t: ix.partition(t).delete_subject("alice\n")),
    ("count-subject", lambda ix, t: ix.partition(t).count(subject="\x1b[31m")),
    ("count-ids", lambda ix, t: ix.partition(t).count(ids=["\x00"])),
    ("vectors-id", lambda ix, t: ix.partition(t).vectors(["\x07"])),
]


@pytest.mark.parametrize("call", [c for _, c in CONTROL_CASES], ids=[i for i, _ in CONTROL_CASES])
async def test_control_characters_are_refused(index: MilvusIndex,
                                              call: Callable[[MilvusIndex, str], Awaitable[object]]) -> None:
    tenant = unique("t")
    await seed(index, tenant, memory())

    with pytest.raises(Internal):
        await call(index, tenant)
    assert await index.partition(tenant).count() == 1  # nothing was deleted, and the index still works


# --- reopening, routing, unreachable and remote Milvus -------------------------------------------

async def test_reopening_the_same_file_still_finds_the_data(tmp_path: Path) -> None:
    path = tmp_path / "reopen.db"
    tenant = unique("t")
    item = memory(key="home_city")
    first = MilvusIndex(str(path), model_id=MODEL, dim=DIM)
    try:
        await seed(first, tenant, item)
    finally:
        await first.close()
        release_lite_server(path)  # as if the process had exited

    second = MilvusIndex(str(path), model_id=MODEL, dim=DIM)
    try:
        assert await found(second, tenant, everything(keys=("home_city",))) == {item.id}
        assert await second.partition(tenant).count() == 1
        assert (await second.partition(tenant).vectors([item.id]))[item.id] == pytest.approx(axis(0), abs=1e-6)
        # Writing again after a reopen (the tenant's partition already exists) works too.
        another = memory()
        await seed(second, tenant, another, vector=axis(1))
        assert await second.partition(tenant).count() == 2
    finally:
        await second.close()
        release_lite_server(path)


async def test_partition_key_mode_keeps_its_own_collection(open_index: Callable[..., MilvusIndex]) -> None:
    by_partition, by_key = open_index(routing="partition"), open_index(routing="partition_key")
    tenant = unique("t")
    item = memory()
    await seed(by_key, tenant, item)

    assert by_key.collection == by_partition.collection + "_pk"
    assert await found(by_key, tenant, everything()) == {item.id}
    assert await by_partition.partition(tenant).count() == 0


def test_an_unknown_routing_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="routing"):
        MilvusIndex("unused.db", model_id=MODEL, dim=DIM, routing="sharded")


UNREACHABLE_CALLS: list[tuple[str, Callable[[MilvusIndex], Awaitable[object]]]] = [
    ("ping", lambda ix: ix.ping()),
    ("upsert", lambda ix: ix.partition("t").upsert([memory()], [axis(0)])),
    ("search", lambda ix: ix.partition("t").search(everything(), axis(0), 5, NOW)),
    ("vectors", lambda ix: ix.partition("t").vectors([str(uuid.uuid4())])),
    ("count", lambda ix: ix.partition("t").count()),
    ("delete", lambda ix: ix.partition("t").delete([str(uuid.uuid4())])),
    ("delete-subject", lambda ix: ix.partition("t").delete_subject("alice")),
]


@pytest.mark.parametrize("call", [c for _, c in UNREACHABLE_CALLS], ids=[i for i, _ in UNREACHABLE_CALLS])
async def test_an_unreachable_remote_raises_unavailable(call: Callable[[MilvusIndex], Awaitable[object]]) -> None:
    index = MilvusIndex("http://127.0.0.1:1", model_id=MODEL, dim=DIM)
    try:
        with pytest.raises(Unavailable) as caught:
            await call(index)
        assert type(caught.value) is Unavailable
        # Still Unavailable on the next call (it tries to reconnect, and fails the same way).
        with pytest.raises(Unavailable):
            await index.ping()
    finally:
        await index.close()


async def test_a_collection_still_loading_makes_the_index_unavailable_not_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Milvus server restarted with many segments loads a collection for minutes; pymilvus
    gives up waiting after the call's timeout. That is an outage to wait out (a server
    starting meanwhile is not ready yet), not a refusal, which stopped the server's start."""
    from pymilvus.exceptions import MilvusException

    def still_loading(self: MilvusIndex) -> object:
        raise MilvusException(message=f"wait for loading collection timeout, collection: {self.collection}")

    monkeypatch.setattr(MilvusIndex, "_connect", still_loading)
    index = MilvusIndex("http://127.0.0.1:1", model_id=MODEL, dim=DIM)
    try:
        with pytest.raises(Unavailable) as caught:
            await index.ping()
        assert type(caught.value) is Unavailable
    finally:
        await index.close()


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_accepting(process: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    def accepting() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"milvus-lite server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_until(accepting, timeout, 0.1, what=f"milvus-lite server listens on 127.0.0.1:{port}")


async def test_a_remote_milvus_lite_server_serves_upsert_and_search(tmp_path: Path) -> None:
    port = free_loopback_port()
    log = tmp_path / "milvus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(tmp_path / "remote"),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_until_accepting(process, port, timeout=60)
        index = MilvusIndex(f"http://127.0.0.1:{port}", model_id=MODEL, dim=DIM)
        try:
            a, b = unique("t"), unique("t")
            near, far, other = memory(key="home_city"), memory(), memory()
            await index.partition(a).upsert([near, far], [axis(0), axis(1)])
            await seed(index, b, other)

            hits = await index.partition(a).search(everything(), axis(0), 10, NOW)
            assert [memory_id for memory_id, _, _ in hits] == [near.id, far.id]
            assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
            assert await found(index, a, everything(keys=("home_city",))) == {near.id}
            assert await index.partition(a).count() == 2
            assert await index.partition(a).vectors([other.id]) == {}
        finally:
            await index.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- physical erasure: compaction of what was deleted -----------------------------------------

def file_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


def random_vector(seed: int) -> list[float]:
    import random

    rng = random.Random(seed)
    raw = [rng.uniform(-1, 1) for _ in range(DIM)]
    length = sum(x * x for x in raw) ** 0.5
    return [x / length for x in raw]


@ROUTINGS
async def test_compact_removes_deleted_rows_from_every_file_of_milvus_lite(
        open_index: Callable[..., MilvusIndex], tmp_path: Path, routing: str,
        caplog: pytest.LogCaptureFixture) -> None:
    import struct

    index = MilvusIndex(str(tmp_path / "m.db"), model_id=MODEL, dim=DIM, routing=routing)
    tenant, other = unique("t"), unique("t")
    gone = [memory(subject="subject-gone-7f3a", key=f"key-gone-{i}", tags=(f"tag-gone-{i}",)) for i in range(3)]
    kept = memory(subject="subject-kept-2b9c", key="key-kept")
    neighbour = memory(subject="subject-gone-7f3a", key="key-neighbour")
    vectors = {m.id: random_vector(i) for i, m in enumerate([*gone, kept, neighbour])}
    for m in [*gone, kept]:  # one segment per write, as the outbox seals them
        await index.partition(tenant).upsert([m], [vectors[m.id]])
    await index.partition(tenant).upsert([gone[0]], [vectors[gone[0].id]])  # a re-index: an older copy too
    await index.partition(other).upsert([neighbour], [vectors[neighbour.id]])
    stored = await index.partition(tenant).vectors([m.id for m in gone])

    await index.partition(tenant).delete([gone[0].id])
    await index.partition(tenant).delete_subject("subject-gone-7f3a")
    # A delete alone is a tombstone: the rows are still in the files, and the log says in
    # which kind of file (not which ids, nor which partition).
    assert await index.residue([m.id for m in gone]) == {m.id for m in gone}
    [logged] = [r.getMessage() for r in caplog.records if "still in Milvus Lite files" in r.getMessage()]
    assert "partitions/data .parquet" in logged and gone[0].id not in logged
    # Asked again, the files' keys are remembered (unchanged files): found all the same.
    assert await index.residue([gone[1].id, str(uuid.uuid4())]) == {gone[1].id}

    assert await index.compact()

    assert await index.residue([m.id for m in gone]) == set()
    assert await index.residue([kept.id, neighbour.id]) == {kept.id, neighbour.id}
    on_disk = file_bytes(tmp_path / "m.db")
    for m in gone:
        assert m.id.encode() not in on_disk
        assert m.key.encode() not in on_disk and m.tags[0].encode() not in on_disk
        assert struct.pack(f"<{DIM}f", *stored[m.id]) not in on_disk
    assert struct.pack(f"<{DIM}f", *vectors[kept.id]) in on_disk
    assert await index.partition(tenant).count() == 1
    assert await index.partition(other).vectors([neighbour.id]) == {neighbour.id: pytest.approx(vectors[neighbour.id])}
    assert await found(index, tenant, everything("subject-kept-2b9c")) == {kept.id}

    # Reopened (the tombstones are gone from disk too): nothing deleted comes back.
    await index.close()  # by hand: open_index would close it again
    release_lite_server(tmp_path / "m.db")
    reopened = open_index(routing=routing)
    assert await reopened.partition(tenant).count() == 1
    assert await reopened.partition(tenant).vectors([m.id for m in gone]) == {}
    assert await found(reopened, tenant, everything("subject-kept-2b9c")) == {kept.id}


async def test_a_sidecar_built_for_a_compacted_segment_is_removed_before_the_check(
        open_index: Callable[..., MilvusIndex], tmp_path: Path) -> None:
    """Lite builds segment indexes in the background, outside its maintenance lock. A purge
    that compacts a segment while its index is being built sees the build write a sidecar —
    the erased vectors — for the segment that is gone: the check waits for the build and
    removes that sidecar instead of reporting the purge unverified (or leaving it behind)."""
    import asyncio
    import threading

    from memoryd.storage.vectors import _lite_compaction as lite

    index = open_index()
    tenant = unique("t")
    kept, gone = memory(subject="subject-kept"), memory(subject="subject-gone")
    await index.partition(tenant).upsert([kept], [random_vector(1)])  # creates and loads the collection
    collection = lite.lite_collection(index.uri, index.collection)
    collection._wait_for_bg(timeout=30)
    may_build, built, may_finish = threading.Event(), threading.Event(), threading.Event()
    build = collection._build_or_load_segment_index

    def held_build(segment: Any, spec: Any) -> Any:
        if built.is_set():
            return build(segment, spec)
        assert may_build.wait(30)
        try:
            return build(segment, spec)  # writes the sidecar of a segment compacted away
        finally:
            built.set()
            may_finish.wait(30)

    collection._build_or_load_segment_index = held_build
    try:
        await index.partition(tenant).upsert([gone], [random_vector(2)])  # sealed: the build starts and waits
        await index.partition(tenant).delete([gone.id])
        assert await index.compact()  # the segment is rewritten while its build is in flight
        may_build.set()
        assert await asyncio.to_thread(built.wait, 30)
        sidecars = {p.name.split(".")[0] for p in (tmp_path / "m.db").rglob("*.idx")}
        segments = {p.stem for p in (tmp_path / "m.db").rglob("*.parquet")}
        assert sidecars - segments, "the build wrote no sidecar for the removed segment"

        check = asyncio.create_task(index.residue([gone.id]))
        await asyncio.sleep(0.5)  # the build still runs: the check waits for it
        may_finish.set()
        assert await check == set()
    finally:
        may_build.set()
        may_finish.set()
        collection._build_or_load_segment_index = build
    sidecars = {p.name.split(".")[0] for p in (tmp_path / "m.db").rglob("*.idx")}
    assert sidecars <= {p.stem for p in (tmp_path / "m.db").rglob("*.parquet")}
    assert set(await index.partition(tenant).vectors([kept.id, gone.id])) == {kept.id}


async def test_compact_on_a_milvus_lite_server_is_not_taken_at_its_word(tmp_path: Path) -> None:
    """A ``milvus-lite server`` answers compact() and Completed without compacting anything."""
    port = free_loopback_port()
    with (tmp_path / "milvus.log").open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(tmp_path / "remote"),
             "--host", "127.0.0.1", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_accepting(process, port, timeout=60)
        index = MilvusIndex(f"http://127.0.0.1:{port}", model_id=MODEL, dim=DIM)
        try:
            tenant, m = unique("t"), memory()
            await seed(index, tenant, m)
            await index.partition(tenant).delete([m.id])
            assert not await index.compact()
            assert await index.residue([m.id]) is None
            assert m.id.encode() in file_bytes(tmp_path / "remote")  # what it would have left
        finally:
            await index.close()
    finally:
        process.terminate()
        process.wait(timeout=30)

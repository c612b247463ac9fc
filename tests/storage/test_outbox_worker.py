"""The outbox worker against a real PostgreSQL and a real Milvus Lite file.

Each test gets a private database on the suite's PostgreSQL, copied from a migrated template,
so no other worker (the suite's server runs one in-process) can drain its outbox and
``lag()``/``replay_dead()`` — which span every tenant — see only this test's rows. Memories are
written through the store in fresh tenants and the worker is driven with ``drain_once``.

The embedder is a deterministic fake of our own ``Embedder`` interface: at storage level it
stands for an outside embedding service, and it can be told to fail.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from memoryd.domain import (
    Category,
    Draft,
    EraseMode,
    EraseSelector,
    MemorydError,
    Outcome,
    ReadFilter,
    Scope,
    Unavailable,
)
from memoryd.storage import (
    WORKER_ROLE,
    EmbeddedPostgres,
    IndexedMemory,
    IndexSet,
    IndexTarget,
    LocalKeyProvider,
    MilvusIndex,
    OutboxWorker,
    Postgres,
    Stores,
    PostgresSettings,
    TermHasher,
    VectorErasure,
    embedding_text,
    migrate,
    partition_name,
    register_index_model,
)
from memoryd.storage.memories import _erase as memories_module
from memoryd.storage.work import _outbox as outbox_module
from memoryd.storage.memories._write_batch import enqueue_index

from ..support import unique, with_vectors, woken_by

DIM = 8
EVERYTHING = tuple((c, ("*",)) for c in Category)
AGENT = "agent-1"
HASHER = TermHasher(b"outbox-test-terms-secret")


class FakeEmbedder:
    """Deterministic unit vectors from a hash of the text; fails the next N calls on request."""

    model_id = "test/fake"
    dim = DIM

    def __init__(self) -> None:
        self.failures_left = 0
        self.embedded: Counter[str] = Counter()  # how often each text was embedded
        self.gate: asyncio.Event | None = None  # while set to an unset event, calls wait for it
        self.waiting = asyncio.Event()  # a call is waiting at the gate

    def hold(self) -> asyncio.Event:
        """Make the next calls wait until the returned event is set."""
        self.gate = asyncio.Event()
        self.waiting.clear()
        return self.gate

    def fail_next(self, times: int) -> None:
        self.failures_left = times

    @staticmethod
    def vector(text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        raw = [b - 127.5 for b in digest[:DIM]]
        length = math.sqrt(sum(x * x for x in raw))
        return [x / length for x in raw]

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)  # a real service is awaited: let other workers run meanwhile
        if self.gate is not None and not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        if self.failures_left:
            self.failures_left -= 1
            raise Unavailable("the fake embedding service is down")
        self.embedded.update(texts)
        return [self.vector(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self.vector(text)

    async def warm_up(self) -> None:  # nothing to load
        return None

    def close(self) -> None:  # nothing to let go of
        return None


def in_database(dsn: str, name: str) -> str:
    return make_conninfo(dsn, dbname=name)


@pytest.fixture(scope="module")
def template_database(postgres: EmbeddedPostgres) -> Iterator[str]:
    name = f"outbox_template_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    asyncio.run(migrate(in_database(postgres.owner_dsn, name)))
    yield name
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def settings(postgres: EmbeddedPostgres, template_database: str) -> Iterator[PostgresSettings]:
    name = f"outbox_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name),
                                                                      sql.Identifier(template_database)))
    yield PostgresSettings(in_database(postgres.owner_dsn, name), in_database(postgres.app_dsn, name),
                           in_database(postgres.worker_dsn, name))
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def routing() -> str:
    return "partition"


@dataclass
class Rig:
    settings: PostgresSettings
    app: Postgres
    store: Stores
    index: MilvusIndex
    embedder: FakeEmbedder
    pools: list[Postgres] = field(default_factory=list)

    async def worker(self, *, index: MilvusIndex | None = None, **options: Any) -> OutboxWorker:
        """A worker with its own pool of worker-role connections."""
        pool = Postgres(self.settings, role=WORKER_ROLE)
        await pool.open()
        self.pools.append(pool)
        target = IndexTarget(index or self.index, self.embedder)

        async def targets() -> list[IndexTarget]:
            return [target]
        return OutboxWorker(pool, self.store, targets, **options)

    async def write(self, tenant: str, *drafts: Draft, subject: str = "alice") -> list[str]:
        results = await self.store.session(tenant, AGENT).write(subject, list(drafts))
        return [r.memory_id for r in results]

    async def owner_rows(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Read as the owner (a superuser here, so row level security does not apply)."""
        async with await psycopg.AsyncConnection.connect(self.settings.dsn, row_factory=dict_row) as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall()

    async def outbox(self, tenant: str) -> list[dict[str, Any]]:
        return await self.owner_rows(
            "SELECT *, EXTRACT(EPOCH FROM next_attempt_at - now()) AS due_in FROM outbox "
            "WHERE tenant_id = %s ORDER BY id", tenant)

    def vector_of(self, key: str, text: str) -> list[float]:
        return self.embedder.vector(embedding_text(key, text))


@pytest.fixture
async def rig(settings: PostgresSettings, tmp_path: Path, routing: str) -> AsyncIterator[Rig]:
    from milvus_lite.server_manager import server_manager_instance

    app = Postgres(settings)
    await app.open()
    path = tmp_path / "m.db"
    index = MilvusIndex(str(path), model_id=FakeEmbedder.model_id, dim=DIM, routing=routing)
    rig = Rig(settings, app, Stores(app, HASHER, LocalKeyProvider(b"\x07" * 32)), index, FakeEmbedder())
    try:
        yield rig
    finally:
        for pool in rig.pools:
            await pool.close()
        await index.close()
        server_manager_instance.release_server(str(path))
        await app.close()


async def drain(worker: OutboxWorker, rounds: int = 50) -> int:
    """Drain until nothing is due; return how many rows were settled."""
    total = 0
    for _ in range(rounds):
        settled = await worker.drain_once()
        if not settled:
            return total
        total += settled
    raise AssertionError(f"the outbox was still not drained after {rounds} rounds")


def everything(subject: str = "alice", **fields: Any) -> ReadFilter:
    return ReadFilter(subject=subject, rules=EVERYTHING, **fields)


async def found(rig: Rig, tenant: str, flt: ReadFilter, vector: list[float] | None = None) -> set[str]:
    hits = await rig.index.partition(tenant).search(await rig.store.session(tenant).labelled(flt),
                                  vector or [1.0] + [0.0] * (DIM - 1), 100, datetime.now(UTC))
    return {memory_id for memory_id, _, _ in hits}


# --- draining --------------------------------------------------------------------------------

@pytest.mark.parametrize("routing", ["partition", "partition_key"], ids=["partition", "partition-key"])
async def test_draining_indexes_every_written_memory_and_empties_the_outbox(rig: Rig) -> None:
    tenant = unique("tenant")
    drafts = [
        Draft(Category.FACT, "lives in Lyon", key="home_city", tags=("travel", "home")),
        Draft(Category.PREFERENCE, "pays by card", key="payment_method"),
        Draft(Category.EVENT, "went hiking in the Alps", tags=("travel",)),
        Draft(Category.CONTEXT, "planning a trip", key="topic", scope=Scope.SESSION, session_id="s1"),
        Draft(Category.GOAL, "run a marathon", key="fitness", valid_until=datetime.now(UTC) + timedelta(days=30)),
    ]
    org_draft = Draft(Category.FACT, "offices close on Fridays", key="office_hours", scope=Scope.ORG)
    ids = await rig.write(tenant, *drafts)
    [org_id] = await rig.write(tenant, org_draft)
    worker = await rig.worker()

    assert len(await rig.outbox(tenant)) == 6
    assert await drain(worker) == 6

    assert await rig.outbox(tenant) == []
    lag = await worker.lag()
    assert (lag.pending, lag.dead) == (0, 0)
    assert await rig.index.partition(tenant).count() == 6
    vectors = await rig.index.partition(tenant).vectors([*ids, org_id])
    for memory_id, draft in zip([*ids, org_id], [*drafts, org_draft], strict=True):
        assert vectors[memory_id] == pytest.approx(rig.vector_of(draft.key, draft.text), abs=1e-6)
        assert rig.embedder.embedded[embedding_text(draft.key, draft.text)] == 1
    # The filterable fields came along: the index answers the read filter like Postgres would.
    home, pay, hike, topic, goal = ids
    assert await found(rig, tenant, everything()) == {home, pay, hike, goal}
    assert await found(rig, tenant, everything(include_org=True, session_id="s1")) == {*ids, org_id}
    assert await found(rig, tenant, everything(tags=("travel",))) == {home, hike}
    assert await found(rig, tenant, everything(keys=("payment_method",))) == {pay}
    assert await found(rig, tenant, everything(categories=(Category.EVENT,))) == {hike}
    assert await found(rig, unique("tenant"), everything(include_org=True, any_session=True)) == set()


async def test_the_worker_seals_the_index_at_most_once_a_second_for_everything_written_meanwhile(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every Milvus Lite seal rewrites its manifest and scans its index files, so sealing after
    # each tenant's upsert made indexing slower the more tenants there were, and sealing each
    # time the queue was drained made a stream of single writes one seal each. The worker
    # seals at most every SEAL_SECONDS, busy or drained, and seals what is left once that is up.
    seals: list[float] = []
    original = rig.index.seal

    async def counting() -> None:
        seals.append(clock[0])
        await original()

    monkeypatch.setattr(rig.index, "seal", counting)
    clock = [1000.0]  # the worker's clock, moved by hand: a loaded machine cannot make a seal due
    monkeypatch.setattr(outbox_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    tenants = [unique("tenant") for _ in range(5)]
    ids = {t: await rig.write(t, Draft(Category.EVENT, f"went hiking, {t}")) for t in tenants}
    worker = await rig.worker(batch_size=4)

    assert await worker.drain_once() == 4  # a full batch: more may be waiting
    assert seals == []
    for tenant in tenants[:4]:  # already searchable unsealed, and only by their own tenant
        assert await found(rig, tenant, everything()) == set(ids[tenant])
    clock[0] += 0.5
    assert await worker.drain_once() == 1  # drained, but the last second is not up yet
    assert seals == []
    assert await found(rig, tenants[4], everything()) == set(ids[tenants[4]])

    clock[0] += outbox_module.SEAL_SECONDS
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    for _ in range(100):
        if seals:
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(running, timeout=30)
    assert seals == [1000.0 + 0.5 + outbox_module.SEAL_SECONDS]  # once, for all five tenants
    for tenant in tenants:
        assert await found(rig, tenant, everything()) == set(ids[tenant])


@pytest.mark.parametrize("routing", ["partition", "partition_key"], ids=["partition", "partition-key"])
async def test_index_routes_get_a_row_for_the_tenant_after_the_first_drain(rig: Rig, routing: str) -> None:
    tenant = unique("tenant")
    await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    worker = await rig.worker()
    routes = "SELECT collection, partition_name, mode FROM index_routes WHERE tenant_id = %s"
    assert await rig.owner_rows(routes, tenant) == []

    await drain(worker)
    expected = {"collection": rig.index.collection, "mode": routing,
                "partition_name": partition_name(tenant) if routing == "partition" else ""}
    assert await rig.owner_rows(routes, tenant) == [expected]

    await rig.write(tenant, Draft(Category.EVENT, "moved to Paris"))
    await drain(worker)
    assert await rig.owner_rows(routes, tenant) == [expected]


async def test_an_update_re_embeds_the_memory(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.PREFERENCE, "vegetarian", key="diet", tags=("food",)))
    worker = await rig.worker()
    await drain(worker)
    before = (await rig.index.partition(tenant).vectors([memory_id]))[memory_id]

    [result] = await rig.store.session(tenant, AGENT).write("alice", [Draft(Category.PREFERENCE, "vegan", key="diet",
                                                                      tags=("cooking",))])
    assert (result.memory_id, result.outcome) == (memory_id, Outcome.UPDATED)
    assert await drain(worker) == 1

    after = (await rig.index.partition(tenant).vectors([memory_id]))[memory_id]
    assert after == pytest.approx(rig.vector_of("diet", "vegan"), abs=1e-6)
    assert after != pytest.approx(before, abs=1e-3)
    assert await rig.index.partition(tenant).count() == 1
    assert rig.embedder.embedded[embedding_text("diet", "vegetarian")] == 1
    assert rig.embedder.embedded[embedding_text("diet", "vegan")] == 1
    assert await found(rig, tenant, everything(tags=("cooking",))) == {memory_id}
    assert await found(rig, tenant, everything(tags=("food",))) == set()


async def test_forget_deletes_the_vector_through_the_worker(rig: Rig) -> None:
    tenant = unique("tenant")
    forgotten, kept = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"),
                                      Draft(Category.EVENT, "went hiking"))
    worker = await rig.worker()
    await drain(worker)

    receipt = await rig.store.session(tenant, AGENT).erase("alice", everything(), EraseSelector(ids=(forgotten,)),
                                    EraseMode.FORGET)
    assert receipt.counts.memories == 1
    assert [(r["memory_id"], r["op"]) for r in await rig.outbox(tenant)] == [(uuid.UUID(forgotten), "delete")]
    assert await rig.index.partition(tenant).count(ids=[forgotten]) == 1  # not yet: the worker does it

    assert await drain(worker) == 1
    assert await rig.index.partition(tenant).count(ids=[forgotten]) == 0
    assert await rig.index.partition(tenant).count(ids=[kept]) == 1
    assert await rig.outbox(tenant) == []
    assert sum(rig.embedder.embedded.values()) == 2  # the delete embedded nothing


async def test_a_memory_whose_content_is_unavailable_is_neither_embedded_nor_retried(rig: Rig) -> None:
    tenant = unique("tenant")
    [lost] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    [kept] = await rig.write(tenant, Draft(Category.FACT, "lives in Oslo", key="home_city"), subject="bob")
    async with await psycopg.AsyncConnection.connect(rig.settings.dsn, autocommit=True) as owner:
        await owner.execute("UPDATE subject_keys SET wrapped = '\\x00'::bytea WHERE tenant_id = %s "
                            "AND subject = 'alice'", (tenant,))
    worker = await rig.worker()

    assert await drain(worker) == 2

    assert await rig.outbox(tenant) == []  # settled, not spinning or dead-lettered
    assert set(await rig.index.partition(tenant).vectors([lost, kept])) == {kept}
    assert embedding_text("home_city", "lives in Lyon") not in rig.embedder.embedded


async def test_a_memory_forgotten_before_draining_is_never_embedded(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    await rig.store.session(tenant, AGENT).erase("alice", everything(), EraseSelector(ids=(memory_id,)),
                                                 EraseMode.FORGET)
    worker = await rig.worker()

    assert await drain(worker) == 1
    assert await rig.index.partition(tenant).count() == 0
    assert not rig.embedder.embedded
    assert await rig.outbox(tenant) == []


async def test_purge_leaves_the_vector_until_its_delete_is_enqueued_and_drained(rig: Rig) -> None:
    tenant = unique("tenant")
    purged, kept = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"),
                                   Draft(Category.EVENT, "went hiking"))
    worker = await rig.worker()
    await drain(worker)

    receipt = await rig.store.session(tenant, AGENT).erase("alice", everything(), EraseSelector(ids=(purged,)),
                                    EraseMode.PURGE)
    assert receipt.counts.memories == 1
    assert await rig.outbox(tenant) == []  # PURGE removes the memory's outbox rows with it
    assert await rig.index.partition(tenant).count(ids=[purged]) == 1  # the vector is only cleared by the erase itself

    await rig.store.session(tenant, AGENT).enqueue_vector_deletes("alice", [purged])
    assert [(r["memory_id"], r["op"]) for r in await rig.outbox(tenant)] == [(uuid.UUID(purged), "delete")]
    assert await drain(worker) == 1

    assert await rig.index.partition(tenant).count(ids=[purged]) == 0
    assert await rig.index.partition(tenant).count(ids=[kept]) == 1
    assert await rig.outbox(tenant) == []
    assert sum(rig.embedder.embedded.values()) == 2


async def test_a_purges_queued_deletion_is_not_due_while_the_purge_clears_the_index(rig: Rig) -> None:
    # A worker deleting the vector during the erase would write a tombstone (holding the id)
    # after the erase's compaction: the files would fail the receipt's check.
    tenant = unique("tenant")
    [purged] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    worker = await rig.worker()
    await drain(worker)
    claimed: list[int] = []

    async def clear_while_a_worker_looks(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        [queued] = await rig.outbox(tenant)
        assert queued["op"] == "delete" and queued["due_in"] > 30  # the fallback, if this process dies
        claimed.append(await worker.drain_once())
        cleared = await clearing(rig, tenant)(ids, counted)
        assert await rig.index.compact()  # as the server's erase does: the files rewritten
        return cleared

    session = with_vectors(rig.store, clear_while_a_worker_looks).session(tenant, AGENT)
    receipt = await session.erase("alice", everything(), EraseSelector(ids=(purged,)), EraseMode.PURGE)
    assert claimed == [0]
    assert (receipt.counts.memories, receipt.verified) == (1, True)
    assert await rig.index.partition(tenant).count(ids=[purged]) == 0
    assert await rig.index.residue([purged]) == set()  # no tombstone written after the compaction
    assert await rig.outbox(tenant) == []


async def test_a_purge_that_never_cleared_the_index_leaves_the_deletion_to_a_worker_later(rig: Rig) -> None:
    tenant = unique("tenant")
    [purged] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    worker = await rig.worker()
    await drain(worker)

    async def dies(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        raise RuntimeError("the process died before clearing the index")

    with pytest.raises(RuntimeError):
        await with_vectors(rig.store, dies).session(tenant, AGENT).erase("alice", everything(),
                                                                         EraseSelector(ids=(purged,)), EraseMode.PURGE)
    assert await drain(worker) == 0  # not due yet
    await rig.owner_rows("UPDATE outbox SET next_attempt_at = now() WHERE tenant_id = %s RETURNING id", tenant)
    assert await drain(worker) == 1
    assert await rig.index.partition(tenant).count(ids=[purged]) == 0
    assert await rig.outbox(tenant) == []


@pytest.mark.parametrize("op", ["upsert", "delete"], ids=["upsert-row", "delete-row"])
async def test_a_row_whose_memory_no_longer_exists_leads_to_a_delete(rig: Rig, op: str) -> None:
    tenant = unique("tenant")
    ghost = str(uuid.uuid4())
    stale = IndexedMemory(ghost, "alice", "subject", "", "fact", "home_city", (), datetime.now(UTC), None)
    await rig.index.partition(tenant).upsert([stale], [FakeEmbedder.vector("stale")])
    async with rig.app.tenant_tx(tenant) as conn:
        await enqueue_index(conn, ghost, "alice", op)
    worker = await rig.worker()

    assert await drain(worker) == 1

    assert await rig.index.partition(tenant).count(ids=[ghost]) == 0
    assert await rig.outbox(tenant) == []
    assert not rig.embedder.embedded


# --- failures, retries and dead letters -------------------------------------------------------

async def test_an_embedder_failure_schedules_a_retry_with_exponential_backoff(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    worker = await rig.worker(base_backoff=1000.0, max_backoff=1500.0, max_attempts=5)
    rig.embedder.fail_next(2)

    assert await worker.drain_once() == 1
    [row] = await rig.outbox(tenant)
    assert (row["attempts"], row["dead"]) == (1, False)
    assert "fake embedding service is down" in row["last_error"]
    assert 900 < row["due_in"] <= 1000  # base_backoff * 2**0, from when the retry was recorded
    assert await worker.drain_once() == 0  # not due yet
    lag = await worker.lag()
    assert (lag.pending, lag.dead) == (1, 0)
    assert lag.oldest_pending_seconds >= 0
    assert await rig.index.partition(tenant).count() == 0

    await rig.owner_rows("UPDATE outbox SET next_attempt_at = now() WHERE tenant_id = %s RETURNING id", tenant)
    assert await worker.drain_once() == 1
    [row] = await rig.outbox(tenant)
    assert (row["attempts"], row["dead"]) == (2, False)
    assert 1400 < row["due_in"] <= 1500  # base_backoff * 2**1 = 2000, capped at max_backoff

    await rig.owner_rows("UPDATE outbox SET next_attempt_at = now() WHERE tenant_id = %s RETURNING id", tenant)
    assert await worker.drain_once() == 1
    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 1


async def test_after_max_attempts_a_row_is_dead_until_replayed(rig: Rig) -> None:
    tenant = unique("tenant")
    ids = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"),
                          Draft(Category.EVENT, "went hiking"))
    worker = await rig.worker(max_attempts=2, base_backoff=0.0)
    rig.embedder.fail_next(2)

    assert await worker.drain_once() == 2
    assert [(r["attempts"], r["dead"]) for r in await rig.outbox(tenant)] == [(1, False), (1, False)]
    assert await worker.drain_once() == 2
    rows = await rig.outbox(tenant)
    assert [(r["attempts"], r["dead"]) for r in rows] == [(2, True), (2, True)]
    assert all("fake embedding service is down" in r["last_error"] for r in rows)
    assert await worker.drain_once() == 0  # dead letters are not claimed
    lag = await worker.lag()
    assert (lag.pending, lag.dead) == (0, 2)
    # Dead: no point waiting.
    assert await woken_by(rig.store, worker).session(tenant).wait_indexed(ids, timeout=30) is False

    assert await worker.replay_dead() == 2
    assert [(r["attempts"], r["dead"]) for r in await rig.outbox(tenant)] == [(0, False), (0, False)]
    lag = await worker.lag()
    assert (lag.pending, lag.dead) == (2, 0)
    assert await drain(worker) == 2

    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=ids) == 2
    lag = await worker.lag()
    assert (lag.pending, lag.dead) == (0, 0)
    assert await worker.replay_dead() == 0


async def test_a_failing_tenant_does_not_hold_back_another_in_the_same_batch(rig: Rig) -> None:
    failing, healthy = unique("tenant"), unique("tenant")
    [failed_id] = await rig.write(failing, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    [healthy_id] = await rig.write(healthy, Draft(Category.FACT, "lives in Oslo", key="home_city"))
    worker = await rig.worker(base_backoff=1000.0)
    # The whole batch's embedding call fails, then the worker tries tenant by tenant (in
    # outbox order) and only the first tenant's call fails again.
    rig.embedder.fail_next(2)

    assert await worker.drain_once() == 2

    assert await rig.index.partition(healthy).count(ids=[healthy_id]) == 1
    assert await rig.outbox(healthy) == []
    assert [r["attempts"] for r in await rig.outbox(failing)] == [1]
    assert await rig.index.partition(failing).count(ids=[failed_id]) == 0


async def test_an_unreachable_index_spends_no_attempts(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    unreachable = MilvusIndex("http://127.0.0.1:1", model_id=FakeEmbedder.model_id, dim=DIM)
    try:
        worker = await rig.worker(index=unreachable, base_backoff=1000.0, max_attempts=1)
        for _ in range(3):
            with pytest.raises(Unavailable):
                await worker.drain_once()
    finally:
        await unreachable.close()

    [row] = await rig.outbox(tenant)
    assert (row["attempts"], row["dead"], row["last_error"]) == (0, False, None)
    assert row["due_in"] <= 0  # still due: the worker retries as soon as the index is back
    assert await rig.owner_rows("SELECT * FROM index_routes WHERE tenant_id = %s", tenant) == []

    assert await drain(await rig.worker()) == 1
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 1
    assert await rig.outbox(tenant) == []


async def write_past_tag_capacity(rig: Rig, tenant: str) -> str:
    """A memory with 40 tags: each write is within the 32-tag limit, but APPEND merges a
    repeat's tags into the existing memory."""
    first = Draft(Category.EVENT, "went hiking", tags=tuple(f"a{i:02}" for i in range(20)))
    again = Draft(Category.EVENT, "went hiking", tags=tuple(f"b{i:02}" for i in range(20)))
    [memory_id] = await rig.write(tenant, first)
    [result] = await rig.store.session(tenant, AGENT).write("alice", [again])
    assert (result.memory_id, result.outcome) == (memory_id, Outcome.MERGED)
    return memory_id


async def drain_like_run(worker: OutboxWorker, rounds: int = 10) -> None:
    """Drain as ``OutboxWorker.run`` does: a MemorydError is logged and the next round tries again."""
    for _ in range(rounds):
        try:
            if not await worker.drain_once():
                return
        except MemorydError:
            continue


async def test_a_memory_merged_past_the_index_tag_capacity_is_still_indexed(rig: Rig) -> None:
    tenant = unique("tenant")
    memory_id = await write_past_tag_capacity(rig, tenant)
    worker = await rig.worker(base_backoff=0.0, max_attempts=2)

    await drain_like_run(worker)

    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 1
    assert await found(rig, tenant, everything(tags=("a00", "b19"))) == {memory_id}


async def test_a_row_the_index_rejects_does_not_stall_other_tenants(rig: Rig) -> None:
    # The index is up; it refuses one item. That must not hold back everyone queued after it.
    poisoned, healthy = unique("tenant"), unique("tenant")
    await write_past_tag_capacity(rig, poisoned)
    [healthy_id] = await rig.write(healthy, Draft(Category.FACT, "lives in Oslo", key="home_city"))
    worker = await rig.worker(base_backoff=0.0, max_attempts=2)

    await drain_like_run(worker)

    assert await rig.outbox(healthy) == []
    # An item the index refuses is not an outage: the index is not reported down for it.
    await rig.index.ping()
    assert await rig.index.partition(healthy).count(ids=[healthy_id]) == 1


# --- concurrency -----------------------------------------------------------------------------

async def test_two_workers_draining_concurrently_settle_every_row_exactly_once(rig: Rig) -> None:
    tenants = [unique("tenant"), unique("tenant")]
    texts: dict[str, str] = {}
    for tenant in tenants:
        drafts = [Draft(Category.EVENT, f"{tenant} did thing number {i}") for i in range(30)]
        for memory_id, draft in zip(await rig.write(tenant, *drafts), drafts, strict=True):
            texts[memory_id] = draft.text
    first, second = await rig.worker(batch_size=4), await rig.worker(batch_size=4)

    settled = [0, 0]
    for _ in range(100):
        a, b = await asyncio.gather(first.drain_once(), second.drain_once())
        settled[0] += a
        settled[1] += b
        if not a and not b:
            break

    assert sum(settled) == 60
    assert settled[0] > 0 and settled[1] > 0
    assert {memory_id: rig.embedder.embedded[text] for memory_id, text in texts.items()} == {
        memory_id: 1 for memory_id in texts}
    assert sum(rig.embedder.embedded.values()) == 60
    for tenant in tenants:
        assert await rig.outbox(tenant) == []
        assert await rig.index.partition(tenant).count() == 30


# --- leases: nothing is locked while a batch is embedded and written ----------------------------

async def open_transactions(rig: Rig) -> list[dict[str, Any]]:
    return await rig.owner_rows("SELECT pid, state FROM pg_stat_activity WHERE datname = current_database() "
                                "AND usename = %s AND state LIKE 'idle in transaction%%'", WORKER_ROLE)


async def held_at_the_embedder(rig: Rig, worker: OutboxWorker) -> tuple[asyncio.Task[int], asyncio.Event]:
    """A drain of ``worker`` started and waiting inside the embedder; set the event to go on."""
    gate = rig.embedder.hold()
    draining = asyncio.create_task(worker.drain_once())
    await asyncio.wait_for(rig.embedder.waiting.wait(), timeout=30)
    return draining, gate


def clearing(rig: Rig, tenant: str) -> Any:
    """An erase's clearing of the vectors, as the server's: delete them, then count what is left."""
    async def clear(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        deleted = await rig.index.partition(tenant).delete(ids)
        return VectorErasure(deleted, await rig.index.partition(tenant).count(ids=ids) == 0, counted=deleted)
    return clear


def held_at_the_index(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """Make the index's next vector writes wait (staged, not yet written) until the first
    returned event is set; the second is set once a write is waiting."""
    gate, waiting = asyncio.Event(), asyncio.Event()
    upsert = rig.index.upsert_tenants

    async def held(*args: Any, **kwargs: Any) -> Any:
        waiting.set()
        await gate.wait()
        return await upsert(*args, **kwargs)

    monkeypatch.setattr(rig.index, "upsert_tenants", held)
    return gate, waiting


async def purgeable_held_at_the_index(rig: Rig, monkeypatch: pytest.MonkeyPatch,
                                      worker: OutboxWorker) -> tuple[str, str, asyncio.Event, asyncio.Task[int]]:
    """A tenant with one memory whose batch ``worker`` has staged and is writing, held at the
    index: (tenant, memory id, the gate to go on, the drain)."""
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    gate, waiting = held_at_the_index(rig, monkeypatch)
    draining = asyncio.create_task(worker.drain_once())
    await asyncio.wait_for(waiting.wait(), timeout=30)
    return tenant, memory_id, gate, draining


@pytest.mark.parametrize("selector", [EraseSelector(ids=("<the memory>",)), EraseSelector(all_of_subject=True)],
                         ids=["ids", "all_of_subject"])
async def test_a_purge_while_the_batch_is_embedded_does_not_wait_and_nothing_of_it_is_written(
        rig: Rig, selector: EraseSelector) -> None:
    tenant = unique("tenant")
    [purged] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    if selector.ids:
        selector = EraseSelector(ids=(purged,))
    worker = await rig.worker()
    draining, gate = await held_at_the_embedder(rig, worker)

    assert await open_transactions(rig) == []  # claimed, and no transaction left open meanwhile
    # The worker read the memory and is still embedding it: the purge takes its claimed row
    # away, so the receipt is verified at once, without waiting for the batch.
    receipt = await asyncio.wait_for(
        with_vectors(rig.store, clearing(rig, tenant)).session(tenant, AGENT).erase("alice", everything(), selector,
                                                                                    EraseMode.PURGE), timeout=30)
    assert not draining.done()
    assert (receipt.counts.memories, receipt.verified) == (1, True)

    gate.set()
    assert await draining == 1
    assert await rig.index.partition(tenant).count(ids=[purged]) == 0  # the worker wrote nothing for it
    assert await rig.outbox(tenant) == []  # and queued nothing again: there was nothing to undo


async def test_a_purge_while_the_vector_is_written_waits_for_it_and_then_clears_it(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = await rig.worker()
    tenant, purged, gate, draining = await purgeable_held_at_the_index(rig, monkeypatch, worker)
    [row] = await rig.outbox(tenant)
    assert row["writing"] and row["claim"] is not None  # staged before the write

    session = with_vectors(rig.store, clearing(rig, tenant)).session(tenant, AGENT)
    erasing = asyncio.create_task(session.erase("alice", everything(), EraseSelector(ids=(purged,)), EraseMode.PURGE))
    await asyncio.sleep(0.5)
    # The vector is about to land: clearing the index now would leave it behind a verified
    # receipt, so the purge waits for this write to settle.
    assert not erasing.done()
    gate.set()
    assert await draining == 1
    receipt = await asyncio.wait_for(erasing, timeout=30)
    assert (receipt.counts.memories, receipt.verified) == (1, True)
    assert await rig.index.partition(tenant).count(ids=[purged]) == 0
    await drain(worker)
    assert await rig.index.partition(tenant).count(ids=[purged]) == 0
    assert await rig.outbox(tenant) == []


async def test_the_deletion_a_worker_queues_again_after_a_purge_waited_for_it_does_not_race_the_purge(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    worker, other = await rig.worker(), await rig.worker()
    tenant, purged, gate, draining = await purgeable_held_at_the_index(rig, monkeypatch, worker)
    claimed: list[int] = []

    async def clear_while_another_worker_looks(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        # The writing worker has settled and queued the vector's deletion again.
        assert [r["op"] for r in await rig.outbox(tenant) if r["claim"] is None] == ["delete", "delete"]
        claimed.append(await other.drain_once())
        cleared = await clearing(rig, tenant)(ids, counted)
        assert await rig.index.compact()
        return cleared

    session = with_vectors(rig.store, clear_while_another_worker_looks).session(tenant, AGENT)
    erasing = asyncio.create_task(session.erase("alice", everything(), EraseSelector(ids=(purged,)), EraseMode.PURGE))
    await asyncio.sleep(0.3)
    gate.set()
    assert await draining == 1
    receipt = await asyncio.wait_for(erasing, timeout=30)
    assert claimed == [0]  # neither deletion was due: the purge clears the index itself
    assert (receipt.counts.memories, receipt.verified) == (1, True)
    assert await rig.index.residue([purged]) == set()
    assert await rig.outbox(tenant) == []


async def test_a_purge_does_not_wait_for_ever_for_a_stuck_write_and_its_vector_still_goes(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memories_module, "IN_FLIGHT_WAIT_SECONDS", 0.5)
    worker = await rig.worker()
    tenant, purged, gate, draining = await purgeable_held_at_the_index(rig, monkeypatch, worker)

    session = with_vectors(rig.store, clearing(rig, tenant)).session(tenant, AGENT)
    receipt = await asyncio.wait_for(session.erase("alice", everything(), EraseSelector(ids=(purged,)), EraseMode.PURGE),
                                     timeout=30)
    assert receipt.counts.memories == 1
    assert not receipt.verified  # the stuck write may still land: the receipt cannot vouch
    gate.set()
    assert await draining == 1  # it wrote the vector of a memory purged meanwhile ...
    assert await rig.index.partition(tenant).count(ids=[purged]) == 1
    # ... found its claim taken away, and queued the deletion again (due a little later)
    await rig.owner_rows("UPDATE outbox SET next_attempt_at = now() WHERE tenant_id = %s RETURNING id", tenant)
    await drain(worker)
    assert await rig.index.partition(tenant).count(ids=[purged]) == 0
    assert await rig.outbox(tenant) == []


async def test_a_row_claimed_again_after_its_lease_ran_out_is_not_written_by_the_late_worker(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    late, other = await rig.worker(), await rig.worker()
    draining, gate = await held_at_the_embedder(rig, late)
    await rig.owner_rows("UPDATE outbox SET next_attempt_at = now() WHERE tenant_id = %s RETURNING id", tenant)
    rig.embedder.gate = None
    assert await other.drain_once() == 1  # the row, claimed anew and indexed
    # Its memory then goes behind the queue's back, vector and all.
    await rig.owner_rows("DELETE FROM memories WHERE tenant_id = %s RETURNING id", tenant)
    await rig.index.partition(tenant).delete([memory_id])

    gate.set()
    assert await draining == 1  # its claim was taken over while it embedded: it writes nothing
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 0
    assert await rig.outbox(tenant) == []


async def test_a_newer_state_written_first_by_another_worker_is_not_overwritten_by_an_older_one(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.PREFERENCE, "vegetarian", key="diet"))
    slow, fast = await rig.worker(), await rig.worker()
    draining, gate = await held_at_the_embedder(rig, slow)  # read "vegetarian", embedding it

    [result] = await rig.store.session(tenant, AGENT).write("alice", [Draft(Category.PREFERENCE, "vegan", key="diet")])
    assert result.outcome is Outcome.UPDATED
    rig.embedder.gate = None
    assert await fast.drain_once() == 1  # the newer row, indexed first
    assert (await rig.index.partition(tenant).vectors([memory_id]))[memory_id] == pytest.approx(
        rig.vector_of("diet", "vegan"), abs=1e-6)
    gate.set()
    assert await draining == 1  # the older state lands last ...

    await drain(slow)  # ... and the memory is queued again, so the index ends at the current state
    assert (await rig.index.partition(tenant).vectors([memory_id]))[memory_id] == pytest.approx(
        rig.vector_of("diet", "vegan"), abs=1e-6)
    assert await rig.outbox(tenant) == []


async def test_a_row_written_while_its_memory_is_indexed_is_not_settled_with_the_batch(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.PREFERENCE, "vegetarian", key="diet"))
    worker = await rig.worker()
    # A row that failed once is not folded into a newer one, so both rows are queued.
    await rig.owner_rows("UPDATE outbox SET attempts = 1 WHERE tenant_id = %s RETURNING id", tenant)
    draining, gate = await held_at_the_embedder(rig, worker)
    await rig.store.session(tenant, AGENT).write("alice", [Draft(Category.PREFERENCE, "vegan", key="diet")])
    newer = [r["id"] for r in await rig.outbox(tenant) if r["claim"] is None]
    assert len(newer) == 1
    gate.set()
    assert await draining == 1

    assert [r["id"] for r in await rig.outbox(tenant)] == newer  # only the claimed row was settled
    assert await drain(worker) == 1
    assert (await rig.index.partition(tenant).vectors([memory_id]))[memory_id] == pytest.approx(
        rig.vector_of("diet", "vegan"), abs=1e-6)


async def test_rows_whose_lease_ran_out_are_claimed_by_another_worker_and_settled_once(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    stuck, other = await rig.worker(), await rig.worker()
    draining, gate = await held_at_the_embedder(rig, stuck)
    assert await other.drain_once() == 0  # leased to the stuck worker

    # The stuck worker's lease runs out (as if it had died or hung that long).
    await rig.owner_rows("UPDATE outbox SET next_attempt_at = now() WHERE tenant_id = %s RETURNING id", tenant)
    rig.embedder.gate = None
    assert await other.drain_once() == 1
    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 1

    gate.set()
    assert await draining == 1  # it finishes too: nothing of it is settled twice, nothing queued again
    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 1


async def test_the_rows_of_a_worker_that_dies_mid_batch_are_free_again_within_ten_seconds(rig: Rig) -> None:
    tenant = unique("tenant")
    await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    draining, gate = await held_at_the_embedder(rig, await rig.worker())  # the default lease
    # Were the worker killed now, nobody could give its row back: only the lease frees it.
    [row] = await rig.outbox(tenant)
    assert row["claim"] is not None and 0 < row["due_in"] <= outbox_module.LEASE_SECONDS == 10.0
    gate.set()
    assert await draining == 1


async def test_a_batch_at_work_keeps_its_lease_however_long_it_takes(rig: Rig) -> None:
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    busy, other = await rig.worker(lease_seconds=0.6), await rig.worker()
    draining, gate = await held_at_the_embedder(rig, busy)
    rig.embedder.gate = None
    for _ in range(10):  # 2 s, more than three leases: renewed all along, so still the busy worker's
        await asyncio.sleep(0.2)
        assert await other.drain_once() == 0
    [row] = await rig.outbox(tenant)
    assert 0 < row["due_in"] <= 0.6
    gate.set()
    assert await draining == 1
    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 1
    assert sum(rig.embedder.embedded.values()) == 1  # embedded once: nobody took the batch over


async def test_a_batch_stuck_past_the_hold_limit_is_taken_over_when_its_lease_runs_out(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox_module, "HOLD_SECONDS", 1.0)
    tenant = unique("tenant")
    [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    stuck, other = await rig.worker(lease_seconds=0.6), await rig.worker()
    draining, gate = await held_at_the_embedder(rig, stuck)
    rig.embedder.gate = None
    taken = 0
    for _ in range(50):  # renewed up to 1 s after the claim, then free 0.6 s later at most
        await asyncio.sleep(0.1)
        if taken := await other.drain_once():
            break
    assert taken == 1
    assert await rig.outbox(tenant) == []
    gate.set()
    assert await draining == 1  # the stuck worker finishes late and settles nothing twice
    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=[memory_id]) == 1


async def test_a_second_worker_takes_the_next_batch_while_the_first_is_embedding(rig: Rig) -> None:
    tenant = unique("tenant")
    ids = await rig.write(tenant, *[Draft(Category.EVENT, f"did thing number {i}") for i in range(4)])
    first, second = await rig.worker(batch_size=2), await rig.worker(batch_size=2)
    draining, gate = await held_at_the_embedder(rig, first)
    rig.embedder.gate = None

    assert await second.drain_once() == 2
    assert await second.drain_once() == 0  # the first batch stays leased to the first worker
    gate.set()
    assert await draining == 2
    assert await rig.outbox(tenant) == []
    assert await rig.index.partition(tenant).count(ids=ids) == 4
    assert sum(rig.embedder.embedded.values()) == 4


async def test_run_keeps_two_batches_in_flight_at_once(rig: Rig) -> None:
    tenant = unique("tenant")
    ids = await rig.write(tenant, *[Draft(Category.EVENT, f"did thing number {i}") for i in range(4)])
    worker = await rig.worker(batch_size=2, parallel=2)
    gate = rig.embedder.hold()
    calls = 0

    async def count(texts: list[str], embed: Any = rig.embedder.embed_passages) -> list[list[float]]:
        nonlocal calls
        calls += 1
        if calls == 2:
            gate.set()  # both batches reached the embedder before either was written
        return await embed(texts)

    rig.embedder.embed_passages = count  # type: ignore[method-assign]
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop, idle_seconds=600))
    try:
        assert await woken_by(rig.store, worker).session(tenant).wait_indexed(ids, timeout=60) is True
    finally:
        stop.set()
        await asyncio.wait_for(running, timeout=60)
    assert calls == 2


# --- wait_indexed ----------------------------------------------------------------------------

async def test_wait_indexed_returns_true_once_a_running_worker_drains(rig: Rig) -> None:
    tenant = unique("tenant")
    worker = await rig.worker()
    stop = asyncio.Event()
    # A long idle pause: only wait_indexed's wake-up makes the worker look again in time.
    running = asyncio.create_task(worker.run(stop, idle_seconds=600))
    try:
        await asyncio.sleep(0)
        ids = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
        assert await woken_by(rig.store, worker).session(tenant).wait_indexed(ids, timeout=60) is True
    finally:
        stop.set()
        await asyncio.wait_for(running, timeout=60)

    assert await rig.index.partition(tenant).count(ids=ids) == 1
    assert await rig.outbox(tenant) == []


async def test_wait_indexed_is_true_at_once_when_nothing_is_pending(rig: Rig) -> None:
    tenant = unique("tenant")
    ids = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    await drain(await rig.worker())

    assert await rig.store.session(tenant).wait_indexed(ids, timeout=0) is True
    assert await rig.store.session(tenant).wait_indexed([str(uuid.uuid4())], timeout=0) is True


@pytest.mark.parametrize("with_worker", [False, True], ids=["no-worker", "idle-worker-not-running"])
async def test_wait_indexed_returns_false_on_timeout_when_nothing_drains(rig: Rig, with_worker: bool) -> None:
    tenant = unique("tenant")
    ids = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    worker = await rig.worker() if with_worker else None

    assert await woken_by(rig.store, worker).session(tenant).wait_indexed(ids, timeout=0.3) is False
    assert len(await rig.outbox(tenant)) == 1
    assert await rig.index.partition(tenant).count() == 0


# --- no index to write yet ---------------------------------------------------------------------

async def test_a_worker_that_cannot_write_every_models_index_leaves_the_work_queued_untried(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    """A fresh deployment: ``memoryd migrate`` registers no embedding model, and a worker
    started before any server has none to write. Its work waits, untried, and is indexed as
    soon as the model is registered — never settled without its vectors. So does work while a
    registered model has no embedder in this process."""
    tenant = unique("tenant")
    ids = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"),
                          Draft(Category.PREFERENCE, "pays by card", key="payment_method"))
    pool = Postgres(rig.settings, role=WORKER_ROLE)
    await pool.open()
    rig.pools.append(pool)
    embedders = {FakeEmbedder.model_id: rig.embedder}
    # Re-read the models on every look while blocked: the test steps, not a clock, decide.
    indexes = IndexSet(pool, embedders.get, milvus_uri=rig.index.uri, blocked_retry_seconds=0)
    worker = OutboxWorker(pool, rig.store, indexes.writable)

    async def untried() -> None:
        for _ in range(3):
            assert await worker.drain_once() == 0
        rows = await rig.outbox(tenant)
        assert [(r["attempts"], r["claim"], r["dead"], r["last_error"]) for r in rows] == [(0, None, False, None)] * 2
        assert not rig.embedder.embedded
        assert await woken_by(rig.store, worker).session(tenant).wait_indexed(ids, timeout=0.2) is False

    try:
        await untried()  # no model registered at all
        await register_index_model(rig.settings.dsn, FakeEmbedder.model_id, rig.index.collection, DIM)
        await register_index_model(rig.settings.dsn, "elsewhere/model", "memories_elsewhere", DIM)
        await untried()  # the active model's collection, but not the other one's: no embedder here
        assert [r.getMessage() for r in caplog.records if "index work waits" in r.getMessage()] == [
            "index work waits here (left queued, untried): no embedding model is registered yet "
            "(a server registers its model when it starts)",
            "index work waits here (left queued, untried): no embedder here for embedding model(s) elsewhere/model",
        ]  # once each, not on every look
        embedders["elsewhere/model"] = FakeEmbedder()  # a process that has both embedders
        assert await drain(worker) == 2
        assert await rig.outbox(tenant) == []
        assert await woken_by(rig.store, worker).session(tenant).wait_indexed(ids, timeout=0) is True
        assert set(await rig.index.partition(tenant).vectors(ids)) == set(ids)
        routes = await rig.owner_rows("SELECT collection FROM index_routes WHERE tenant_id = %s", tenant)
        assert {r["collection"] for r in routes} == {t.index.collection for t in indexes.targets()}
        assert len(routes) == 2
    finally:
        await indexes.close()


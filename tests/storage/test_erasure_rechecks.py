"""Receipts answered while the vector index was down are verified later, in the background.

A real PostgreSQL and a real Milvus Lite file (the outbox worker's rig); "down" is a Milvus
client pointed at a closed port, as in the outbox worker's own outage test. The background
re-check is driven step by step with ``recheck_once``; time passing is the owner moving a
queued row's due time to now.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from memoryd.domain import Category, Draft, EraseMode, EraseSelector, ErasureReceipt
from memoryd.storage import (
    WORKER_ROLE,
    ErasureRechecks,
    IndexedMemory,
    IndexTarget,
    MilvusIndex,
    Postgres,
    VectorErasure,
    available,
    erase_vectors,
    migrate,
)

from ..support import database_before, unique, with_vectors
from . import test_outbox_worker as outbox_tests
from .test_outbox_worker import AGENT, FakeEmbedder, Rig, drain, everything

# The outbox worker's rig: a private database and a Milvus Lite file per test.
template_database, settings, routing, rig = (outbox_tests.template_database, outbox_tests.settings,
                                             outbox_tests.routing, outbox_tests.rig)

DOWN = "http://127.0.0.1:1"


class _Indexes:
    """The index set an Erase clears (``erase_vectors``), as the server's use case passes it."""

    def __init__(self, index: MilvusIndex) -> None:
        self.index = index

    def targets(self) -> list[IndexTarget]:
        return [IndexTarget(self.index, FakeEmbedder())]


def _clearing(rig: Rig, tenant: str, index: MilvusIndex | None = None) -> Any:
    """How the server's erase clears the vectors (``IndexVectors``), on ``index``."""
    async def clear(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        session = rig.store.session(tenant, AGENT)
        return await erase_vectors(_Indexes(index or rig.index), session, "alice", ids, mode=EraseMode.PURGE,
                                   whole_subject=False, counted=counted, defer=session.enqueue_vector_deletes)
    return clear


async def _purge(rig: Rig, tenant: str, memory_id: str, index: MilvusIndex | None = None,
                 clear: Any = None) -> ErasureReceipt:
    session = with_vectors(rig.store, clear or _clearing(rig, tenant, index)).session(tenant, AGENT)
    return await session.erase("alice", everything(), EraseSelector(ids=(memory_id,)), EraseMode.PURGE, reason="asked")


async def _purge_while_down(rig: Rig, tenant: str, memory_id: str) -> tuple[str, ErasureReceipt]:
    down = MilvusIndex(DOWN, model_id=FakeEmbedder.model_id, dim=8)
    try:
        receipt = await _purge(rig, tenant, memory_id, down)
    finally:
        await down.close()
    return receipt.erase_id, receipt


async def _rechecks(rig: Rig, tenant: str) -> list[dict[str, object]]:
    return await rig.owner_rows("SELECT attempts, last_error, EXTRACT(EPOCH FROM next_attempt_at - now()) AS due_in "
                                "FROM erasure_rechecks WHERE tenant_id = %s", tenant)


async def _due_now(rig: Rig, tenant: str) -> None:
    await rig.owner_rows("UPDATE outbox SET next_attempt_at = now() WHERE tenant_id = %s RETURNING id", tenant)
    await rig.owner_rows("UPDATE erasure_rechecks SET next_attempt_at = now() WHERE tenant_id = %s RETURNING 1", tenant)


async def _rechecks_down(rig: Rig) -> tuple[ErasureRechecks, MilvusIndex]:
    """The re-check of a worker whose index is unreachable (default waits: 5 s, doubling)."""
    down = MilvusIndex(DOWN, model_id=FakeEmbedder.model_id, dim=8)
    pool = Postgres(rig.settings, role=WORKER_ROLE)
    await pool.open()
    rig.pools.append(pool)
    async def targets() -> list[IndexTarget]:
        return [IndexTarget(down, rig.embedder)]
    return ErasureRechecks(pool, rig.store, targets), down


async def test_a_receipt_answered_while_the_index_was_down_is_verified_once_it_is_back(rig: Rig) -> None:
    tenant = unique("tenant")
    purged, kept = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"),
                                   Draft(Category.FACT, "likes tea", key="drink"))
    worker = await rig.worker()
    await drain(worker)

    erase_id, receipt = await _purge_while_down(rig, tenant, purged)
    assert not receipt.verified and receipt.pending == ("vector_index", "vector_store_files")
    assert [r["attempts"] for r in await _rechecks(rig, tenant)] == [0]
    await _due_now(rig, tenant)
    assert await drain(worker) == 1  # the outbox deletes the vector (no compaction, no check)

    # Down again when the re-check comes: it records nothing and waits longer each time.
    sick, down = await _rechecks_down(rig)
    try:
        await _due_now(rig, tenant)
        assert await sick.recheck_once() == 0
        [first] = await _rechecks(rig, tenant)
        await _due_now(rig, tenant)
        assert await sick.recheck_once() == 0
        [second] = await _rechecks(rig, tenant)
    finally:
        await down.close()
    assert (first["attempts"], second["attempts"]) == (1, 2)
    assert str(second["last_error"]).startswith("index unreachable")
    assert 4 < first["due_in"] <= 5 < 9 < second["due_in"] <= 10  # type: ignore[operator]
    assert len(await rig.owner_rows("SELECT 1 FROM erasure_checks WHERE erase_id = %s", erase_id)) == 1

    # The index is back. A stray vector is there again for the purged id (a late write): the
    # round compacts, then finds the vector, deletes it and verifies the receipt — but that
    # delete came after the round's compaction, so the files wait for the next round.
    stray = IndexedMemory(purged, "alice", "subject", "", "fact", "", (), datetime.now(UTC), None)
    await rig.index.partition(tenant).upsert([stray], [FakeEmbedder.vector("stray")])
    assert await rig.index.partition(tenant).count(ids=[purged]) == 1
    await _due_now(rig, tenant)
    assert await worker.rechecks.recheck_once() == 0
    assert await rig.index.partition(tenant).count(ids=[purged]) == 0
    [row] = await _rechecks(rig, tenant)
    assert row["last_error"] == "the index files' compaction is not confirmed yet"
    assert 0 < row["due_in"] <= 60  # type: ignore[operator]  # the next round (a minute apart)
    replayed = await _purge(rig, tenant, purged)
    assert (replayed.verified, replayed.pending) == (True, ("vector_store_files",))

    await _due_now(rig, tenant)
    assert await worker.rechecks.recheck_once() == 1
    assert await rig.index.residue([purged]) == set()  # compacted out of the files too
    assert await rig.index.partition(tenant).count(ids=[kept]) == 1  # the subject's other memory stays
    assert await _rechecks(rig, tenant) == []
    checks = await rig.owner_rows("SELECT verified, vectors, recheck FROM erasure_checks WHERE tenant_id = %s "
                                  "AND erase_id = %s ORDER BY checked_at", tenant, erase_id)
    assert [(c["verified"], c["vectors"], c["recheck"]) for c in checks] == [
        (False, 0, False), (True, 1, True), (True, 0, True)]

    # The operator's audit shows the later verification...
    [listed] = await rig.store.session(tenant).erasures()
    assert (listed["erase_id"], listed["verified"]) == (erase_id, True)
    assert [(c["verified"], c["recheck"]) for c in listed["checks"]] == [(False, False), (True, True), (True, True)]
    assert await rig.store.session(tenant).erasures(unverified_only=True) == []

    # ...and so does the look-up: the same request again is answered from the log, verified,
    # without touching the index.
    async def untouched(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        raise AssertionError("a verified receipt is answered from the log")

    again = await with_vectors(rig.store, untouched).session(tenant, AGENT).erase(
        "alice", everything(), EraseSelector(ids=(purged,)), EraseMode.PURGE, reason="asked")
    assert (again.erase_id, again.verified, again.counts.memories, again.pending) == (erase_id, True, 1, ())


async def test_a_receipt_waits_for_the_outboxs_queued_deletions_before_it_is_checked(rig: Rig) -> None:
    tenant = unique("tenant")
    [purged] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    worker = await rig.worker()
    await drain(worker)
    erase_id, _ = await _purge_while_down(rig, tenant, purged)

    await rig.owner_rows("UPDATE erasure_rechecks SET next_attempt_at = now() WHERE tenant_id = %s RETURNING 1",
                         tenant)
    assert await worker.rechecks.recheck_once() == 0  # the deletions are still queued: not yet
    [row] = await _rechecks(rig, tenant)
    # The outbox is at work, not the index down: due again after the first wait, no longer.
    assert (row["attempts"], row["last_error"]) == (0, "vector deletions still queued")
    assert 4 < row["due_in"] <= 5  # type: ignore[operator]
    assert len(await rig.owner_rows("SELECT 1 FROM erasure_checks WHERE erase_id = %s", erase_id)) == 1

    await _due_now(rig, tenant)
    assert await drain(worker) == 1
    assert await worker.rechecks.recheck_once() == 1
    [listed] = await rig.store.session(tenant).erasures()
    assert listed["verified"] and listed["checks"][-1]["vectors"] == 0


RECHECKS = 28  # the migration that queues receipts the index left unverified


async def test_the_migration_queues_every_tenants_receipts_the_index_left_unverified(postgres: Any) -> None:
    tenants = [unique("erasures"), unique("erasures")]
    queued: set[tuple[str, str]] = set()
    with database_before(postgres.owner_dsn, RECHECKS, "erasures") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for tenant in tenants:  # as version 27 logged them: a check row per erase
                for mode, verified, vectors, unchecked, expect in [
                    ("purge", False, 0, ["backups", "postgres_wal_and_dead_tuples", "vector_store_files"], True),
                    ("purge", True, 2, ["backups", "postgres_wal_and_dead_tuples"], False),
                    ("purge", False, 2, ["backups", "postgres_wal_and_dead_tuples"], False),  # rows left: not the index
                    ("forget", False, 0, [], False),
                ]:
                    with conn.transaction():
                        conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                        [(erase_id,)] = conn.execute(
                            "INSERT INTO erasure_log (tenant_id, agent, subject, selector, mode, counts, verified, "
                            "started_at, finished_at) VALUES (%s, 'agent-1', 'alice', '{}', %s, '{}', false, now(), "
                            "now()) RETURNING erase_id::text", (tenant, mode)).fetchall()
                        conn.execute("INSERT INTO erasure_checks (tenant_id, erase_id, verified, vectors, unchecked) "
                                     "VALUES (%s, %s, %s, %s, %s)", (tenant, erase_id, verified, vectors, unchecked))
                    if expect:
                        queued.add((tenant, erase_id))

        assert [m.version for m in await migrate(dsn)] == [m.version for m in available() if m.version >= RECHECKS]

        with psycopg.connect(dsn, autocommit=True) as conn:
            found = set()
            for tenant in tenants:
                with conn.transaction():
                    conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                    found |= {(t, e) for t, e in conn.execute(
                        "SELECT tenant_id, erase_id::text FROM erasure_rechecks WHERE tenant_id = %s", (tenant,))}
            assert found == queued and len(queued) == 2
            forced = conn.execute("SELECT relname, relforcerowsecurity FROM pg_class WHERE relname IN "
                                  "('erasure_log', 'erasure_checks', 'erasure_rechecks')").fetchall()
            assert sorted(forced) == [("erasure_checks", True), ("erasure_log", True), ("erasure_rechecks", True)]


async def test_purges_on_a_vector_server_answer_before_compaction_and_one_round_compacts_for_all(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 item 2: an Erase on a Milvus server flushed and compacted the collection and
    waited for it (≥ 12.5 s; a flush per purge). The index here is a Milvus Lite file made to
    compact the way a server's is handled (``local`` off): the Erase deletes and reads back,
    and the next round compacts once for every purge due."""
    tenant = unique("tenant")
    first, second, kept = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"),
                                          Draft(Category.FACT, "likes tea", key="drink"),
                                          Draft(Category.FACT, "plays chess", key="game"))
    worker = await rig.worker()
    await drain(worker)
    compactions: list[float] = []
    real_compact = rig.index.compact

    async def counted_compact(timeout: float = 240.0) -> bool | None:
        compactions.append(timeout)
        return await real_compact(timeout)

    monkeypatch.setattr(rig.index, "local", False, raising=False)
    monkeypatch.setattr(rig.index, "compact", counted_compact)
    receipts = [await _purge(rig, tenant, memory_id) for memory_id in (first, second)]

    assert compactions == []  # the Erase did not compact
    for receipt in receipts:
        assert receipt.verified and receipt.pending == ("vector_store_files",)
        assert "vector_store_files" in receipt.unchecked
    assert await rig.index.partition(tenant).count(ids=[first, second]) == 0  # deleted and read back
    queued = await rig.owner_rows("SELECT next_attempt_at, EXTRACT(EPOCH FROM next_attempt_at - now()) AS due_in "
                                  "FROM erasure_rechecks WHERE tenant_id = %s", tenant)
    # Both due at the start of the next round (a minute apart by default), the same moment.
    assert len(queued) == 2 and queued[0]["next_attempt_at"] == queued[1]["next_attempt_at"]
    assert 0 < queued[0]["due_in"] <= 60  # type: ignore[operator]

    await _due_now(rig, tenant)
    assert await worker.rechecks.recheck_once() == 2
    assert len(compactions) == 1  # one compaction for the round
    assert await rig.index.residue([first, second]) == set()
    assert await rig.index.partition(tenant).count(ids=[kept]) == 1
    assert await _rechecks(rig, tenant) == []
    again = await _purge(rig, tenant, first)  # the retry reads the log: confirmed
    assert (again.erase_id, again.verified, again.pending) == (receipts[0].erase_id, True, ())
    assert "vector_store_files" not in again.unchecked


async def test_a_retried_purge_whose_check_never_ran_is_answered_from_its_log(rig: Rig) -> None:
    """Issue 39 item 2: the retry of an erase whose check was cut off re-ran the whole check
    (and queued another compaction) every time. It answers from the log; a worker checks."""
    tenant = unique("tenant")
    [purged] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
    worker = await rig.worker()
    await drain(worker)

    async def cut_off(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        raise ConnectionResetError("the server died after the commit")

    with pytest.raises(ConnectionResetError):
        await _purge(rig, tenant, purged, clear=cut_off)

    async def untouched(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        raise AssertionError("a retry is answered from the log, without touching the index")

    retried = await _purge(rig, tenant, purged, clear=untouched)
    assert retried.counts.memories == 1 and not retried.verified
    assert retried.pending == ("vector_index", "vector_store_files")
    assert "vector_store_files" in retried.unchecked
    assert await rig.owner_rows("SELECT 1 FROM erasure_checks WHERE tenant_id = %s", tenant) == []
    # Queued with the commit, due after the purge's fallback deletion: a worker checks it.
    [row] = await _rechecks(rig, tenant)
    assert 55 < row["due_in"] <= 60  # type: ignore[operator]
    await _due_now(rig, tenant)
    assert await drain(worker) == 1  # the fallback deletion
    assert await worker.rechecks.recheck_once() == 1
    confirmed = await _purge(rig, tenant, purged, clear=untouched)
    assert (confirmed.erase_id, confirmed.verified, confirmed.pending) == (retried.erase_id, True, ())
    assert await rig.index.residue([purged]) == set()


async def test_a_purge_of_only_memories_the_caller_cannot_list_reads_like_a_purge_of_nothing(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-interference: a forgotten memory is purged but not counted for a caller whose view
    lists active memories only. On a vector server its purge is left pending there (and
    unchecked): the receipt must not say so, or it tells the memory existed."""
    monkeypatch.setattr(rig.index, "local", False, raising=False)  # handled as a server's
    worker = await rig.worker()
    receipts = []
    for forgotten_exists in (True, False):
        tenant = unique("tenant")
        if forgotten_exists:
            [memory_id] = await rig.write(tenant, Draft(Category.FACT, "lives in Lyon", key="home_city"))
            await drain(worker)
            await rig.store.session(tenant, AGENT).erase("alice", everything(), EraseSelector(key="home_city"),
                                  EraseMode.FORGET, reason="asked")
            await drain(worker)
            await rig.index.partition(tenant).upsert([IndexedMemory(memory_id, "alice", "subject", "", "fact", "", (),
                                                          datetime.now(UTC), None)], [FakeEmbedder.vector("late")])
        purge = ("alice", everything(), EraseSelector(key="home_city"), EraseMode.PURGE)
        first = await with_vectors(rig.store, _clearing(rig, tenant)).session(tenant, AGENT).erase(*purge,
                                                                                                  reason="asked")
        retried = await rig.store.session(tenant, AGENT).erase(*purge, reason="asked")
        receipts.append([(r.verified, r.counts.memories, r.counts.vectors, r.unchecked, r.pending)
                         for r in (first, retried)])
        if forgotten_exists:  # what the log keeps: the vector deleted, its files pending
            [queued] = await _rechecks(rig, tenant)
            assert queued["attempts"] == 0
    assert receipts[0] == receipts[1]

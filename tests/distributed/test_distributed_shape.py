"""Issue 13's distributed shape end to end: Debian's PostgreSQL 15 (a CREATEROLE owner, the
two least-privilege logins), a Milvus 2.3.5 standalone server over gRPC, two replicas with no
in-process worker and two `memoryd worker` processes — written through one replica, read
through the other, with processes killed under load."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest

from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, Agent, draft, full_view, put_view, rule, token_for, unique
from ..support_distributed import Deployment, ExternalPostgres, MilvusStandalone
from ._callers import milvus_count, new_tenant
from .conftest import new_deployment

pytestmark = pytest.mark.slow
PURGE, WAIT = svc.ERASE_MODE_PURGE, svc.CONSISTENCY_WAIT_INDEXED
WRITES_PER_LOADER = 100
ERASURE_ROUND = 20  # seconds between the workers' erasure rounds (60 by default)


@pytest.fixture(scope="module")
def shape(pg15: ExternalPostgres, milvus_standalone: MilvusStandalone,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    deployment = new_deployment(pg15, milvus_standalone, tmp_path_factory.mktemp("shape"))
    rounds = {"MEMORYD_ERASURE_ROUND_SECONDS": str(ERASURE_ROUND)}
    deployment.start_replica(**rounds)  # the first creates the shared keys and the collection
    deployment.start_replica(**rounds)
    deployment.start_worker(**rounds)
    deployment.start_worker(**rounds)
    yield deployment
    deployment.stop_all()


def test_written_through_one_replica_found_by_meaning_through_the_other(shape: Deployment) -> None:
    _, caller = new_tenant(shape)
    try:
        written = caller.via(0).write("alice", draft("fact", "Alice keeps bees on her roof in Lyon", key="hobby"),
                                      consistency=WAIT)
        assert written.indexed
        # By meaning alone (no shared word): asked without a minimum relevance.
        found = caller.via(1).call("Recall", svc.RecallRequest(subject="alice", query="beekeeping honey",
                                                               min_relevance=0.0))
        assert not found.degraded
        assert [m.memory.id for m in found.memories] == [written.results[0].memory_id]
        assert found.memories[0].dense_rank == 1  # the dense channel answered
    finally:
        caller.close()


def test_a_view_changed_through_one_replica_applies_at_the_other_within_the_cache_bound(shape: Deployment) -> None:
    tenant, caller = new_tenant(shape)
    try:
        caller.via(0).write("alice", draft("preference", "Prefers green tea", key="drink"))
        assert len(caller.via(1).list_all("alice")) == 1
        narrowed = full_view("agent-1", read_rules=[rule("event")])
        with grpc.insecure_channel(shape.replicas[0].target) as channel:
            put_view(channel, shape.keys / "signing.pem", tenant, narrowed)
        changed = time.monotonic()
        while caller.via(1).list_all("alice"):
            assert time.monotonic() - changed < 1.0 + 1.0  # view_cache_seconds (1 here) + a call
            time.sleep(0.05)
    finally:
        caller.close()


def _outbox_state(shape: Deployment, tenant: str) -> str:
    """What a failed catch-up leaves to read: the tenant's outbox rows and the workers' logs."""
    with psycopg.connect(shape.owner_dsn) as conn:
        rows = conn.execute(
            "SELECT op, attempts, dead, claim IS NOT NULL AS claimed, last_error, count(*), "
            "round(min(EXTRACT(EPOCH FROM next_attempt_at - now()))::numeric, 1) AS due_in FROM outbox "
            "WHERE tenant_id = %s GROUP BY 1, 2, 3, 4, 5", (tenant,)).fetchall()
    logs = [f"--- {w.log_path.name}\n{w.log_path.read_text()[-2000:]}" for w in shape.workers]
    return "\n".join([f"outbox rows: {rows}", *logs])


def test_a_purge_through_one_replica_leaves_nothing_readable_through_the_other(shape: Deployment) -> None:
    """Issue 39 item 2: every PURGE flushed the whole collection and waited ~10 s for its
    compaction (a client with a 10 s deadline never got a receipt; the flushes multiplied the
    segments). The Erase now answers once the vectors are deleted and read back; the next
    erasure round compacts once for all of them, and the receipt says so meanwhile."""
    tenant, caller = new_tenant(shape)
    try:
        subjects = [f"user-{n}" for n in range(6)]
        ids = {s: [caller.via(0).write(s, draft("event", f"Visited the observatory, night {n}"),
                                       consistency=WAIT).results[0].memory_id for n in range(2)] for s in subjects}
        assert milvus_count(shape, tenant) == 12
        flushes = shape.milvus.requests("Flush")
        receipts = [caller.via(n % 2).call("Erase", svc.EraseRequest(subject=s, all_of_subject=True, mode=PURGE),
                                           timeout=10).receipt for n, s in enumerate(subjects)]
        # Not a flush per purge: at most one round's (one per worker) fell among them.
        assert shape.milvus.requests("Flush") - flushes <= 2
        for receipt in receipts:
            # Read back strongly (bug 2 of issue 13): the delete is seen at once.
            assert receipt.verified and receipt.counts.memories == 2 and receipt.counts.vectors >= 2
            assert list(receipt.pending) == ["vector_store_files"] and "vector_store_files" in receipt.unchecked
        assert milvus_count(shape, tenant) == 0
        other = caller.via(1)
        assert other.list_all("user-0") == []
        recalled = other.call("Recall", svc.RecallRequest(subject="user-0", query="observatory night"))
        assert not recalled.memories and not recalled.degraded
        for memory_id in ids["user-0"]:
            with pytest.raises(grpc.RpcError) as missing:
                other.history("user-0", memory_id)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND

        # The next round compacts the collection once and confirms every one of them: the same
        # Erase retried reads it. Out of reach stay the server's old binlogs and message log.
        deadline = time.monotonic() + ERASURE_ROUND + 10 + 240  # a round, a worker's idle wait, the compaction
        for n, subject in enumerate(subjects):
            again = svc.EraseRequest(subject=subject, all_of_subject=True, mode=PURGE)
            while (latest := caller.via(n % 2).call("Erase", again, timeout=10).receipt).pending:
                assert time.monotonic() < deadline, f"never confirmed: {latest}"
                time.sleep(1)
            assert latest.erase_id == receipts[n].erase_id and latest.verified
            assert "vector_store_files" not in latest.unchecked
            assert "vector_store_binlogs_and_message_log" in latest.unchecked
    finally:
        caller.close()


def test_concurrent_writes_through_both_replicas_keep_one_verifiable_audit_chain(shape: Deployment) -> None:
    tenant, caller = new_tenant(shape)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(15):
                caller.via(n).write(f"s{i % 3}", draft("event", f"replica {n} wrote event {i}"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=write, args=(n,)) for n in (0, 1, 0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        done = subprocess.run([*MEMORYD, "audit", "verify", "--tenant", tenant], env=shape.env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith("intact: 61 events"), done.stdout  # the view, then 60 writes
    finally:
        caller.close()


def test_replicas_and_workers_killed_mid_load_lose_and_double_nothing(shape: Deployment) -> None:
    """Clients retry with their idempotency keys through whichever replica answers."""
    tenant, caller = new_tenant(shape)
    acknowledged: dict[str, str] = {}  # idempotency key -> memory id
    lock = threading.Lock()
    stop = threading.Event()

    def load(worker_no: int) -> None:
        # Paced and capped: the test is about losing and doubling nothing across the kills,
        # not about how much two workers index in its deadline (an unpaced load wrote ~1,200
        # memories in 15 s, more than they embed in two minutes on a slow machine).
        n = 0
        while not stop.is_set() and n < WRITES_PER_LOADER:
            time.sleep(0.1)
            key, text = str(uuid.uuid4()), f"load {worker_no} note {n}"
            for attempt in range(60):
                replica = (worker_no + attempt) % 2
                try:
                    channel = grpc.insecure_channel(shape.replicas[replica].target)
                    with channel:
                        request = svc.WriteRequest(subject="loader", items=[draft("event", text)],
                                                   idempotency_key=key)
                        done = Agent(channel, caller.token).call("Write", request, timeout=10)
                    with lock:
                        acknowledged[key] = done.results[0].memory_id
                    break
                except grpc.RpcError as exc:
                    assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), exc
                    time.sleep(0.2)
            n += 1

    try:
        threads = [threading.Thread(target=load, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        # These sleeps are the scenario, not waits for a condition: the load runs for a while
        # before the kills, while a replica and a worker are dead, and after they are back.
        time.sleep(3)
        shape.workers[0].stop(signal.SIGKILL)    # mid-batch, holding claimed outbox rows
        shape.replicas[1].stop(signal.SIGKILL)   # with calls in flight
        time.sleep(3)
        shape.restart_replica(1)
        shape.restart_worker(0)
        time.sleep(3)
        stop.set()
        for t in threads:
            t.join(120)
        assert len(acknowledged) > 20
        with grpc.insecure_channel(shape.replicas[0].target) as channel:
            listed = Agent(channel, caller.token).list_all("loader")
        # Every acknowledged write is there exactly once: no loss, no double.
        assert sorted(m.id for m in listed) == sorted(acknowledged.values())
        assert len({m.text for m in listed}) == len(listed)
        # And the surviving and restarted workers index all of it.
        deadline = time.monotonic() + 120
        while milvus_count(shape, tenant) < len(listed):
            assert time.monotonic() < deadline, "the outbox did not catch up:\n" + _outbox_state(shape, tenant)
            time.sleep(1)
        assert milvus_count(shape, tenant) == len(listed)
    finally:
        stop.set()
        caller.close()


def test_a_worker_with_another_master_key_refuses_to_start(shape: Deployment, tmp_path: Path) -> None:
    """Bug 6: it used to settle the outbox without indexing (WAIT_INDEXED said indexed)."""
    other = tmp_path / "other.key"
    other.write_bytes(b"\x01" * 32)
    other.chmod(0o600)
    env = shape.env(MEMORYD_KEY_FILE=str(other))
    done = subprocess.run([*MEMORYD, "worker"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "master key" in done.stderr and "MEMORYD_KEY_FILE" in done.stderr and "Traceback" not in done.stderr


def test_the_owner_password_is_in_no_process_environment(shape: Deployment) -> None:
    for proc in [*shape.replicas, *shape.workers]:
        assert "MEMORYD_POSTGRES_DSN" not in proc.env
        assert shape.owner_dsn not in " ".join(proc.env.values())
    with psycopg.connect(shape.owner_dsn) as conn:
        # Logins only: an autovacuum worker on this database shows up with no user.
        users = {r[0] for r in conn.execute("SELECT usename FROM pg_stat_activity WHERE datname = current_database() "
                                            "AND usename IS NOT NULL")}
    assert users <= {"memoryd_app", "memoryd_worker", "memoryd_owner"}
    assert {"memoryd_app", "memoryd_worker"} <= users


def test_a_replica_killed_during_a_purge_loses_neither_the_receipt_nor_the_vector_deletion(
        shape: Deployment) -> None:
    """Bugs 3 and 8: the purge commits, then the replica dies before clearing Milvus. The
    vectors must still go (the outbox) and the client's retry must get the receipt."""
    tenant, caller = new_tenant(shape)
    try:
        for n in range(3):
            caller.via(0).write("alice", draft("event", f"Hiked the ridge, day {n}"), consistency=WAIT)
        assert milvus_count(shape, tenant) == 3
        assert shape.milvus.process is not None
        group = shape.milvus.process.pid
        os.killpg(group, signal.SIGSTOP)  # Milvus hangs: the replica's vector delete waits on it
        try:
            request = svc.EraseRequest(subject="alice", all_of_subject=True, mode=PURGE, reason="user request")
            errors: list[grpc.RpcError] = []

            def erase() -> None:
                try:
                    caller.via(1).call("Erase", request, timeout=60)
                except grpc.RpcError as exc:
                    errors.append(exc)

            thread = threading.Thread(target=erase)
            thread.start()
            deadline = time.monotonic() + 30
            with psycopg.connect(shape.app_dsn, autocommit=True) as conn:
                conn.execute("SELECT set_config('memoryd.tenant', %s, false)", (tenant,))
                while not conn.execute("SELECT count(*) FROM erasure_log").fetchone()[0]:
                    assert time.monotonic() < deadline, "the purge did not commit"
                    time.sleep(0.05)
            shape.replicas[1].stop(signal.SIGKILL)  # after the commit, before Milvus answers
            thread.join(30)
            assert errors and errors[0].code() == grpc.StatusCode.UNAVAILABLE
        finally:
            os.killpg(group, signal.SIGCONT)
        shape.restart_replica(1)
        # The client retries the same request through the other replica: the first receipt,
        # answered from the log (issue 39 item 2: a retry re-ran the whole check, and queued
        # another compaction, every time) — with what the background still has to confirm.
        receipt = caller.via(0).call("Erase", request, timeout=10).receipt
        assert receipt.counts.memories == 3 and receipt.counts.keys == 1
        with psycopg.connect(shape.app_dsn, autocommit=True) as conn:
            conn.execute("SELECT set_config('memoryd.tenant', %s, false)", (tenant,))
            [(logged,)] = conn.execute("SELECT erase_id::text FROM erasure_log").fetchall()
            assert conn.execute("SELECT count(*) FROM erasure_checks").fetchone() == (0,)  # nothing re-checked
        assert receipt.erase_id == logged
        assert not receipt.verified and list(receipt.pending) == ["vector_index", "vector_store_files"]
        deadline = time.monotonic() + 60 + 30
        while milvus_count(shape, tenant):
            assert time.monotonic() < deadline, "the purged vectors were never deleted"
            time.sleep(0.5)
        # A worker checks it once the outbox has deleted them (the fallback deletion is due a
        # minute after the purge): then the retry reads the confirmed receipt.
        deadline = time.monotonic() + 300
        while (latest := caller.via(0).call("Erase", request, timeout=10).receipt).pending:
            assert time.monotonic() < deadline, _outbox_state(shape, tenant)
            time.sleep(1)
        assert latest.verified and latest.erase_id == logged
    finally:
        caller.close()


@pytest.mark.timeout(600)  # the deployment may start in this test; then a minute's wait for the outbox
def test_a_receipt_answered_while_milvus_hung_is_verified_in_the_background_once_it_answers(
        shape: Deployment) -> None:
    """Issue 39 item 4: such receipts stayed unverified forever (953 in the operator's run)."""
    tenant, caller = new_tenant(shape)
    try:
        for key, text in (("home_city", "Lives in Lyon"), ("drink", "Likes tea")):
            caller.via(0).write("alice", draft("fact", text, key=key), consistency=WAIT)
        assert milvus_count(shape, tenant) == 2
        assert shape.milvus.process is not None
        group = shape.milvus.process.pid
        request = svc.EraseRequest(subject="alice", key="home_city", mode=PURGE, reason="user request")
        os.killpg(group, signal.SIGSTOP)  # Milvus hangs: the purge's vector delete times out
        try:
            receipt = caller.via(0).call("Erase", request, timeout=60).receipt
        finally:
            os.killpg(group, signal.SIGCONT)
        assert receipt.counts.memories == 1 and not receipt.verified
        # A worker re-checks it once the outbox has deleted the vector: a generous bound (the
        # queued fallback deletion is due a minute after the purge, then the re-check's wait).
        deadline = time.monotonic() + 300
        while True:
            with psycopg.connect(shape.app_dsn, autocommit=True) as conn:  # the owner is under RLS too
                conn.execute("SELECT set_config('memoryd.tenant', %s, false)", (tenant,))
                rechecked = conn.execute("SELECT verified FROM erasure_checks WHERE tenant_id = %s AND recheck "
                                         "ORDER BY checked_at DESC LIMIT 1", (tenant,)).fetchall()
            if rechecked == [(True,)]:
                break
            assert time.monotonic() < deadline, _outbox_state(shape, tenant)
            time.sleep(1)
        assert milvus_count(shape, tenant) == 1  # the other memory's vector stays
        again = caller.via(1).call("Erase", request, timeout=60).receipt
        assert (again.erase_id, again.verified, again.counts.memories) == (receipt.erase_id, True, 1)
        listed = subprocess.run([*MEMORYD, "audit", "erasures", "--tenant", tenant], env=shape.env(),
                                capture_output=True, text=True, timeout=120)
        assert f"{receipt.erase_id} purge by agent-1" in listed.stdout
        assert ": verified by a later re-check" in listed.stdout, listed.stdout + listed.stderr
    finally:
        caller.close()


def test_recall_answers_within_its_deadline_while_milvus_restarts(shape: Deployment) -> None:
    """Bug 4: the reconnect (load_collection) ran on the index's one thread and every Recall
    queued behind it for ~30 s. Recall must degrade to keywords instead, then recover."""
    _, caller = new_tenant(shape)
    try:
        caller.via(0).write("alice", draft("fact", "Alice plays the cello in an orchestra", key="music"),
                            consistency=WAIT)
        request = svc.RecallRequest(subject="alice", query="cello orchestra")
        shape.milvus.kill()
        shape.milvus.start()
        slow, degraded, recovered = [], 0, False
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for n in (0, 1):
                started = time.monotonic()
                try:
                    found = caller.via(n).call("Recall", request, timeout=5)
                except grpc.RpcError as exc:
                    slow.append((n, exc.code(), round(time.monotonic() - started, 1)))
                    continue
                assert [m.memory.text for m in found.memories] == ["Alice plays the cello in an orchestra"]
                degraded += found.degraded
                recovered = recovered or (n == 1 and not found.degraded and time.monotonic() - started < 5)
            if recovered:  # the collection is loaded again: the window is over
                break
            time.sleep(0.5)
        assert slow == [], f"Recalls that missed their 5 s deadline: {slow}"
        assert recovered, "Recall never used the vector index again"
    finally:
        caller.close()


def test_a_worker_confirms_a_batch_of_many_tenants_with_one_read_back(shape: Deployment) -> None:
    """Bug 9: one strong read-back per tenant per batch (~300 ms each on a Milvus server) held
    a worker to a few rows a second. bench/probes/worker_throughput.py measures the rate."""
    signing = shape.keys / "signing.pem"
    for worker in shape.workers:
        worker.stop()
    try:
        with grpc.insecure_channel(shape.replicas[0].target) as channel:
            for n in range(32):
                tenant = unique(f"spread{n}")
                put_view(channel, signing, tenant, full_view("agent-1"))
                Agent(channel, token_for(signing, tenant)).write("alice", draft("event", f"note {n}"),
                                                                  draft("event", f"other note {n}"))
        before = shape.milvus.queries()
        shape.restart_worker(0)
        with psycopg.connect(shape.worker_dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 120
            while conn.execute("SELECT count(*) FROM outbox").fetchone()[0]:
                assert time.monotonic() < deadline, "the worker did not drain the outbox"
                time.sleep(0.2)
        # 64 rows of 32 tenants are two batches of 32: one read-back each (not one per tenant).
        assert shape.milvus.queries() - before <= 4
    finally:
        for n, worker in enumerate(shape.workers):
            if worker.process is None:
                shape.restart_worker(n)

"""Fault injection: the index, the database or the server itself goes away during a stream
of writes. Whatever was acknowledged is kept, indexed once the fault is over, and never
duplicated; callers see UNAVAILABLE (retryable), never INTERNAL.

Each test runs its own server (and its own database or PostgreSQL); waits are bounded.
The embedder failing (dead letters, metrics, replay) is in test_embedder_outage.py.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import psycopg
from pymilvus import MilvusClient

from memoryd.storage import EmbeddedPostgres
from memoryd.v1 import memory_service_pb2 as svc

from ..support import (Agent, ServerProcess, agent_with_view, draft, fails, free_port, full_view,
                       put_view, server_env, unique, wait_until)

CATCH_UP_SECONDS = 30  # the bound of the issue: acknowledged writes are searchable within 30 s
SUBJECT = "alice"
_TOPICS = ["booked a ferry to", "bought a painting in", "ran a half marathon in", "learned to cook paella in",
           "lost an umbrella in", "met an old friend in", "visited a museum in", "rented a bicycle in"]
_PLACES = ["Naxos", "Lisbon", "Oslo", "Kyoto", "Quito", "Tallinn", "Hobart", "Accra", "Lima", "Perth", "Graz"]


def _text(i: int, token: str) -> str:
    """A distinct episodic memory; ``token`` makes it unique across the test."""
    return f"Alice {_TOPICS[i % len(_TOPICS)]} {_PLACES[i % len(_PLACES)]} on trip {token}"


@dataclass
class Writer:
    """A thread writing distinct episodic memories one call after another, recording which
    were acknowledged (memory id -> text) and the status codes of the calls that failed."""

    agent: Agent
    items_per_call: int = 1
    retry: bool = False  # retry a failed call with the same idempotency key until it is acknowledged
    acknowledged: dict[str, str] = field(default_factory=dict)
    failures: list[grpc.StatusCode] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Writer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            assert not self._thread.is_alive(), "the writer thread did not finish"

    def _run(self) -> None:
        i = 0
        texts: list[str] = []
        while not self._stop.is_set():
            if not (self.retry and texts):
                texts = [_text(i + k, unique("t")) for k in range(self.items_per_call)]
                key = unique("write")
                i += self.items_per_call
            try:
                response = self.agent.call("Write", svc.WriteRequest(
                    subject=SUBJECT, items=[draft("event", t) for t in texts], idempotency_key=key), timeout=10)
            except grpc.RpcError as error:
                with self._lock:
                    self.failures.append(error.code())  # type: ignore[attr-defined]
                time.sleep(0.1)
                continue
            with self._lock:
                for result, text in zip(response.results, texts, strict=True):
                    self.acknowledged[result.memory_id or f"(rejected: {result.reason})"] = text
            texts = []
            time.sleep(0.2)  # a steady stream, not a flood: every write is checked one by one afterwards

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self.acknowledged), len(self.failures)


def _wait_for(what: str, done: Callable[[], bool], timeout: float, diagnose: Callable[[], str]) -> None:
    wait_until(done, timeout, 0.2, what=what, diagnose=diagnose)


def _not_found_by_meaning(agent: Agent, acknowledged: dict[str, str]) -> dict[str, str]:
    """The acknowledged memories a Recall with their own text does not find in the dense channel."""
    missing = {}
    for memory_id, text in acknowledged.items():
        try:
            recalled = agent.call("Recall", svc.RecallRequest(subject=SUBJECT, query=text, top_k=10), timeout=10)
        except grpc.RpcError as error:
            missing[memory_id] = f"Recall failed: {error.code()}"  # type: ignore[attr-defined]
            continue
        dense = {m.memory.id for m in recalled.memories if m.dense_rank > 0}
        if recalled.degraded or memory_id not in dense:
            missing[memory_id] = f"degraded={recalled.degraded} {recalled.degraded_reason!r} text={text!r}"
    return missing


def _assert_stored_once(agent: Agent, acknowledged: dict[str, str]) -> None:
    """Every acknowledged memory is in MemoryView exactly once (by id and by text)."""
    listed = agent.list_all(SUBJECT)
    ids = [m.id for m in listed]
    texts = [m.text for m in listed]
    lost = sorted(set(acknowledged) - set(ids))
    assert not lost, f"{len(lost)} acknowledged writes are missing: {[acknowledged[i] for i in lost]}"
    assert len(ids) == len(set(ids)), "MemoryView lists a memory twice"
    duplicated = [t for t in acknowledged.values() if texts.count(t) != 1]
    assert not duplicated, f"stored more than once: {duplicated}"


def _outbox(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        return conn.execute("SELECT memory_id, op, attempts, dead, last_error FROM outbox").fetchall()


def _leases_left(dsn: str) -> list[float]:
    """Seconds until each claimed outbox row's lease runs out."""
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        rows = conn.execute("SELECT EXTRACT(EPOCH FROM next_attempt_at - now()) FROM outbox "
                            "WHERE claim IS NOT NULL").fetchall()
    return [float(row[0]) for row in rows]


def _diagnose(process: ServerProcess, dsn: str | None = None) -> Callable[[], str]:
    def run() -> str:
        outbox = ""
        if dsn:
            try:
                outbox = f"outbox: {_outbox(dsn)[:20]}\n"
            except psycopg.Error as exc:
                outbox = f"outbox unreadable: {exc}\n"
        return outbox + f"server log tail ({process.log_path}):\n" + process.dump_stacks()[-6000:]
    return run


# 1. Milvus stopped during a stream of writes, then restarted ---------------------------------------


def _index_counts(uri: str, ids: list[str]) -> dict[str, int]:
    """How many vectors the index holds for each id, read straight from Milvus."""
    client = MilvusClient(uri=uri, timeout=10)
    try:
        counts = dict.fromkeys(ids, 0)
        quoted = ", ".join(f'"{i}"' for i in ids)
        for collection in client.list_collections():
            client.load_collection(collection)  # a restarted Milvus brings it back released
            for row in client.query(collection, filter=f"id in [{quoted}]", output_fields=["id"]):
                counts[row["id"]] += 1
        return counts
    finally:
        client.close()


def test_milvus_stopped_mid_stream_loses_and_duplicates_nothing(tmp_path, private_database, key_file, milvus):
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "memoryd"), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_MILVUS_URI=milvus.uri)
    (tmp_path / "memoryd").mkdir()
    process = ServerProcess(env, tmp_path / "memoryd.log").start()
    diagnose = _diagnose(process, private_database)
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, unique("tenant"))
            with Writer(agent) as writer:
                _wait_for("some writes are acknowledged", lambda: writer.counts()[0] >= 5, 30, diagnose)
                milvus.stop()
                before = writer.counts()[0]
                _wait_for("writes are acknowledged while Milvus is down",
                          lambda: writer.counts()[0] >= before + 8, 30, diagnose)
                # A write that asks to wait for the index answers within its deadline: durable, not indexed.
                waited_text = _text(0, unique("wait"))
                waited = agent.call("Write", svc.WriteRequest(subject=SUBJECT, items=[draft("event", waited_text)],
                                                              consistency=svc.CONSISTENCY_WAIT_INDEXED), timeout=4)
                assert not waited.indexed
                milvus.start()
                during = writer.counts()[0]
                _wait_for("writes go on after Milvus is back", lambda: writer.counts()[0] >= during + 5, 30, diagnose)
            assert writer.failures == [], "a write failed although only the index was down"
            acknowledged = dict(writer.acknowledged)
            acknowledged[waited.results[0].memory_id] = waited_text

            ids = sorted(acknowledged)
            _wait_for("the index holds one vector for every acknowledged write",
                      lambda: set(_index_counts(milvus.uri, ids).values()) == {1}, CATCH_UP_SECONDS,
                      lambda: f"vectors per memory: {_index_counts(milvus.uri, ids)}\n{diagnose()}")
            assert _not_found_by_meaning(agent, acknowledged) == {}
            _assert_stored_once(agent, acknowledged)
            assert set(_index_counts(milvus.uri, ids).values()) == {1}  # and none came twice later
    finally:
        process.stop()


# 2. PostgreSQL restarted during writes ------------------------------------------------------------


def test_postgres_restarted_mid_stream_gives_unavailable_and_loses_nothing(tmp_path, key_file):
    pg = EmbeddedPostgres(tmp_path / "pg")  # its own PostgreSQL: this test stops it
    pg.start()
    process = None
    try:
        env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "memoryd"), MEMORYD_POSTGRES_DSN=pg.owner_dsn,
                         MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_POSTGRES_TIMEOUT_SECONDS="2")
        (tmp_path / "memoryd").mkdir()
        process = ServerProcess(env, tmp_path / "memoryd.log").start()
        diagnose = _diagnose(process)
        with grpc.insecure_channel(process.target) as channel:
            tenant = unique("tenant")
            agent = agent_with_view(channel, key_file, tenant)
            with Writer(agent, retry=True) as writer:
                _wait_for("some writes are acknowledged", lambda: writer.counts()[0] >= 5, 30, diagnose)
                pg.stop()
                _wait_for("writes fail while PostgreSQL is down", lambda: writer.counts()[1] >= 3, 30, diagnose)
                first = next(iter(writer.acknowledged))
                for method, call in (("Recall", svc.RecallRequest(subject=SUBJECT, query="ferry to Naxos")),
                                     ("MemoryView", svc.MemoryViewRequest(subject=SUBJECT)),
                                     ("GetHistory", svc.GetHistoryRequest(subject=SUBJECT, memory_id=first)),
                                     ("Erase", svc.EraseRequest(subject=SUBJECT, mode=svc.ERASE_MODE_FORGET,
                                                                ids=svc.MemoryIds(ids=[first])))):
                    outage = fails(agent.call, method, call, timeout=15)
                    assert outage.code == grpc.StatusCode.UNAVAILABLE, (method, outage)
                outage = fails(put_view, channel, key_file, tenant, full_view("agent-2"))
                assert outage.code == grpc.StatusCode.UNAVAILABLE, ("PutView", outage)
                pg.start()
                after_restart = writer.counts()[0]
                _wait_for("writes succeed again without restarting the server",
                          lambda: writer.counts()[0] >= after_restart + 5, 30, diagnose)
            acknowledged = dict(writer.acknowledged)
            assert set(writer.failures) == {grpc.StatusCode.UNAVAILABLE}, writer.failures

            _assert_stored_once(agent, acknowledged)
            # A call cut off by the outage may have committed; its retry (same idempotency key) then
            # returned the first result, so nothing is stored that was not acknowledged.
            assert sorted(m.id for m in agent.list_all(SUBJECT)) == sorted(acknowledged)
            _wait_for("every acknowledged write is searchable by meaning",
                      lambda: not _not_found_by_meaning(agent, acknowledged), CATCH_UP_SECONDS,
                      lambda: f"not found: {_not_found_by_meaning(agent, acknowledged)}\n{diagnose()}")
        assert process.stop() == 0
        process = None
    finally:
        if process is not None:
            process.stop()
        pg.stop()


# 3. The server killed (SIGKILL) mid-load, then restarted ------------------------------------------


def test_server_killed_mid_load_resumes_its_outbox_after_restart(tmp_path, key_file):
    # The embedded default (PostgreSQL and Milvus Lite under the data directory), as in a single-node
    # deployment: the killed server's PostgreSQL outlives it as an orphan and is taken over on restart.
    # (The outbox lives in PostgreSQL either way; a configured one only makes this easier.)
    data_dir = tmp_path / "memoryd"
    data_dir.mkdir()
    # A fixed port, so the writer goes on writing to the restarted server.
    env = server_env(MEMORYD_DATA_DIR=str(data_dir), MEMORYD_SIGNING_KEY_FILE=str(key_file),
                     MEMORYD_ADDR=f"127.0.0.1:{free_port()}")
    dsn = f"postgresql://postgres:@/postgres?host={(data_dir / 'postgres').resolve()}"
    process = ServerProcess(env, tmp_path / "memoryd.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, unique("tenant"))
            with Writer(agent, items_per_call=5, retry=True) as writer:
                def frozen_with_a_batch_in_flight() -> bool:
                    # Frozen first, so the batch cannot settle between this look and the kill.
                    if writer.counts()[0] < 20:
                        return False
                    assert process.process is not None
                    process.process.send_signal(signal.SIGSTOP)
                    if _leases_left(dsn):
                        return True
                    process.process.send_signal(signal.SIGCONT)
                    return False

                _wait_for("the outbox has a batch in flight", frozen_with_a_batch_in_flight, 30,
                          _diagnose(process, dsn))
                process.stop(signal.SIGKILL)
                killed_at = time.monotonic()
                left = len(_outbox(dsn))
                # Nobody gives the killed server's batches back: they are free again when their
                # lease runs out, within 10 s.
                leases_left = _leases_left(dsn)
                _wait_for("the writer sees the server gone", lambda: writer.counts()[1] >= 1, 30, lambda: "")
                process = ServerProcess(env, tmp_path / "memoryd.log").start()
                diagnose = _diagnose(process, dsn)
                after_restart = writer.counts()[0]
                _wait_for("writes are acknowledged by the restarted server",
                          lambda: writer.counts()[0] >= after_restart + 10, 30, diagnose)
            acknowledged = dict(writer.acknowledged)
            assert set(writer.failures) == {grpc.StatusCode.UNAVAILABLE}, writer.failures
            assert left > 0, "the kill came after the outbox had caught up: it proves nothing"
            assert leases_left and max(leases_left) <= 10.0, leases_left

            _assert_stored_once(agent, acknowledged)
            # The call cut off by the kill was retried with its idempotency key: stored once, not twice.
            assert sorted(m.id for m in agent.list_all(SUBJECT)) == sorted(acknowledged)
            # Counted from the kill: the batches the killed server held are claimed again once
            # their lease runs out, and the restart does not wait for that.
            _wait_for("every acknowledged write is searchable by meaning within 30 s of the kill",
                      lambda: not _not_found_by_meaning(agent, acknowledged),
                      max(1.0, killed_at + CATCH_UP_SECONDS - time.monotonic()),
                      lambda: f"not found: {_not_found_by_meaning(agent, acknowledged)}\n{diagnose()}")
            _wait_for("the outbox is empty", lambda: _outbox(dsn) == [], CATCH_UP_SECONDS, diagnose)
        # A graceful stop after the kill still stops the embedded PostgreSQL (the killed process's
        # handle on it is forgotten, not waited for forever).
        assert process.stop() == 0
        assert not (data_dir / "postgres" / "postmaster.pid").exists(), "the embedded PostgreSQL was left running"
    finally:
        process.stop()
        if (data_dir / "postgres" / "postmaster.pid").exists():
            orphan = EmbeddedPostgres(data_dir)  # the test failed with the killed server's PostgreSQL left running
            orphan.start()
            orphan.stop()

"""A remote Milvus (``milvus-lite server`` on loopback) that goes away and comes back.

This exercises the configured path (MEMORYD_MILVUS_URI), not the embedded one.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, ServerProcess, draft, server_env, token_for, unique

MILVUS_LITE = Path(sys.executable).parent / "milvus-lite"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MilvusServer:
    """``milvus-lite server`` bound to loopback (its default would be every interface)."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir, self.log, self.port = data_dir, log, _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [str(MILVUS_LITE), "server", "--data-dir", str(self.data_dir), "--host", "127.0.0.1",
                 "--port", str(self.port)], stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"milvus-lite server exited; see {self.log}")
                time.sleep(0.2)
        raise TimeoutError("milvus-lite server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


@pytest.fixture
def milvus(tmp_path: Path) -> Iterator[MilvusServer]:
    server = MilvusServer(tmp_path / "milvus", tmp_path / "milvus.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def memoryd_on_remote_milvus(tmp_path, postgres, key_file, milvus) -> Iterator[ServerProcess]:
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "memoryd"), MEMORYD_POSTGRES_DSN=postgres.owner_dsn,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_MILVUS_URI=milvus.uri)
    (tmp_path / "memoryd").mkdir()
    process = ServerProcess(env, tmp_path / "memoryd.log").start()
    yield process
    process.stop()


def _recall(agent: Agent, query: str, top_k: int = 20) -> svc.RecallResponse:
    return agent.call("Recall", svc.RecallRequest(subject="alice", query=query, top_k=top_k))


def test_milvus_outage_loses_no_write_and_recall_degrades_to_keywords(memoryd_on_remote_milvus, milvus, key_file):
    with grpc.insecure_channel(memoryd_on_remote_milvus.target) as channel:
        agent = Agent(channel, token_for(key_file, unique("tenant")))
        before = agent.write("alice", draft("event", "Alice booked a ferry to Naxos"),
                             consistency=svc.CONSISTENCY_WAIT_INDEXED)
        assert before.indexed
        assert _recall(agent, "boat trip to a Greek island").memories[0].dense_rank == 1

        milvus.stop()
        acknowledged = []
        for i in range(5):
            response = agent.write("alice", draft("event", f"Alice packed item number {i} for the Naxos trip"))
            assert not response.indexed
            acknowledged.append(response.results[0].memory_id)
        during = _recall(agent, "Naxos")
        assert during.degraded and "dense" in during.degraded_reason
        found = {m.memory.id for m in during.memories}
        assert set(acknowledged) <= found  # the keyword channel still finds every acknowledged write
        assert all(m.dense_rank == 0 for m in during.memories)

        milvus.start()
        deadline = time.monotonic() + 60
        while True:
            after = _recall(agent, "what did Alice pack for her trip")
            dense = {m.memory.id for m in after.memories if m.dense_rank > 0}
            if not after.degraded and set(acknowledged) <= dense:
                break
            assert time.monotonic() < deadline, "the outbox did not catch up after Milvus came back"
            time.sleep(0.5)
        # Nothing was lost or duplicated.
        assert sorted(m.text for m in agent.list_all("alice")).count("Alice booked a ferry to Naxos") == 1
        assert len(agent.list_all("alice")) == 6


def test_purge_while_milvus_is_down_is_reported_unverified_and_finished_later(memoryd_on_remote_milvus, milvus,
                                                                             key_file):
    with grpc.insecure_channel(memoryd_on_remote_milvus.target) as channel:
        agent = Agent(channel, token_for(key_file, unique("tenant")))
        agent.write("alice", draft("event", "Alice's locker code is 1234"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
        milvus.stop()

        receipt = agent.erase("alice", all_of_subject=True).receipt
        assert receipt.counts.memories == 1 and not receipt.verified

        milvus.start()
        deadline = time.monotonic() + 60
        while True:  # the outbox deletes the vector once Milvus is back; a repeat then verifies
            again = agent.erase("alice", all_of_subject=True).receipt
            if again.verified:
                break
            assert time.monotonic() < deadline, "the vector was never deleted"
            time.sleep(0.5)
        assert _recall(agent, "locker code").memories == []

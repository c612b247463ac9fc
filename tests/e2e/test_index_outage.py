"""A remote Milvus (``milvus-lite server`` on loopback) that goes away and comes back.

This exercises the configured path (MEMORYD_MILVUS_URI), not the embedded one.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import psycopg
import pytest

from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, ServerProcess, agent_with_view, draft, server_env, unique, wait_until

@pytest.fixture
def memoryd_on_remote_milvus(tmp_path, private_database, key_file, milvus) -> Iterator[ServerProcess]:
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "memoryd"), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_MILVUS_URI=milvus.uri)
    (tmp_path / "memoryd").mkdir()
    process = ServerProcess(env, tmp_path / "memoryd.log").start()
    yield process
    process.stop()


def _recall(agent: Agent, query: str, top_k: int = 20) -> svc.RecallResponse:
    # What each channel finds, not whether it is relevant enough: no minimum relevance.
    return agent.call("Recall", svc.RecallRequest(subject="alice", query=query, top_k=top_k, min_relevance=0.0))


def test_milvus_outage_loses_no_write_and_recall_degrades_to_keywords(memoryd_on_remote_milvus, milvus, key_file,
                                                                     private_database):
    tenant = unique("tenant")
    with grpc.insecure_channel(memoryd_on_remote_milvus.target) as channel:
        agent = agent_with_view(channel, key_file, tenant)
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
        last: dict[str, object] = {}

        def caught_up() -> bool:
            after = _recall(agent, "what did Alice pack for her trip")
            dense = {m.memory.id for m in after.memories if m.dense_rank > 0}
            last.update(degraded=after.degraded, dense=sorted(dense))
            return not after.degraded and set(acknowledged) <= dense

        def diagnose() -> str:
            with psycopg.connect(private_database) as conn:
                outbox = conn.execute("SELECT memory_id, op, attempts, dead, next_attempt_at, last_error "
                                      "FROM outbox WHERE tenant_id = %s", (tenant,)).fetchall()
            return (f"{last} acknowledged={sorted(acknowledged)} outbox={outbox}; server state:\n"
                    + memoryd_on_remote_milvus.dump_stacks())

        wait_until(caught_up, timeout=60, interval=0.5, diagnose=diagnose,
                   what="the outbox catches up after Milvus came back (no degraded Recall, every write dense)")
        # Nothing was lost or duplicated.
        assert sorted(m.text for m in agent.list_all("alice")).count("Alice booked a ferry to Naxos") == 1
        assert len(agent.list_all("alice")) == 6


def test_purge_while_milvus_is_down_is_reported_unverified_and_finished_later(memoryd_on_remote_milvus, milvus,
                                                                             key_file):
    with grpc.insecure_channel(memoryd_on_remote_milvus.target) as channel:
        agent = agent_with_view(channel, key_file, unique("tenant"))
        agent.write("alice", draft("event", "Alice's locker code is 1234"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
        milvus.stop()

        receipt = agent.erase("alice", all_of_subject=True).receipt
        assert receipt.counts.memories == 1 and not receipt.verified

        milvus.start()
        # The outbox deletes the vector once Milvus is back; a repeat then verifies.
        wait_until(lambda: agent.erase("alice", all_of_subject=True).receipt.verified, timeout=60, interval=0.5,
                   what="the vector is deleted")
        assert _recall(agent, "locker code").memories == []

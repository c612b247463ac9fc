"""The lifecycle sweeper end to end: `memoryd lifecycle sweep` against the suite's server (an
operator or cron runs a sweep with a clock of its choosing), and the sweeper task of a server."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import grpc
import psycopg

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, ROOT, ServerProcess, agent_with_view, draft, server_env, unique, wait_until


def lifecycle(server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, "lifecycle", *args], env=server.env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_sweep_with_a_later_clock_forgets_expired_memories_of_the_tenant(server, agent, tenant):
    agent.write("alice", draft("context", "Staying in Lisbon", key="city"), draft("fact", "Speaks Portuguese",
                                                                                   key="language"))
    soon = (datetime.now(UTC) + timedelta(days=6)).isoformat()
    result = lifecycle(server, "sweep", "--tenant", tenant, "--now", soon)
    assert result.returncode == 0, result.stderr
    assert "swept 1 tenant(s): 0 expired, 0 stale forgotten, 0 evicted" in result.stdout

    later = (datetime.now(UTC) + timedelta(days=8)).isoformat()
    result = lifecycle(server, "sweep", "--tenant", tenant, "--now", later)
    assert result.returncode == 0, result.stderr
    assert "swept 1 tenant(s): 1 expired" in result.stdout
    assert [m.key for m in agent.list("alice").memories] == ["language"]
    forgotten = agent.list("alice", statuses=[pb.MEMORY_STATUS_FORGOTTEN]).memories
    assert [m.key for m in forgotten] == ["city"]
    assert agent.recall_keys("alice", "city").memories == []

    counts = lifecycle(server, "counts", "--tenant", tenant)
    assert counts.returncode == 0, counts.stderr
    assert "lifecycle.expired: 1" in counts.stdout


def test_a_sweep_refuses_a_clock_that_is_not_a_time(server):
    result = lifecycle(server, "sweep", "--now", "next tuesday")
    assert result.returncode == 2 and "not an ISO 8601 time" in result.stderr


def test_the_servers_own_sweeper_forgets_expired_memories_and_their_vectors(tmp_path, private_database, key_file):
    config = tmp_path / "memoryd.toml"
    config.write_text("[policy]\nsession_ttl_hours = 0.0005\n")  # session memories live 1.8 s
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_CONFIG=str(config),
                     MEMORYD_LIFECYCLE_INTERVAL_SECONDS="0.5")
    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, unique("tenant"))
            written = agent.write("alice", draft("event", "Joined the standup", scope=pb.SCOPE_SESSION, session_id="s1"),
                                  draft("event", "Moved to Porto"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
            session_id = written.results[0].memory_id
            wait_until(lambda: agent.list("alice", statuses=[pb.MEMORY_STATUS_FORGOTTEN],
                                          filter=pb.MemoryFilter(session_id="s1")).memories, interval=0.3,
                       what="the sweeper forgets the expired session memory")
            with psycopg.connect(private_database) as conn:
                [(agent_name,)] = conn.execute("SELECT agent FROM audit_log WHERE action = 'lifecycle.expire' "
                                               "AND %s = ANY(memory_ids)", (session_id,)).fetchall()
            assert agent_name == "memoryd"
            with psycopg.connect(private_database, autocommit=True) as conn:
                wait_until(lambda: not conn.execute("SELECT count(*) FROM outbox").fetchone()[0], interval=0.3,
                           what="the expired memory's vector is deleted (through the outbox)")
            recalled = agent.call("Recall", svc.RecallRequest(subject="alice", query="standup Porto", top_k=5,
                                                              filter=pb.MemoryFilter(session_id="s1")))
            assert [m.memory.text for m in recalled.memories] == ["Moved to Porto"]
    finally:
        assert process.stop() == 0

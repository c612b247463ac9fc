"""The server's master key file across restarts: plaintext rows left by a version before
encryption are sealed at start, and a server given the wrong master key reports content as
unavailable — never as garbage — refuses writes it could not seal, and serves the rest."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import grpc
import psycopg
import pytest

from memoryd.storage.keys._envelope import legacy_digest
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, ServerProcess, agent_with_view, draft, fails, server_env, token_for, unique


def _start(tmp_path: Path, dsn: str, signing_key: Path, master_key: Path, name: str) -> ServerProcess:
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / name), MEMORYD_POSTGRES_DSN=dsn,
                     MEMORYD_SIGNING_KEY_FILE=str(signing_key), MEMORYD_KEY_FILE=str(master_key))
    return ServerProcess(env, tmp_path / f"{name}.log").start()


def _insert_legacy(dsn: str, tenant: str, text: str) -> str:
    """A memory, its first version and its index work as a version before encryption wrote them."""
    memory_id = str(uuid.uuid4())
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO memories (tenant_id, id, subject, scope, category, key, text, text_hash, data, "
                     "importance, confidence, stability, agent, source_kind) VALUES (%s, %s, 'alice', 'subject', "
                     "'fact', 'home_city', %s, %s, '{\"zip\": \"69001\"}', 0.5, 1.0, 'stable', 'agent-1', 'input')",
                     (tenant, memory_id, text, legacy_digest(text)))
        conn.execute("INSERT INTO memory_versions (tenant_id, memory_id, version, change, subject, scope, session_id, "
                     "category, key, text, data, importance, confidence, stability, pinned, tags, agent, source_kind, "
                     "source_turn_id, status, created_at) SELECT tenant_id, id, 1, 'created', subject, scope, "
                     "session_id, category, key, text, data, importance, confidence, stability, pinned, tags, agent, "
                     "source_kind, source_turn_id, status, created_at FROM memories WHERE tenant_id = %s AND id = %s",
                     (tenant, memory_id))
        conn.execute("INSERT INTO outbox (tenant_id, memory_id, subject, op) VALUES (%s, %s, 'alice', 'upsert')",
                     (tenant, memory_id))
    return memory_id


def test_legacy_plaintext_is_sealed_at_start_and_a_wrong_master_key_never_yields_garbage(
        tmp_path, private_database, key_file):
    tenant = unique("tenant")
    legacy = _insert_legacy(private_database, tenant, "Lives in Lyon")
    right, wrong = tmp_path / "right.key", tmp_path / "wrong.key"
    for path in (right, wrong):
        path.write_bytes(os.urandom(32))
        path.chmod(0o600)

    process = _start(tmp_path, private_database, key_file, right, "first")
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant)  # views are not encrypted: it stays
            [m] = agent.recall_keys("alice", "home_city").memories
            assert (m.memory.id, m.memory.text, dict(m.memory.data), m.memory.content_unavailable) == (
                legacy, "Lives in Lyon", {"zip": "69001"}, False)
            agent.write("bob", draft("event", "Flew to Madeira"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
    finally:
        assert process.stop() == 0
    with psycopg.connect(private_database) as conn:
        left = conn.execute("SELECT count(*) FROM memories WHERE text IS NOT NULL OR data IS NOT NULL").fetchone()[0]
        left += conn.execute("SELECT count(*) FROM memory_versions WHERE text IS NOT NULL").fetchone()[0]
    assert left == 0

    # Another master key than the one the database recorded: the server refuses to start.
    refused = ServerProcess(server_env(MEMORYD_DATA_DIR=str(tmp_path / "refused"), MEMORYD_POSTGRES_DSN=private_database,
                                       MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_KEY_FILE=str(wrong)),
                            tmp_path / "refused.log")
    with pytest.raises(RuntimeError, match="master key secret is not the one this database was written with"):
        refused.start()
    # An operator who lost the key and starts over forgets its fingerprint on purpose; the
    # rows sealed under the old key then read as unavailable, never as garbage.
    with psycopg.connect(private_database, autocommit=True) as conn:
        conn.execute("DELETE FROM secret_fingerprints WHERE name = 'master key'")
    process = _start(tmp_path, private_database, key_file, wrong, "second")
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = Agent(channel, token_for(key_file, tenant))
            [m] = agent.recall_keys("alice", "home_city").memories
            assert (m.memory.id, m.memory.text, m.memory.HasField("data"), m.memory.content_unavailable) == (
                legacy, "", False, True)
            listed = agent.list_all("bob")
            assert [(x.text, x.content_unavailable) for x in listed] == [("", True)]
            assert all(v.memory.content_unavailable for v in agent.history("alice", legacy).versions)

            failure = fails(agent.write, "alice", draft("fact", "Lives in Nice", key="home_city"))
            assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "DATA_KEY_UNAVAILABLE")
            # Nothing else breaks: a subject without a key yet is served under the key it has.
            written = agent.write("carol", draft("fact", "Lives in Oslo", key="home_city"))
            assert written.results[0].outcome == svc.WRITE_OUTCOME_CREATED
            assert [x.memory.text for x in agent.recall_keys("carol", "home_city").memories] == ["Lives in Oslo"]
            assert agent.erase("bob", all_of_subject=True).receipt.counts.keys == 1
    finally:
        assert process.stop() == 0

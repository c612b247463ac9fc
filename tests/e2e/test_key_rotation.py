"""Rotating the signing key as an operator does: `memoryd keys rotate`, restart, `memoryd keys
retire`. Memories stay findable by words throughout (the term-hash secret is not the signing
key's any more), and tokens of the earlier key work until it is retired."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import grpc
import pytest

from memoryd.server import issue_token, load_or_create_signing_key, load_signing_key
from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, ROOT, Agent, ServerProcess, draft, fails, full_view, put_view, server_env, unique


def memoryd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _found_by_words(agent: Agent, query: str) -> list[str]:
    response = agent.call("Recall", svc.RecallRequest(subject="alice", query=query))
    return [m.memory.text for m in response.memories if m.keyword_rank > 0]


def test_rotate_restart_retire_keeps_recall_by_words_and_ends_old_tokens(tmp_path, private_database):
    data_dir = tmp_path / "data"
    env = server_env(MEMORYD_DATA_DIR=str(data_dir), MEMORYD_POSTGRES_DSN=private_database)
    keys = data_dir / "keys"
    # A deployment from before the keys folder: only the signing key, from which the term-hash
    # secret of its stored memories was derived.
    old_key = load_or_create_signing_key(keys / "signing.pem")
    tenant = unique("rotate")
    old_token = issue_token(old_key, tenant=tenant, agent="agent-1")
    text = "Alice keeps three beehives behind the orchard"

    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            put_view(channel, keys / "signing.pem", tenant, full_view("agent-1"))
            agent = Agent(channel, old_token)
            agent.write("alice", draft("fact", text, key="hobby"))
            assert _found_by_words(agent, "beehives") == [text]
    finally:
        assert process.stop() == 0
    # Back to that state: the server wrote these from the signing key; rotation must too.
    (keys / "terms.json").unlink()
    (keys / "pages.json").unlink()

    rotated = memoryd(env, "keys", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    new_key = load_signing_key(keys / "signing.pem")
    new_token = issue_token(new_key, tenant=tenant, agent="agent-1")
    listed = memoryd(env, "keys", "list")
    assert listed.returncode == 0, listed.stderr
    old_kid = next(line.split()[1] for line in listed.stdout.splitlines() if "until retired" in line)

    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            assert _found_by_words(Agent(channel, old_token), "beehives") == [text]
            assert _found_by_words(Agent(channel, new_token), "beehives") == [text]
    finally:
        assert process.stop() == 0

    retired = memoryd(env, "keys", "retire", old_kid)
    assert retired.returncode == 0, retired.stderr
    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            refused = fails(Agent(channel, old_token).recall_keys, "alice", "hobby")
            assert (refused.code, refused.reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")
            assert _found_by_words(Agent(channel, new_token), "beehives") == [text]
    finally:
        assert process.stop() == 0


def test_retiring_the_current_key_is_refused(tmp_path):
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path))
    kid = next(line.split()[1] for line in memoryd(env, "keys", "list").stdout.splitlines()
               if line.startswith("signing"))
    result = memoryd(env, "keys", "retire", kid)
    assert result.returncode == 2 and "is the current signing key" in result.stderr
    assert Path(tmp_path / "keys" / "signing.pem").exists()


def test_a_server_with_another_term_secret_refuses_to_start(tmp_path, private_database):
    first, second = tmp_path / "first", tmp_path / "second"
    process = ServerProcess(server_env(MEMORYD_DATA_DIR=str(first), MEMORYD_POSTGRES_DSN=private_database),
                            tmp_path / "first.log").start()
    assert process.stop() == 0
    # A second server with keys of its own (a fresh keys folder): its term hashes would match
    # none of the first one's, so it must not run at all.
    env = server_env(MEMORYD_DATA_DIR=str(second), MEMORYD_POSTGRES_DSN=private_database)
    with pytest.raises(RuntimeError, match="terms.json"):
        ServerProcess(env, tmp_path / "second.log").start()
    shutil.copy(first / "keys" / "terms.json", second / "keys" / "terms.json")
    # Nor with a master key of its own: it could open none of the first one's memories.
    with pytest.raises(RuntimeError, match="master key secret is not the one"):
        ServerProcess(env, tmp_path / "second.log").start()
    shutil.copy(first / "keys" / "master.key", second / "keys" / "master.key")
    assert ServerProcess(env, tmp_path / "second.log").start().stop() == 0

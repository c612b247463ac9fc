"""The embedded default, as a user runs it: `memoryd serve` with no configuration."""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
from pathlib import Path

import grpc
import psycopg

from memoryd.storage import EmbeddedPostgres
from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, Agent, ServerProcess, agent_with_view, draft, fails, server_env, unique, wait_until


def _embedded(tmp_path: Path) -> ServerProcess:
    # No MEMORYD_POSTGRES_DSN and no data dir: everything under ./.memoryd of the working dir.
    env = server_env()
    process = ServerProcess(env, tmp_path / "server.log")
    process.cwd = tmp_path
    return process


def _demo_agent(channel: grpc.Channel, data_dir: Path) -> Agent:
    return Agent(channel, (data_dir / "tokens" / "demo-agent.token").read_text().strip())


def test_serve_starts_embedded_postgres_and_writes_demo_tokens(tmp_path):
    process = _embedded(tmp_path).start()
    try:
        data_dir = tmp_path / ".memoryd"
        assert (data_dir / "postgres" / "PG_VERSION").exists()
        assert (data_dir / "keys" / "signing.pem").stat().st_mode & 0o077 == 0
        assert (data_dir / "tokens" / "admin.token").stat().st_mode & 0o077 == 0
        assert any("demo-agent.token" in line for line in process.output)
        with grpc.insecure_channel(process.target) as channel:
            agent = _demo_agent(channel, data_dir)
            agent.write("alice", draft("preference", "tea", key="drink"))
            assert [m.memory.text for m in agent.recall_keys("alice", "drink").memories] == ["tea"]
    finally:
        assert process.stop() == 0


def test_restart_on_the_same_data_dir_keeps_every_memory(tmp_path):
    process = _embedded(tmp_path).start()
    with grpc.insecure_channel(process.target) as channel:
        agent = _demo_agent(channel, tmp_path / ".memoryd")
        for i in range(5):
            agent.write("alice", draft("event", f"event number {i}"))
        agent.write("alice", draft("fact", "Lyon", key="home_city"))
        agent.write("alice", draft("fact", "Paris", key="home_city"))
        before = agent.list_all("alice")
    assert process.stop() == 0

    process = _embedded(tmp_path).start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = _demo_agent(channel, tmp_path / ".memoryd")
            after = agent.list_all("alice")
            assert [(m.id, m.text, m.version) for m in after] == [(m.id, m.text, m.version) for m in before]
            home = next(m for m in after if m.key == "home_city")
            assert [v.memory.text for v in agent.history("alice", home.id).versions] == ["Paris", "Lyon"]
    finally:
        assert process.stop() == 0


def test_a_refused_second_serve_leaves_the_data_dir_and_its_postgres_alone(tmp_path):
    first = _embedded(tmp_path).start()
    data_dir = tmp_path / ".memoryd"
    try:
        modes = {path: path.stat().st_mode for path in (data_dir, data_dir / "postgres")}
        second = subprocess.run([*MEMORYD, "serve"], cwd=tmp_path, env=server_env(), capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 1 and "another memoryd is already serving" in second.stderr
        # Refused, it changed nothing: not even the modes of the folders the first one's
        # PostgreSQL runs in (which, run as root, runs as a user of its own and must reach them).
        assert {path: path.stat().st_mode for path in modes} == modes
    finally:
        assert first.stop() == 0
    assert "Failed to stop server" not in (tmp_path / "server.log").read_text()  # PostgreSQL stopped cleanly


def test_sigterm_lets_an_in_flight_write_finish(tmp_path, private_database, key_file):
    """A Write blocked inside its transaction when SIGTERM arrives still completes and commits."""
    tenant = unique("tenant")
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_GRACE_SECONDS="20")
    process = ServerProcess(env, tmp_path / "server.log").start()
    lock_name = "\x1f".join((tenant, "alice", "", "preference", "drink"))
    blocker = psycopg.connect(private_database, autocommit=True)
    blocker.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock_name,))
    result: dict[str, object] = {}
    with grpc.insecure_channel(process.target) as channel:
        agent = agent_with_view(channel, key_file, tenant)

        def write() -> None:
            try:
                result["response"] = agent.write("alice", draft("preference", "tea", key="drink"))
            except grpc.RpcError as error:
                result["error"] = error

        writer = threading.Thread(target=write)
        writer.start()
        wait_until(lambda: blocker.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                           "AND NOT granted").fetchone()[0], timeout=10, interval=0.05,
                   what="the Write waits on the lock inside its transaction")
        assert process.process is not None
        process.process.send_signal(signal.SIGTERM)
        wait_until(lambda: "shutting down: draining in-flight calls" in process.log_path.read_text(), timeout=10,
                   what="shutdown has begun while the call is still in flight")
        blocker.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock_name,))
        writer.join(30)
    blocker.close()
    assert process.stop() == 0
    assert "error" not in result, result.get("error")
    assert result["response"].results[0].outcome == svc.WRITE_OUTCOME_CREATED


def test_postgres_down_gives_unavailable_and_writes_nothing(tmp_path, key_file, caplog):
    pg = EmbeddedPostgres(tmp_path / "own-pg")
    pg.start()
    # The server's data dir apart from this PostgreSQL's: a server makes its data dir its own
    # (0700, cli/admin/_admin.py keep_private), and PostgreSQL's OS user could then no longer reach
    # its folder inside it — `pg_ctl stop` failed and embedded-postgres killed it instead.
    (tmp_path / "memoryd").mkdir()
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "memoryd"), MEMORYD_POSTGRES_DSN=pg.owner_dsn,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_POSTGRES_TIMEOUT_SECONDS="2")
    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, unique("tenant"))
            agent.write("alice", draft("fact", "before the outage", key="k1"))
            pg.stop()
            failure = fails(agent.write, "alice", draft("fact", "during the outage", key="k2"))
            assert failure.code == grpc.StatusCode.UNAVAILABLE
            assert failure.reason == "STORE_UNAVAILABLE"
            assert failure.message == "the memory store is unavailable; retry later"  # no DSN, no driver text
            assert fails(agent.list, "alice").code == grpc.StatusCode.UNAVAILABLE
            assert not [r for r in caplog.records if r.name.startswith("embedded_postgres") and r.levelno >= logging.WARNING]
            pg.start()
            # The pool reconnects by itself once Postgres is back.
            texts = wait_until(lambda: sorted(m.text for m in agent.list_all("alice")), timeout=30, interval=0.5,
                               ignoring=grpc.RpcError, what="the pool reconnects")
            assert texts == ["before the outage"]
            agent.write("alice", draft("fact", "after the outage", key="k3"))
            assert sorted(m.text for m in agent.list_all("alice")) == ["after the outage", "before the outage"]
    finally:
        process.stop()
        pg.stop()

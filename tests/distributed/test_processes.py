"""`memoryd serve --processes N` (issue 41, item 3) on the distributed lane's stores: Debian's
PostgreSQL 15 and the Milvus server. N server processes share one address on purpose and the
kernel spreads connections over them; the parent checks the port before starting any, prints
its one line once every child listens, stops them all on SIGTERM, fails as a whole when one
dies, and never leaves a child behind."""

from __future__ import annotations

import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import grpc
import psutil
import pytest

from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, Agent, ServerProcess, draft, free_port, full_view, put_view, token_for, unique, wait_until
from ..support_distributed import ExternalPostgres, MilvusStandalone, Deployment
from .conftest import new_deployment

pytestmark = pytest.mark.slow
WAIT = svc.CONSISTENCY_WAIT_INDEXED
CHANNELS = 16  # connections: the chance that all of them reach one of two processes is 2**-15


@pytest.fixture(scope="module")
def deployment(pg15: ExternalPostgres, milvus_standalone: MilvusStandalone,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    # A new deployment with an empty keys folder: the first child makes the keys alone.
    yield new_deployment(pg15, milvus_standalone, tmp_path_factory.mktemp("processes"))


def _serve(deployment: Deployment, log: Path, **env: str) -> ServerProcess:
    # Each child runs the in-process outbox worker, as the default has it (they share the outbox).
    settings = deployment.env(MEMORYD_PROCESSES="2", MEMORYD_WORKER_IN_PROCESS="true", **env)
    return ServerProcess(settings, log).start(timeout=300)


def _children(server: ServerProcess) -> list[psutil.Process]:
    assert server.process is not None
    return psutil.Process(server.process.pid).children()


def _ended(server: ServerProcess, children: list[psutil.Process], sig: int | None = None) -> tuple[int | None, bool]:
    """Signal the parent (or not), wait for it to exit; its exit code (None: it did not) and
    whether every child was gone by then. What is left is killed first: the harness would
    otherwise wait for whoever holds the parent's output pipe open."""
    assert server.process is not None
    if sig is not None:
        server.process.send_signal(sig)
    try:
        code: int | None = server.process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        code = None
    gone = all(_gone(child) for child in children)
    for child in children:
        with suppress(psutil.NoSuchProcess):
            child.kill()
    server.stop(signal.SIGKILL)
    return code, gone


def _gone(process: psutil.Process) -> bool:
    """Ended (a zombie waiting for whoever adopted it counts: it runs nothing)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _connections_on(process: psutil.Process, port: int) -> int:
    return sum(1 for c in process.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)


def _two_free_ports() -> int:
    """A port p with p + 1 free too (each child's metrics endpoint)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two consecutive free ports")


def test_two_processes_share_the_port_answer_every_connection_and_stop_together(deployment: Deployment,
                                                                                 tmp_path: Path) -> None:
    metrics = _two_free_ports()
    server = _serve(deployment, tmp_path / "serve.log", MEMORYD_METRICS_ADDR=f"127.0.0.1:{metrics}")
    children = _children(server)
    try:
        assert len(children) == 2
        assert sum("memoryd listening on" in line for line in server.output) == 1  # the parent's, once
        tenant = unique("tenant")
        key = deployment.keys / "signing.pem"  # made by the first child alone
        with grpc.insecure_channel(server.target) as channel:
            put_view(channel, key, tenant, full_view("agent-1"))
        token = token_for(key, tenant)
        # Separate connections, as separate clients have (channels to one target share one
        # connection otherwise): the kernel picks a process per connection.
        channels = [grpc.insecure_channel(server.target, options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range(CHANNELS)]
        try:
            for n, channel in enumerate(channels):
                agent = Agent(channel, token)
                # Indexed by the in-process worker of whichever process took the call.
                assert agent.write("alice", draft("fact", f"Alice rode her bicycle to village number {n}",
                                                  key=f"ride-{n}"), consistency=WAIT).indexed
                found = agent.recall_keys("alice", f"ride-{n}").memories
                assert [m.memory.text for m in found] == [f"Alice rode her bicycle to village number {n}"]
            for channel in channels:  # by meaning, through every connection
                recalled = Agent(channel, token).call("Recall", svc.RecallRequest(
                    subject="alice", query="cycling trips to the countryside", min_relevance=0.0, top_k=20))
                assert not recalled.degraded and len(recalled.memories) == CHANNELS
                assert all(m.dense_rank for m in recalled.memories)
            taken = {child.pid: _connections_on(child, server.port) for child in children}
            assert all(taken.values()) and sum(taken.values()) >= CHANNELS, taken
        finally:
            for channel in channels:
                channel.close()
        # Each process serves its own metrics, on the configured port and the next.
        for port in (metrics, metrics + 1):
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            assert "rpc_server_call_duration" in text
    finally:
        code, gone = _ended(server, children, signal.SIGTERM)
    assert code == 0 and gone


def test_a_child_that_dies_stops_the_others_and_the_parent_exits_non_zero(deployment: Deployment,
                                                                           tmp_path: Path) -> None:
    server = _serve(deployment, tmp_path / "serve.log")
    children = _children(server)
    second = children[1]  # either one
    second.kill()
    code, gone = _ended(server, children)
    assert code is not None and code != 0 and gone
    assert f"of 2 (pid {second.pid}) was killed by SIGKILL: stopping the others" in \
        (tmp_path / "serve.log").read_text()


def test_a_parent_that_is_killed_leaves_no_child_behind(deployment: Deployment, tmp_path: Path) -> None:
    server = _serve(deployment, tmp_path / "serve.log")
    assert server.process is not None
    children = _children(server)
    server.process.kill()  # no chance to stop anything itself
    server.process.wait()
    try:
        # Each child stops by itself, draining its calls as on SIGTERM (grace 10 s).
        wait_until(lambda: all(_gone(child) for child in children), timeout=90, interval=0.5,
                   what="the children of a killed parent have stopped")
    finally:
        _ended(server, children)


def test_a_child_that_cannot_start_stops_the_start(deployment: Deployment, tmp_path: Path) -> None:
    refused = deployment.postgres.dsn("memoryd_app", "not-the-password", deployment.dbname)
    result = subprocess.run([*MEMORYD, "serve", "--processes", "2"], capture_output=True, text=True, timeout=300,
                            env=deployment.env(MEMORYD_POSTGRES_APP_DSN=refused))
    assert result.returncode != 0 and "memoryd listening on" not in result.stdout
    assert "server process 1 of 2" in result.stderr and "stopping the others" in result.stderr
    assert "started server process 2" not in result.stderr  # the second never started


def test_a_port_in_use_is_refused_before_any_child_starts(deployment: Deployment) -> None:
    with socket.socket() as holder:  # a plain program's socket, not a memoryd
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        addr = f"127.0.0.1:{holder.getsockname()[1]}"
        result = subprocess.run([*MEMORYD, "serve", "--processes", "2"], capture_output=True, text=True, timeout=60,
                                env=deployment.env(MEMORYD_ADDR=addr))
    assert result.returncode == 2 and result.stdout == ""
    # Exactly the one-line error and its hint of a single server: no child ever logged a line.
    assert result.stderr.splitlines() == [
        f"memoryd: error: cannot listen on {addr}: the port is in use (by another memoryd or another program)",
        "hint: stop what listens there, or give this one another address with MEMORYD_ADDR (two memoryd servers "
        "never share a port)"]

"""A ``memoryd worker`` process answers grpc.health.v1 as its probes ask, and serves metrics.

The shape of a deployment: a server with no in-process worker and a separate worker, on the
suite's PostgreSQL and a Milvus server (``milvus-lite server`` on loopback). The worker
reaches PostgreSQL through a Unix-socket relay this test can cut, so both of its
dependencies can go away and come back while it runs. Its health is asked exactly as the
Kubernetes and compose probes ask: ``memoryd health --addr … [--service liveness]``.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memoryd.v1 import memory_service_pb2 as svc

from ..static.test_deploy_files import worker_probes
from ..support import MEMORYD, ServerProcess, agent_with_view, draft, free_port, server_env, unique, wait_until

pytestmark = pytest.mark.slow


class UnixRelay:
    """Relays PostgreSQL's Unix socket into another folder; ``cut`` drops every connection
    and stops listening (PostgreSQL is gone, for whoever dials through here)."""

    def __init__(self, target: Path, folder: Path) -> None:
        self.target, self.path = target, folder / target.name
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        self.path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(self.path))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(str(self.target))
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.path.unlink(missing_ok=True)
        with self._lock:
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self._open.clear()


@pytest.fixture
def relayed_dsn(private_database: str, tmp_path: Path) -> Iterator[tuple[str, UnixRelay]]:
    params = conninfo_to_dict(private_database)
    [target] = Path(str(params["host"])).glob(f".s.PGSQL.{params.get('port', 5432)}")
    folder = tmp_path / "relay"
    folder.mkdir()
    relay = UnixRelay(target, folder)
    relay.start()
    yield make_conninfo(private_database, host=str(folder)), relay
    relay.cut()


def _health(port: int, service: str = "") -> tuple[int, str]:
    done = subprocess.run([*MEMORYD, "health", "--addr", f"127.0.0.1:{port}", "--timeout", "5",
                           *(["--service", service] if service else [])],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def _probe(kind: str, port: int) -> int:
    """The worker-deployment.yaml probe of this kind, run against this worker."""
    command = [part.replace("127.0.0.1:50052", f"127.0.0.1:{port}") for part in worker_probes()[kind]]
    assert command[0] == "memoryd"
    return subprocess.run([*MEMORYD, *command[1:]], capture_output=True, timeout=60).returncode


def _serving(port: int) -> int:
    """What ``memoryd health`` would exit with (0 SERVING, else 1), asked in this process: the
    waits poll it every half second, and a ``memoryd`` process costs a second of imports."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError:
            return 1
    return 0 if answer.status == health_pb2.HealthCheckResponse.SERVING else 1


def _until(port: int, expected: int, what: str, worker_log: Path, timeout: float = 90) -> None:
    wait_until(lambda: _serving(port) == expected, timeout, 0.5, what=what,
               diagnose=lambda: f"health answers {_health(port)}; worker log:\n" + worker_log.read_text()[-4000:])


def test_a_worker_reports_its_postgres_milvus_and_loop_through_its_health_endpoint(
        tmp_path, private_database, relayed_dsn, key_file, milvus):
    dsn, relay = relayed_dsn
    data = tmp_path / "server"
    data.mkdir()
    common = dict(MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_MILVUS_URI=milvus.uri,
                  MEMORYD_WORKER_IN_PROCESS="false", MEMORYD_KEYS_DIR=str(data / "keys"),
                  MEMORYD_KEY_FILE=str(data / "keys" / "master.key"))
    server = ServerProcess(server_env(MEMORYD_DATA_DIR=str(data), MEMORYD_POSTGRES_DSN=private_database, **common),
                           tmp_path / "server.log").start()
    health_port, metrics_port = free_port(), free_port()
    worker_log = tmp_path / "worker.log"
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "worker"), MEMORYD_POSTGRES_DSN=dsn,
                     MEMORYD_WORKER_HEALTH_ADDR=f"127.0.0.1:{health_port}",
                     MEMORYD_METRICS_ADDR=f"127.0.0.1:{metrics_port}", MEMORYD_METRICS_REFRESH_SECONDS="1", **common)
    with worker_log.open("w") as log:
        worker = subprocess.Popen([*MEMORYD, "worker"], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        def running() -> bool:
            assert worker.poll() is None, worker_log.read_text()
            return "memoryd worker running" in worker_log.read_text()

        wait_until(running, timeout=120, interval=0.5, what="the worker runs", diagnose=worker_log.read_text)
        assert f"memoryd worker health on 127.0.0.1:{health_port}" in worker_log.read_text()

        # Serving, and doing its work: a write through the server is indexed by this worker.
        code, output = _health(health_port)
        assert code == 0 and output.strip() == f"memoryd at 127.0.0.1:{health_port}: SERVING"
        with grpc.insecure_channel(server.target) as channel:
            agent = agent_with_view(channel, key_file, unique("tenant"))
            written = agent.write("alice", draft("event", "Alice booked a ferry to Naxos"),
                                  consistency=svc.CONSISTENCY_WAIT_INDEXED)
            assert written.indexed
        code, output = _health(health_port, "liveness")
        assert code == 0 and "SERVING" in output
        assert {kind: _probe(kind, health_port) for kind in ("startup", "readiness", "liveness")} == {
            "startup": 0, "readiness": 0, "liveness": 0}

        # Its metrics endpoint serves the server's instruments: the outbox gauges (read from
        # PostgreSQL), its connection pools, the build.
        def scraped() -> str | None:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as reply:
                assert reply.status == 200
                body = reply.read().decode()
            return body if "memoryd_outbox_pending" in body else None

        body = wait_until(scraped, interval=1, what="the worker's metrics hold the outbox gauges")
        assert "memoryd_outbox_lag_seconds" in body
        for pool in ("memoryd_app", "memoryd_worker"):  # both of its pools are watched
            assert re.search(rf'^db_client_connection_max{{[^}}]*db_client_connection_pool_name="{pool}"', body, re.M)
        assert re.search(r"^memoryd_build_info{", body, re.M)

        # Milvus gone: not ready, still alive (a restart would not bring Milvus back).
        milvus.stop()
        _until(health_port, 1, "NOT_SERVING once Milvus is gone", worker_log)
        code, output = _health(health_port, "liveness")
        assert code == 0, output
        assert (_probe("readiness", health_port), _probe("liveness", health_port)) == (1, 0)
        milvus.start()
        _until(health_port, 0, "SERVING once Milvus is back", worker_log)

        # PostgreSQL gone for this worker: the same.
        relay.cut()
        _until(health_port, 1, "NOT_SERVING once PostgreSQL is gone", worker_log)
        code, output = _health(health_port)
        assert "NOT_SERVING" in output
        assert _health(health_port, "liveness")[0] == 0
        relay.start()
        _until(health_port, 0, "SERVING once PostgreSQL is back", worker_log)

        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker_log.read_text()[-4000:]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        server.stop()

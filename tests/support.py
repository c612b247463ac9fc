"""Helpers shared by the suite: starting real servers, calling them, reading error details."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from memoryd.client import from_rpc_error
from memoryd.server import issue_token, load_signing_key
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
MEMORYD = [sys.executable, "-m", "memoryd.cli"]
_LISTENING = re.compile(r"memoryd listening on (\S+):(\d+)")


def varint(n: int) -> bytes:
    """``n`` as a protobuf base-128 varint: for hand-built wire bytes protobuf would refuse to make."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, *, what: str = "",
               ignoring: type[BaseException] | tuple[type[BaseException], ...] = (),
               diagnose: Callable[[], str] | None = None) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy, and
    return that; an exception of a type in ``ignoring`` counts as "not yet". After ``timeout``
    seconds: AssertionError naming ``what``, the last answer (or exception) and ``diagnose()``.

    For waits on a condition the system reaches by itself (an index catching up, a log line,
    a job finishing); a fixed sleep either wastes time or, on a slow machine, is too short.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: Any = predicate()
        except ignoring as error:
            last = error
        else:
            if last:
                return last  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout:g}s waiting until {what or 'the condition held'}; last: {last!r}"
            raise AssertionError(message + (f"\n{diagnose()}" if diagnose else ""))
        time.sleep(interval)


async def until_blocked_by(holder_pid: int, dsn: str, timeout: float = 30.0) -> None:
    """Wait until some PostgreSQL session waits for a lock the session ``holder_pid`` holds: the
    proof that a task is stuck behind it, where a fixed sleep could only hope so (and waste time)."""
    import asyncio

    import psycopg

    deadline = time.monotonic() + timeout
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while True:
            cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                     (holder_pid,))
            row = await cur.fetchone()
            if row and row[0]:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:g}s: no session waits for a lock of {holder_pid}")
            await asyncio.sleep(0.02)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class ServerProcess:
    """A ``memoryd serve`` subprocess on loopback."""

    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[str] | None = None
    port: int = 0
    output: list[str] = field(default_factory=list)
    cwd: Path = ROOT
    _reader: threading.Thread = field(default_factory=lambda: threading.Thread())
    args: tuple[str, ...] = ()  # options of `memoryd serve`

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        with self.log_path.open("a") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                [*MEMORYD, "serve", *self.args], env=self.env, stdout=subprocess.PIPE, stderr=log, text=True, cwd=self.cwd
            )
        listening = threading.Event()

        def read_stdout(stream: Any) -> None:
            # Drains stdout for the process's whole life, so the pipe can never fill up.
            for line in stream:
                self.output.append(line)
                match = _LISTENING.search(line)
                if match:
                    self.port = int(match.group(2))
                    listening.set()

        self._reader = threading.Thread(target=read_stdout, args=(self.process.stdout,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not listening.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                code = self.process.poll()
                self.stop()
                raise RuntimeError(f"memoryd did not start (exit code {code}); log {self.log_path}:\n"
                                   + self.log_path.read_text()[-3000:])
        return self

    def dump_stacks(self) -> str:
        """Ask the server to log its threads' and tasks' stacks; return the log's tail."""
        if self.process is not None and self.process.poll() is None:
            start = self.log_path.stat().st_size
            self.process.send_signal(signal.SIGUSR1)  # faulthandler: every thread
            self.process.send_signal(signal.SIGUSR2)  # every asyncio task, one "task …" line each

            def dumped() -> bool:
                tail = self.log_path.read_bytes()[start:]
                return b"most recent call first" in tail and b"task " in tail

            with suppress(AssertionError):  # a diagnosis: return what there is
                wait_until(dumped, timeout=5, what="the server logged its stacks")
        return self.log_path.read_text()[-20000:]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if self._reader.is_alive():
            self._reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None
        return code


@contextmanager
def fresh_database(owner_dsn: str, prefix: str = "db") -> Iterator[str]:
    """The owner DSN of a new, migrated database on the same PostgreSQL, dropped afterwards."""
    import asyncio

    import psycopg
    from psycopg.conninfo import make_conninfo

    from memoryd.storage import migrate

    name = unique(prefix).replace("-", "_")
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = make_conninfo(owner_dsn, dbname=name)
    try:
        asyncio.run(migrate(dsn))
        yield dsn
    finally:
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@contextmanager
def database_before(owner_dsn: str, version: int, prefix: str = "db", *, own_role: bool = True) -> Iterator[str]:
    """The DSN of a new database with the migrations before ``version`` applied, as a server of
    the version before left it, for a test of migration ``version`` (the test fills it, then
    migrates it further); dropped afterwards. ``own_role``: owned by a role of its own with
    CREATEROLE and neither superuser nor BYPASSRLS rights, as a deployment's owner is, so a
    migration that fills every tenant's rows is tried under row level security."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from memoryd.storage import available

    name, owner = unique(prefix).replace("-", "_"), unique(f"{prefix}_owner").replace("-", "_")
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        if own_role:
            conn.execute(f"CREATE ROLE {owner} LOGIN CREATEROLE NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if own_role else ""))
    dsn = make_conninfo(owner_dsn, dbname=name, **({"user": owner} if own_role else {}))
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
                         "applied_at timestamptz NOT NULL DEFAULT now())")
            for migration in [m for m in available() if m.version < version]:
                with conn.transaction():
                    conn.execute(migration.sql.encode())
                    conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                                 (migration.version, migration.name))
        yield dsn
    finally:
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            if own_role:
                conn.execute(f"DROP ROLE IF EXISTS {owner}")


def server_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update({"MEMORYD_ADDR": "127.0.0.1:0", "PYTHONUNBUFFERED": "1"})
    env.update(overrides)
    return env


@dataclass
class Agent:
    """A caller with a token for (tenant, agent), talking to a running server."""

    channel: grpc.Channel
    token: str

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    @property
    def memory(self) -> svc_grpc.MemoryServiceStub:
        return svc_grpc.MemoryServiceStub(self.channel)

    @property
    def admin(self) -> admin_grpc.ViewAdminServiceStub:
        return admin_grpc.ViewAdminServiceStub(self.channel)

    def call(self, method: str, request: Any, **kwargs: Any) -> Any:
        stub = self.admin if method in ("PutView", "GetView", "ListViews", "DeleteView") else self.memory
        return getattr(stub, method)(request, metadata=self.metadata, timeout=kwargs.pop("timeout", 30), **kwargs)

    def write(self, subject: str, *items: pb.MemoryDraft, **kwargs: Any) -> svc.WriteResponse:
        return self.call("Write", svc.WriteRequest(subject=subject, items=list(items), **kwargs))

    def recall_keys(self, subject: str, *keys: str, **kwargs: Any) -> svc.RecallResponse:
        return self.call("Recall", svc.RecallRequest(subject=subject, keys=list(keys), **kwargs))

    def list(self, subject: str, **kwargs: Any) -> svc.MemoryViewResponse:
        return self.call("MemoryView", svc.MemoryViewRequest(subject=subject, **kwargs))

    def list_all(self, subject: str, **kwargs: Any) -> list[pb.Memory]:
        memories: list[pb.Memory] = []
        token = ""
        while True:
            page = self.list(subject, page_token=token, **kwargs)
            memories.extend(page.memories)
            token = page.next_page_token
            if not token:
                return memories

    def history(self, subject: str, memory_id: str, **kwargs: Any) -> svc.GetHistoryResponse:
        return self.call("GetHistory", svc.GetHistoryRequest(subject=subject, memory_id=memory_id, **kwargs))

    def erase(self, subject: str, mode: int = svc.ERASE_MODE_PURGE, **selector: Any) -> svc.EraseResponse:
        return self.call("Erase", svc.EraseRequest(subject=subject, mode=mode, **selector))


def draft(category: str, text: str, key: str = "", **kwargs: Any) -> pb.MemoryDraft:
    return pb.MemoryDraft(category=pb.Category.Value(f"CATEGORY_{category.upper()}"), text=text, key=key, **kwargs)


@dataclass(frozen=True)
class RpcFailure:
    code: grpc.StatusCode
    message: str
    reason: str
    violations: dict[str, str]


def failure(error: grpc.RpcError) -> RpcFailure:
    """The status code, message, ErrorInfo reason and BadRequest field violations of a failed
    call, as the Python client decodes them."""
    decoded = from_rpc_error(error)
    return RpcFailure(decoded.code, decoded.message, decoded.reason, decoded.violations)


def fails(fn: Any, *args: Any, **kwargs: Any) -> RpcFailure:
    """Call ``fn`` and return how it failed; the test fails if it succeeded."""
    try:
        fn(*args, **kwargs)
    except grpc.RpcError as error:
        return failure(error)
    raise AssertionError("the call succeeded but was expected to fail")


def token_for(key_file: Path, tenant: str, agent: str = "agent-1", **kwargs: Any) -> str:
    return issue_token(load_signing_key(key_file), tenant=tenant, agent=agent, **kwargs)


ALL_FIELDS = sorted(f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable")
ALL_CATEGORIES = [c for c in pb.Category.values() if c != pb.CATEGORY_UNSPECIFIED]


def rule(category: str, *patterns: str) -> pb.ViewRule:
    return pb.ViewRule(category=pb.Category.Value(f"CATEGORY_{category.upper()}"), key_patterns=list(patterns or ["*"]))


def full_view(agent: str, **overrides: Any) -> pb.View:
    """Every category and key, every field, every erase selector, every source kind."""
    every = [pb.ViewRule(category=c, key_patterns=["*"]) for c in ALL_CATEGORIES]
    fields: dict[str, Any] = dict(agent=agent, read_rules=every, write_rules=every, may_erase=True,
                                  visible_fields=ALL_FIELDS, description="full access (test)",
                                  max_source_kind=pb.SOURCE_KIND_SYNC)
    fields.update(overrides)
    return pb.View(**fields)


def put_view(channel: grpc.Channel, key_file: Path, tenant: str, view: pb.View,
             admin_agent: str = "tenant-admin") -> admin.PutViewResponse:
    """Store ``view`` with a tenant admin's token (as an operator would)."""
    token = token_for(key_file, tenant, admin_agent, roles=("admin",))
    return admin_grpc.ViewAdminServiceStub(channel).PutView(
        admin.PutViewRequest(view=view), metadata=(("authorization", f"Bearer {token}"),), timeout=30)


def agent_with_view(channel: grpc.Channel, key_file: Path, tenant: str, agent: str = "agent-1",
                    view: pb.View | None = None, **token_kwargs: Any) -> Agent:
    """An Agent whose view (full unless given) is stored first: agents without one may do nothing."""
    put_view(channel, key_file, tenant, view or full_view(agent))
    return Agent(channel, token_for(key_file, tenant, agent, **token_kwargs))


MILVUS_LITE = Path(sys.executable).parent / "milvus-lite"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MilvusServer:
    """``milvus-lite server`` bound to loopback (its default would be every interface)."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir, self.log, self.port = data_dir, log, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [str(MILVUS_LITE), "server", "--data-dir", str(self.data_dir), "--host", "127.0.0.1",
                 "--port", str(self.port)], stdout=log, stderr=log)
        process = self.process

        def listening() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"milvus-lite server exited; see {self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_until(listening, timeout=60, interval=0.2, what=f"milvus-lite server listens; see {self.log}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None




@asynccontextmanager
async def job_replicas(dsn: str, secret: bytes, n: int = 2) -> AsyncIterator[tuple[list[Any], list[Any]]]:
    """``n`` extraction job queues (``ExtractionJobs``) on one database, each claiming through a
    worker-role pool of its own (the second list): ``n`` replicas of a deployment, as far as
    jobs go."""
    from memoryd.storage import (WORKER_ROLE, ExtractionJobs, LocalKeyProvider, Postgres, Stores,
                                 PostgresSettings)
    from memoryd.storage.keywords._keywords import TermHasher

    app = Postgres(PostgresSettings(dsn))
    await app.open()
    store = Stores(app, TermHasher(secret), LocalKeyProvider(secret[:32].ljust(32, b"\0")))
    pools: list[Any] = []
    try:
        for _ in range(n):
            pool = Postgres(PostgresSettings(dsn), role=WORKER_ROLE)
            await pool.open()
            pools.append(pool)
        yield [ExtractionJobs(store, pool) for pool in pools], pools
    finally:
        for pool in pools:
            await pool.close()
        await app.close()


class _ClearingStep:
    """A ``VectorEraser`` whose step is a test's own: ``clear(ids, counted)`` in the erase's
    place for the vectors (a real index's deletions, with what the test does around them)."""

    def __init__(self, clear: Callable[[list[str], frozenset[str]], Any]) -> None:
        self._clear = clear

    async def erase(self, scope: Any, subject: str, ids: list[str], *, mode: Any, whole_subject: bool,
                    counted: frozenset[str], defer: Any) -> Any:
        return await self._clear(ids, counted)


def with_vectors(store: Any, clear: Callable[[list[str], frozenset[str]], Any]) -> Any:
    """``store`` (the same database, keys and hashers) as a process whose erase clears the
    vectors with ``clear`` — what ``use_index`` gives a server."""
    import copy
    from dataclasses import replace

    hooked = copy.copy(store)
    hooked.parts = replace(store.parts, vectors=_ClearingStep(clear))
    return hooked


def woken_by(store: Any, worker: Any) -> Any:
    """``store`` (the same database, keys and hashers) as a process whose outbox worker is
    ``worker``: a write wakes it, ``wait_indexed`` waits on its settlements."""
    import copy
    from dataclasses import replace

    hooked = copy.copy(store)
    hooked.parts = replace(store.parts, outbox=worker)
    return hooked

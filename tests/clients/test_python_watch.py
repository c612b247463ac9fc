"""memoryd.client's resuming watch against the suite's real server, through a real TCP relay
that the tests cut: connections dropped (the stream fails, the iterator re-opens from its
cursor) or silenced (nothing fails, the iterator notices the silence and re-opens on a new
connection). Every change committed meanwhile arrives once, in order."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from memoryd.client import (
    AsyncMemorydClient,
    InvalidArgument,
    MemorydClient,
    PermissionDenied,
    RetryPolicy,
    Watch,
)
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import ServerProcess, full_view, put_view, server_env, token_for, unique

FAST = RetryPolicy(initial_backoff=0.05, max_backoff=0.2)
WAIT = 30.0
"""How long a test waits for a change before it fails: a bound on a hang, not a speed check."""
OPEN = 2.0
"""How long a test waits for the server to accept a new watch before writing: the server sends
its response headers with its first message, so a stream gives no earlier sign that it started."""


class Relay:
    """A TCP relay between a client and the server that a test can cut.

    ``drop()`` closes every connection and refuses new ones until ``restore()``; ``silence()``
    keeps the current connections open but forwards nothing on them (a half-open connection,
    as a dead NAT or a frozen peer leaves), while new connections work.
    """

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.target = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._accepting = threading.Event()
        self._accepting.set()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._silent: set[int] = set()
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            if not self._accepting.is_set():
                downstream.close()
                continue
            try:
                upstream = socket.create_connection(self._upstream)
            except OSError:  # the server is down: so is the connection
                downstream.close()
                continue
            pair = (downstream, upstream)
            with self._lock:
                self._pairs.append(pair)
                self.connections += 1
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, sink, id(pair)), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, pair: int) -> None:
        try:
            while data := source.recv(65536):
                if pair not in self._silent:
                    sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):  # one side gone: the connection is over, both ways
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def drop(self) -> None:
        self._accepting.clear()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for end in pair:  # the pumps wake up and close them
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        self._accepting.set()

    def silence(self) -> None:
        with self._lock:
            self._silent.update(id(pair) for pair in self._pairs)

    def close(self) -> None:
        self._listener.close()
        self.drop()


class Reader:
    """Reads a blocking watch in a thread; ``next()`` waits for what it yielded."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.items: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for message in self.watch:
                self.items.put(message)
        except Exception as error:
            self.items.put(error)
        self.items.put(StopIteration)

    def next(self) -> Any:
        try:
            item = self.items.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"nothing arrived within {WAIT} s") from None
        if isinstance(item, Exception):
            raise item
        return item


@pytest.fixture
def tenant_of_watch(channel: grpc.Channel, key_file: Path) -> str:
    tenant = unique("watch-tenant")
    put_view(channel, key_file, tenant, full_view("planner"))
    put_view(channel, key_file, tenant, full_view("worker"))
    return tenant


@pytest.fixture
def planner(server: ServerProcess, key_file: Path, tenant_of_watch: str) -> Iterator[MemorydClient]:
    with MemorydClient(server.target, token=token_for(key_file, tenant_of_watch, "planner")) as client:
        yield client


@pytest.fixture
def relay(server: ServerProcess) -> Iterator[Relay]:
    relay = Relay(server.target)
    yield relay
    relay.close()


def event(text: str) -> pb.MemoryDraft:
    return pb.MemoryDraft(category=pb.CATEGORY_EVENT, text=text)


def written(client: MemorydClient, subject: str, text: str) -> str:
    return client.write(subject=subject, items=[event(text)]).results[0].memory_id


def test_a_dropped_connection_is_resumed_from_the_cursor_with_nothing_lost_or_repeated(
        planner: MemorydClient, relay: Relay, key_file: Path, tenant_of_watch: str):
    opens: list[str] = []

    def token() -> str:
        opens.append("asked")
        return token_for(key_file, tenant_of_watch, "worker")

    subject = unique("trip")
    with MemorydClient(relay.target, token=token, retry=FAST) as worker, worker.watch(subject=subject) as watch:
        assert watch.wait_open(OPEN)  # the server sends its headers once the start is fixed
        reader = Reader(watch)
        first = written(planner, subject, "Planner: book the 9:40 train")
        got = reader.next()
        assert (got.change.kind, got.change.memory.id) == (svc.MEMORY_CHANGE_KIND_CREATED, first)
        assert watch.cursor == got.cursor
        asked_before = len(opens)

        relay.drop()  # the stream fails; re-opens are refused while the relay is down
        missed = [written(planner, subject, f"Worker: step {n}") for n in range(3)]
        relay.restore()
        after = written(planner, subject, "Planner: done")
        # In commit order, each once: a repeat of a missed change would come before `after`.
        received = [reader.next().change.memory.id for _ in range(4)]
        assert received == [*missed, after]
        assert relay.connections >= 2 and len(opens) > asked_before  # a new connection, a fresh token
    reader.thread.join(WAIT)
    assert reader.items.get_nowait() is StopIteration  # close() ended the iteration, without an error


def test_a_silent_connection_is_left_for_a_new_one(planner: MemorydClient, relay: Relay, key_file: Path,
                                                   tenant_of_watch: str):
    """A half-open connection fails nothing: only the silence (no change, no heartbeat for three
    heartbeat intervals) shows it; the watch then re-opens over a new connection."""
    subject = unique("trip")
    worker_token = token_for(key_file, tenant_of_watch, "worker")
    with MemorydClient(relay.target, token=worker_token, retry=FAST, heartbeat_interval=0.5) as worker, \
            worker.watch(subject=subject) as watch:
        assert watch.wait_open(OPEN)  # the server sends its headers once the start is fixed
        reader = Reader(watch)
        first = written(planner, subject, "Planner: book the 9:40 train")
        assert reader.next().change.memory.id == first
        connections = relay.connections
        relay.silence()
        later = written(planner, subject, "Worker: booked")
        assert reader.next().change.memory.id == later
        assert relay.connections > connections


def test_the_watch_raises_what_it_cannot_resume_from(server: ServerProcess, planner: MemorydClient, key_file: Path,
                                                     tenant_of_watch: str):
    with pytest.raises(InvalidArgument) as bad:
        next(planner.watch(subject="alice", all_subjects=True))
    assert bad.value.violations  # the field that is wrong is named
    with MemorydClient(server.target, token=token_for(key_file, tenant_of_watch, "no-view")) as stranger, \
            pytest.raises(PermissionDenied) as denied:
        next(stranger.watch(subject="alice"))
    assert denied.value.reason == "VIEW_MISSING"


def test_a_watch_resumed_from_a_saved_cursor_starts_after_it(planner: MemorydClient, server: ServerProcess,
                                                            key_file: Path, tenant_of_watch: str):
    subject = unique("trip")
    worker_token = token_for(key_file, tenant_of_watch, "worker")
    with MemorydClient(server.target, token=worker_token) as worker:
        with worker.watch(subject=subject) as watch:
            assert watch.wait_open(OPEN)
            reader = Reader(watch)
            written(planner, subject, "seen")
            reader.next()
            saved = watch.cursor
        missed = written(planner, subject, "missed while away")
        with worker.watch(svc.WatchRequest(subject=subject, cursor=saved)) as resumed:
            reader = Reader(resumed)
            assert reader.next().change.memory.id == missed  # not "seen" again
            last = written(planner, subject, "after the resume")
            assert reader.next().change.memory.id == last


async def test_the_asyncio_watch_resumes_after_a_dropped_connection(planner: MemorydClient, relay: Relay,
                                                                     key_file: Path, tenant_of_watch: str):
    subject = unique("trip")
    worker_token = token_for(key_file, tenant_of_watch, "worker")
    async with AsyncMemorydClient(relay.target, token=worker_token, retry=FAST) as worker:
        async with worker.watch(subject=subject) as watch:
            assert await watch.wait_open(OPEN)
            changes = aiter(watch)
            first = await asyncio.to_thread(written, planner, subject, "Planner: book the 9:40 train")
            assert (await asyncio.wait_for(anext(changes), WAIT)).change.memory.id == first
            relay.drop()
            missed = await asyncio.to_thread(written, planner, subject, "Worker: booked")
            relay.restore()
            after = await asyncio.to_thread(written, planner, subject, "Planner: done")
            received = [(await asyncio.wait_for(anext(changes), WAIT)).change.memory.id for _ in range(2)]
            assert received == [missed, after]
            waiting = asyncio.create_task(anext(changes))
            await asyncio.sleep(0)  # the task now waits for the server
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiting, WAIT)  # closing the watch ended the pending read
        with pytest.raises(StopAsyncIteration):
            await anext(changes)


def test_a_watch_outlives_a_server_killed_and_started_again(private_database: str, key_file: Path, tmp_path: Path):
    """The server process dies mid-stream (SIGKILL: no goodbye) and a new one starts on the same
    address and database; changes are committed before the watch can reach it again (the relay
    holds it off): it re-opens from its cursor and gets every change once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = server_env(MEMORYD_ADDR=f"127.0.0.1:{port}", MEMORYD_DATA_DIR=str(tmp_path / "data"),
                     MEMORYD_POSTGRES_DSN=private_database, MEMORYD_SIGNING_KEY_FILE=str(key_file))
    server = ServerProcess(env, tmp_path / "server.log").start()
    relay = Relay(server.target)
    try:
        tenant = unique("watch-tenant")
        with grpc.insecure_channel(server.target) as channel:
            put_view(channel, key_file, tenant, full_view("planner"))
            put_view(channel, key_file, tenant, full_view("worker"))
        subject = unique("trip")
        patient = RetryPolicy(max_attempts=40, initial_backoff=0.05, max_backoff=0.5)
        relay = Relay(server.target)
        with MemorydClient(server.target, token=token_for(key_file, tenant, "planner"), retry=patient) as planner, \
                MemorydClient(relay.target, token=token_for(key_file, tenant, "worker"), retry=FAST) as worker, \
                worker.watch(subject=subject) as watch:
            assert watch.wait_open(OPEN)
            reader = Reader(watch)
            first = written(planner, subject, "Planner: book the 9:40 train")
            assert reader.next().change.memory.id == first

            server.stop(signal.SIGKILL)
            relay.drop()
            server.start()
            missed = [written(planner, subject, f"Worker: step {n}") for n in range(2)]
            relay.restore()
            after = written(planner, subject, "Planner: done")
            assert [reader.next().change.memory.id for _ in range(3)] == [*missed, after]
    finally:
        relay.close()
        server.stop()

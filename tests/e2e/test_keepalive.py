"""Keepalive: the server permits the pings memoryd's clients send, and refuses faster ones.

A real server accepts a ping every 1.5 s here (``[keepalive]`` through ``MEMORYD_KEEPALIVE_*``)
and an idle client pings it every 3 s (``Keepalive``): the closest the policy lets the two come
(tests/domain/test_client_policy.py holds the clients' interval to at least twice the server's),
in seconds where the real ones take minutes. The client runs in a process of its own with gRPC's
keepalive trace on: its log says when each ping was answered, so the test waits for pings that
happened rather than sleeping, and shows any GOAWAY the client received.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from memoryd.server import Config
from memoryd.storage import EmbeddedPostgres

from ..support import ROOT, ServerProcess, fresh_database, full_view, put_view, server_env, token_for, unique, wait_until

# gRPC's core never sends pings less than a second apart: the aggressive client pinging every
# second needs a server that asks for more.
MIN_PING_INTERVAL = 1.5
SERVER_PINGS = Config().keepalive.time_seconds / 10  # so the server pings the idle client too
# Timeouts are not scaled: an answer a busy test machine gives late must not close a connection.
TIMEOUT = 5.0
NOISE = re.compile(r"ENHANCE_YOUR_CALM|too_many_pings|GOAWAY|^E\d{4} |\sERROR\s", re.MULTILINE)

# One call, then idle until the test writes a line; then the channel's state and one more call.
_CLIENT = """
import sys, threading
import grpc
from memoryd.client import NO_RETRY, Keepalive, MemorydClient

target, token, every, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
with MemorydClient(target, token=token, retry=NO_RETRY, keepalive=Keepalive(time=every, timeout=timeout)) as client:
    client.memory_view(subject="idle")
    print("called", flush=True)
    sys.stdin.readline()
    seen, state = threading.Event(), []
    client.channel.subscribe(lambda s: (state.append(s), seen.set()), try_to_connect=False)
    seen.wait(10)
    print("state", state[0].name, flush=True)
    client.memory_view(subject="idle")
    print("called again", flush=True)
"""


@dataclass
class Client:
    process: subprocess.Popen[str]
    log: Path

    def trace(self) -> str:
        return self.log.read_text()

    def answered_pings(self) -> int:
        return self.trace().count("Finish keepalive ping")

    def finish(self) -> list[str]:
        out, _ = self.process.communicate("\n", timeout=60)
        return out.splitlines()


@pytest.fixture(scope="module")
def server(postgres: EmbeddedPostgres, key_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("keepalive")
    with fresh_database(postgres.owner_dsn) as dsn:
        env = server_env(
            MEMORYD_DATA_DIR=str(data_dir), MEMORYD_POSTGRES_DSN=dsn, MEMORYD_SIGNING_KEY_FILE=str(key_file),
            MEMORYD_KEEPALIVE_MIN_PING_INTERVAL_SECONDS=str(MIN_PING_INTERVAL),
            MEMORYD_KEEPALIVE_TIME_SECONDS=str(SERVER_PINGS),
            MEMORYD_KEEPALIVE_TIMEOUT_SECONDS=str(TIMEOUT),
        )
        process = ServerProcess(env, data_dir / "server.log").start()
        yield process
        process.stop()


@pytest.fixture
def start_client(server: ServerProcess, key_file: Path, tmp_path: Path) -> Iterator[Callable[[float], Client]]:
    tenant = unique("tenant")
    with grpc.insecure_channel(server.target) as channel:
        put_view(channel, key_file, tenant, full_view("agent-1"))
    token = token_for(key_file, tenant, "agent-1")
    started: list[Client] = []

    def start(every: float) -> Client:
        log = tmp_path / f"client-{len(started)}.log"
        env = {**os.environ, "GRPC_TRACE": "http_keepalive", "GRPC_VERBOSITY": "debug"}
        with log.open("w") as err:
            process = subprocess.Popen([sys.executable, "-c", _CLIENT, server.target, token, str(every), str(TIMEOUT)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                       cwd=ROOT)
        client = Client(process, log)
        started.append(client)
        assert process.stdout is not None and process.stdout.readline().strip() == "called", client.trace()[-3000:]
        return client

    yield start
    for client in started:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()


def test_an_idle_client_pinging_as_the_policy_says_is_never_sent_away(
        server: ServerProcess, start_client: Callable[[float], Client]) -> None:
    logged = server.log_path.stat().st_size
    client = start_client(2 * MIN_PING_INTERVAL)
    # Four pings, on a connection with no call open: gRPC's default policy would have sent the
    # client away at the third (two strikes allowed).
    def pinged() -> bool:
        assert not NOISE.findall(client.trace()), client.trace()[-3000:]  # sent away: fail now
        return client.answered_pings() >= 4

    wait_until(pinged, timeout=60, what="the idle client's pings were answered")
    assert client.finish() == ["state READY", "called again"]  # the same connection, still up
    server_log = server.log_path.read_text()[logged:]
    assert not NOISE.findall(server_log), server_log[-3000:]


def test_a_client_pinging_faster_than_the_server_permits_is_sent_goaway_too_many_pings(
        start_client: Callable[[float], Client]) -> None:
    client = start_client(1.0)  # gRPC's core pings at most once a second
    wait_until(lambda: "too_many_pings" in client.trace(), timeout=60, what="the server sent GOAWAY too_many_pings",
               diagnose=lambda: client.trace()[-3000:])
    assert "Received a GOAWAY with error code ENHANCE_YOUR_CALM" in client.trace()
    # The client's next call connects again: the server refused the pings, not the client.
    assert client.finish()[-1] == "called again"

"""Issue 39 item 5: a replica answers again soon after its PostgreSQL restarts.

One replica needed 12.3 s after a PostgreSQL restart in the operator's run: psycopg_pool waits
1, 2, 4, 8, 16 s ... between attempts to replace a lost connection, so after an outage of 20 s
the next attempt was due at 31 s (bench/probes/postgres_restart_probe.py measured 9.2 s).
A caller asks once every 100 ms, as the probe does; the bound is the issue's "within ~1-2 s"
with room for a loaded machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, draft, full_view, put_view, token_for, unique
from ..support_distributed import Deployment, ExternalPostgres, MilvusStandalone
from .conftest import new_deployment

pytestmark = pytest.mark.slow
DOWN_SECONDS = 20.0  # long enough for the pool's doubling waits to overshoot (the next at 31 s)
BOUND_SECONDS = 5.0


@pytest.fixture(scope="module")
def deployment(pg15: ExternalPostgres, milvus_standalone: MilvusStandalone,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    shape = new_deployment(pg15, milvus_standalone, tmp_path_factory.mktemp("pg-restart"))
    shape.start_replica()
    yield shape
    shape.stop_all()


class Caller(threading.Thread):
    """Lists a subject's memories once every 100 ms; notes when each call ended and how."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(daemon=True)
        self.agent = agent
        self.calls: list[tuple[float, bool]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                answered = len(self.agent.call("MemoryView", svc.MemoryViewRequest(subject="alice"),
                                               timeout=10).memories) == 1
            except grpc.RpcError:
                answered = False
            self.calls.append((time.monotonic(), answered))
            time.sleep(0.1)

    def answered_after(self, moment: float) -> float | None:
        return next((ended - moment for ended, ok in list(self.calls) if ok and ended >= moment), None)


@pytest.mark.timeout(300)
def test_a_replica_answers_within_seconds_of_postgresql_accepting_connections_again(
        deployment: Deployment) -> None:
    tenant, signing = unique("tenant"), deployment.keys / "signing.pem"
    with grpc.insecure_channel(deployment.replicas[0].target) as channel:
        put_view(channel, signing, tenant, full_view("agent-1"))
        agent = Agent(channel, token_for(signing, tenant))
        agent.write("alice", draft("fact", "Alice keeps bees", key="hobby"))
        caller = Caller(agent)
        caller.start()
        try:
            time.sleep(1)
            assert caller.answered_after(0.0) is not None
            deployment.postgres.stop("immediate")
            stopped = time.monotonic()
            try:
                time.sleep(DOWN_SECONDS)
            finally:
                deployment.postgres.start()  # returns once PostgreSQL accepts connections (pg_ctl -w)
            accepting = time.monotonic()
            down = [ok for ended, ok in list(caller.calls) if stopped + 1 <= ended <= accepting]
            assert down and not any(down)  # it was down, for the caller too
            deadline = accepting + 60
            while (waited := caller.answered_after(accepting)) is None and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            caller.done.set()
            caller.join(15)
    assert waited is not None, "the replica never answered again"
    assert waited < BOUND_SECONDS, f"the replica answered {waited:.1f} s after PostgreSQL accepted connections"

"""Issue 39 item 5: a replica started while the Milvus server does not answer.

It used to report SERVING at once and answer Recall from keywords (degraded) until its first
call reached Milvus — 16 s in the operator's run. Now it listens, is not ready (grpc.health.v1
NOT_SERVING on "" and the memoryd services; `liveness` SERVING), and becomes ready once its
collection has answered; or, past `index_ready_wait_seconds`, ready anyway, degraded.

Milvus "does not answer" by SIGSTOP of its process group, as the operator's fault injection did.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, ServerProcess, draft, full_view, put_view, token_for, unique, wait_until
from ..support_distributed import Deployment, ExternalPostgres, MilvusStandalone
from .conftest import new_deployment

pytestmark = pytest.mark.slow
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_NAMES = ("memoryd.v1.MemoryService", "memoryd.v1.ViewAdminService", "memoryd.v1.TokenAdminService")
TEXT = "Alice plays the cello in an amateur orchestra"


@pytest.fixture(scope="module")
def deployment(pg15: ExternalPostgres, milvus_standalone: MilvusStandalone,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """One replica and a worker, and a tenant whose memory is indexed."""
    shape = new_deployment(pg15, milvus_standalone, tmp_path_factory.mktemp("readiness"))
    shape.start_replica()
    shape.start_worker()
    yield shape
    shape.stop_all()


@pytest.fixture(scope="module")
def tenant(deployment: Deployment) -> str:
    tenant = unique("tenant")
    signing = deployment.keys / "signing.pem"
    with grpc.insecure_channel(deployment.replicas[0].target) as channel:
        put_view(channel, signing, tenant, full_view("agent-1"))
        written = Agent(channel, token_for(signing, tenant)).write(
            "alice", draft("fact", TEXT, key="music"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
    assert written.indexed
    return tenant


def _health(replica: ServerProcess, service: str = "") -> int:
    with grpc.insecure_channel(replica.target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    return int(reply.status)


def _recall(deployment: Deployment, replica: ServerProcess, tenant: str) -> svc.RecallResponse:
    with grpc.insecure_channel(replica.target) as channel:
        agent = Agent(channel, token_for(deployment.keys / "signing.pem", tenant))
        answer: svc.RecallResponse = agent.call("Recall", svc.RecallRequest(subject="alice", query="cello orchestra"),
                                                timeout=30)
    return answer


@pytest.fixture
def milvus_hung(deployment: Deployment) -> Iterator[int]:
    """The Milvus server's process group, stopped (SIGSTOP) for the test; continued after it
    whatever happens."""
    assert deployment.milvus.process is not None
    group = deployment.milvus.process.pid
    os.killpg(group, signal.SIGSTOP)
    try:
        yield group
    finally:
        os.killpg(group, signal.SIGCONT)


@pytest.mark.timeout(600)
def test_a_replica_started_while_milvus_hangs_is_ready_only_once_its_index_answers(
        deployment: Deployment, tenant: str, milvus_hung: int) -> None:
    replica = deployment.start_replica(MEMORYD_INDEX_READY_WAIT_SECONDS="600")
    # Listening, alive, but not taking traffic: probes see the whole server and each service.
    assert _health(replica) == NOT_SERVING
    assert {name: _health(replica, name) for name in SERVICE_NAMES} == dict.fromkeys(SERVICE_NAMES, NOT_SERVING)
    assert _health(replica, "liveness") == SERVING
    os.killpg(milvus_hung, signal.SIGCONT)
    wait_until(lambda: _health(replica) == SERVING, timeout=120, interval=0.2, ignoring=grpc.RpcError,
               what="the replica became ready once Milvus answered",
               diagnose=lambda: replica.log_path.read_text()[-3000:])
    assert {name: _health(replica, name) for name in SERVICE_NAMES} == dict.fromkeys(SERVICE_NAMES, SERVING)
    # Its first Recall uses the vector index: the collection was loaded before it was ready.
    first = _recall(deployment, replica, tenant)
    assert not first.degraded
    assert [(m.memory.text, m.dense_rank > 0) for m in first.memories] == [(TEXT, True)]


@pytest.mark.timeout(600)
def test_a_replica_whose_index_never_answers_is_ready_after_the_wait_and_answers_degraded(
        deployment: Deployment, tenant: str, milvus_hung: int) -> None:
    """The wait is bounded: a Milvus outage never leaves a deployment without a ready replica."""
    replica = deployment.start_replica(MEMORYD_INDEX_READY_WAIT_SECONDS="5")
    wait_until(lambda: _health(replica) == SERVING, timeout=120, interval=0.2, ignoring=grpc.RpcError,
               what="the replica became ready after index_ready_wait_seconds",
               diagnose=lambda: replica.log_path.read_text()[-3000:])
    assert "ready without the vector index: it has not answered within 5s" in replica.log_path.read_text()
    answer = _recall(deployment, replica, tenant)  # Milvus still hangs: keywords only
    assert answer.degraded
    assert [m.memory.text for m in answer.memories] == [TEXT]

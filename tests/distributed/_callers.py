"""What the distributed lane's tests do through a deployment: call each replica as one agent,
and look at the Milvus server directly."""

from __future__ import annotations

import grpc

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, full_view, put_view, token_for, unique
from ..support_distributed import Deployment


class Caller:
    """One agent reaching each replica over its own channel."""

    def __init__(self, shape: Deployment, tenant: str, agent: str = "agent-1") -> None:
        self.channels = [grpc.insecure_channel(r.target) for r in shape.replicas]
        self.token = token_for(shape.keys / "signing.pem", tenant, agent)

    def via(self, n: int) -> Agent:
        return Agent(self.channels[n], self.token)

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


def new_tenant(shape: Deployment, view: pb.View | None = None) -> tuple[str, Caller]:
    tenant = unique("tenant")
    with grpc.insecure_channel(shape.replicas[0].target) as channel:
        put_view(channel, shape.keys / "signing.pem", tenant, view or full_view("agent-1"))
    return tenant, Caller(shape, tenant)


def milvus_count(shape: Deployment, tenant: str) -> int:
    from pymilvus import MilvusClient

    client = MilvusClient(uri=shape.milvus.uri, timeout=10)
    try:
        total = 0
        for collection in [c for c in client.list_collections() if c.startswith("memoryd_")]:
            rows = client.query(collection, filter=f'tenant == "{tenant}"', output_fields=["count(*)"],
                                consistency_level="Strong", timeout=10)
            total += int(rows[0]["count(*)"]) if rows else 0
        return total
    finally:
        client.close()


def segments(shape: Deployment) -> int:
    """Sealed (flushed) segments of memoryd's collections: what a restarted server loads."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=shape.milvus.uri, timeout=10)
    try:
        return sum(len(client.list_persistent_segments(c, timeout=10))
                   for c in client.list_collections() if c.startswith("memoryd_"))
    finally:
        client.close()


def found_by_meaning(caller: Caller, n: int, memory_id: str) -> bool:
    request = svc.RecallRequest(subject="alice", query="beekeeping honey", min_relevance=0.0)
    try:
        found = caller.via(n).call("Recall", request, timeout=5)
    except grpc.RpcError:
        return False
    return not found.degraded and any(m.memory.id == memory_id and m.dense_rank for m in found.memories)

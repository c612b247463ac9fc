"""Operators' endpoints answer without credentials; memoryd's own RPCs never do."""

from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc


def test_health_reports_serving_without_a_token(channel):
    stub = health_pb2_grpc.HealthStub(channel)
    for service in ("", "memoryd.v1.MemoryService", "memoryd.v1.ViewAdminService", "liveness"):
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_memoryd_services(channel):
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    reply = next(stub.ServerReflectionInfo(iter([request]), timeout=10))
    names = {s.name for s in reply.list_services_response.service}
    assert {"memoryd.v1.MemoryService", "memoryd.v1.ViewAdminService", "grpc.health.v1.Health"} <= names

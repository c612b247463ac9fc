"""The interceptor chain: each step shows in behaviour (its order is pinned in
tests/domain/test_interceptor_order.py)."""

from __future__ import annotations

import grpc
import pytest

from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc

from ..support import draft, fails


def test_authentication_runs_before_validation(agent, channel):
    # A request that is both unauthenticated and invalid is refused as unauthenticated.
    stub = svc_grpc.MemoryServiceStub(channel)
    failure = fails(stub.Write, svc.WriteRequest(subject=""), timeout=10)
    assert failure.code == grpc.StatusCode.UNAUTHENTICATED
    assert failure.violations == {}


def test_request_id_is_echoed_and_carried_in_errors(agent):
    _, call = agent.memory.Write.with_call(
        svc.WriteRequest(subject="alice", items=[draft("fact", "x", key="k")]),
        metadata=(*agent.metadata, ("x-request-id", "req-123")), timeout=10,
    )
    assert ("x-request-id", "req-123") in tuple(call.trailing_metadata())
    try:
        agent.memory.Write(svc.WriteRequest(subject=""), metadata=(*agent.metadata, ("x-request-id", "req-456")),
                           timeout=10)
    except grpc.RpcError as error:
        assert ("x-request-id", "req-456") in tuple(error.trailing_metadata())
    else:
        raise AssertionError("expected INVALID_ARGUMENT")


CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


async def test_every_rpc_gets_one_server_span_a_child_of_the_callers_trace(traced):
    stub, meta, tenant = traced.stub, traced.meta, traced.tenant
    # W3C trace context from the caller: the server span joins its trace.
    await stub.Write(svc.WriteRequest(subject="alice", items=[draft("goal", "ship v1", key="q4")]),
                     metadata=(*meta, ("traceparent", f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
                               ("tracestate", "vendor=abc")))
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.Recall(svc.RecallRequest(subject="alice"), metadata=meta)
    # A malformed traceparent is ignored: the call succeeds in a trace of its own.
    for broken in (f"00-{CALLER_TRACE}-{CALLER_SPAN}", f"00-{'0' * 32}-{CALLER_SPAN}-01", "garbage",
                   f"ff-{CALLER_TRACE}-{CALLER_SPAN}-01"):
        await stub.Recall(svc.RecallRequest(subject="alice", keys=["q4"]),
                          metadata=(*meta, ("traceparent", broken)))
    finished = await traced.finished_spans()
    spans = {s.name: s for s in finished}
    write = spans["memoryd.v1.MemoryService/Write"]
    assert format(write.context.trace_id, "032x") == CALLER_TRACE
    assert write.parent is not None and format(write.parent.span_id, "016x") == CALLER_SPAN
    assert write.parent.is_remote and write.context.trace_state.to_header() == "vendor=abc"
    assert write.attributes["rpc.system.name"] == "grpc"
    assert write.attributes["rpc.method"] == "memoryd.v1.MemoryService/Write"
    assert write.attributes["rpc.response.status_code"] == "OK"
    assert write.status.is_unset
    # A caller's error is recorded but is no server error (OpenTelemetry's gRPC conventions).
    [refused] = [s for s in finished if s.name == "memoryd.v1.MemoryService/Recall"
                 and s.attributes["rpc.response.status_code"] == "INVALID_ARGUMENT"]
    assert "error.type" not in refused.attributes and refused.status.is_unset
    assert refused.parent is None and format(refused.context.trace_id, "032x") != CALLER_TRACE
    answered = [s for s in finished if s.name == "memoryd.v1.MemoryService/Recall"
                and s.attributes["rpc.response.status_code"] == "OK"]
    assert len(answered) == 4
    assert all(s.parent is None and format(s.context.trace_id, "032x") != CALLER_TRACE for s in answered)
    # Spans name the tenant and agent, never the content of a request.
    assert write.attributes["memoryd.tenant"] == tenant and write.attributes["memoryd.agent"] == "agent-1"
    assert "ship v1" not in str(dict(write.attributes))

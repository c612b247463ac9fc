"""The interceptor chain: its order is pinned, and each step shows in behaviour."""

from __future__ import annotations

import ast
from pathlib import Path

import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryd.server import Config, Memoryd, build_chain
from memoryd.server._auth import TokenVerifier
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ..support import draft, fails, full_view, token_for, unique

SERVER_PACKAGE = Path(__file__).resolve().parents[2] / "server" / "memoryd" / "server"


def test_chain_order_is_request_id_tracing_metrics_errors_auth_scope_validation(key_file):
    from opentelemetry import trace

    chain = build_chain(verifier=TokenVerifier([]), services=None, config=Config(),  # type: ignore[arg-type]
                        tracer=trace.get_tracer("t"))
    assert [type(step).__name__ for step in chain] == [
        "RequestId", "Tracing", "RpcMetrics", "ErrorMapping", "Authentication", "CallerScopeStep", "Validation",
    ]


def test_handlers_module_imports_no_store_or_driver():
    tree = ast.parse((SERVER_PACKAGE / "_handlers.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m.startswith(("memoryd.storage", "psycopg", "pymilvus"))}
    source = (SERVER_PACKAGE / "_handlers.py").read_text()
    assert "SELECT" not in source and "execute(" not in source


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


async def test_every_rpc_gets_one_server_span_with_its_status(private_database, key_file, tmp_path):
    exporter = InMemorySpanExporter()
    config = Config(data_dir=tmp_path, addr="127.0.0.1:0", postgres_dsn=private_database,
                    signing_key_file=str(key_file))
    app = Memoryd(config, span_exporter=exporter)
    started = await app.start()
    tenant = unique("tenant")
    token = token_for(key_file, tenant)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            await admin_grpc.ViewAdminServiceStub(channel).PutView(
                admin.PutViewRequest(view=full_view("agent-1")),
                metadata=(("authorization", f"Bearer {token_for(key_file, tenant, 'ops', roles=('admin',))}"),))
            stub = svc_grpc.MemoryServiceStub(channel)
            meta = (("authorization", f"Bearer {token}"),)
            await stub.Write(svc.WriteRequest(subject="alice", items=[draft("goal", "ship v1", key="q4")]),
                             metadata=meta)
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.Recall(svc.RecallRequest(subject="alice"), metadata=meta)
    finally:
        await app.stop()  # flushes the span processor
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["memoryd.v1.MemoryService/Write"].attributes["rpc.grpc.status_code"] == 0
    recall = spans["memoryd.v1.MemoryService/Recall"]
    assert recall.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert recall.status.is_ok is False
    # Spans name the tenant and agent, never the content of a request.
    assert "ship v1" not in str(dict(spans["memoryd.v1.MemoryService/Write"].attributes))

"""Recall's stages are child spans of its RPC span, and carry no content."""

from __future__ import annotations

import grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryd.server import Config, Memoryd
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ..support import draft, full_view, token_for, unique

STAGES = {"memoryd.entities", "memoryd.embed", "memoryd.vector_search", "memoryd.keyword_search",
          "memoryd.row_fetch", "memoryd.rerank"}
# vector_fetch only when a candidate came from the keyword channel alone; neighbours only when
# a turn (an event with a source turn id) matched.
OPTIONAL = {"memoryd.vector_fetch", "memoryd.neighbours"}


async def test_recall_has_a_child_span_per_stage(private_database, key_file, tmp_path):
    exporter = InMemorySpanExporter()
    config = Config(data_dir=tmp_path, addr="127.0.0.1:0", postgres_dsn=private_database,
                    signing_key_file=str(key_file))
    app = Memoryd(config, span_exporter=exporter)
    started = await app.start()
    tenant = unique("tenant")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            await admin_grpc.ViewAdminServiceStub(channel).PutView(
                admin.PutViewRequest(view=full_view("agent-1")),
                metadata=(("authorization", f"Bearer {token_for(key_file, tenant, 'ops', roles=('admin',))}"),))
            stub = svc_grpc.MemoryServiceStub(channel)
            meta = (("authorization", f"Bearer {token_for(key_file, tenant)}"),)
            await stub.Write(svc.WriteRequest(subject="alice", items=[draft("fact", "Alice lives in Lisbon",
                                                                            key="home")],
                                              consistency=svc.CONSISTENCY_WAIT_INDEXED), metadata=meta)
            recalled = await stub.Recall(svc.RecallRequest(subject="alice", query="where does Alice live"),
                                         metadata=meta)
            assert recalled.memories and not recalled.degraded
            # Two turns of a conversation: the second comes as the first one's neighbour.
            await stub.Write(svc.WriteRequest(subject="alice", items=[
                draft("event", "Alice: I cooked lasagne in Lisbon for the party", source_turn_id="D1:1"),
                draft("event", "Bob: It was delicious", source_turn_id="D1:2")],
                consistency=svc.CONSISTENCY_WAIT_INDEXED), metadata=meta)
            turns = await stub.Recall(svc.RecallRequest(subject="alice", query="what did Alice cook for the party"),
                                      metadata=meta)
            assert any(m.neighbour_of for m in turns.memories)
    finally:
        await app.stop()  # flushes the span processor
    spans = exporter.get_finished_spans()
    first, second = [s for s in spans if s.name == "memoryd.v1.MemoryService/Recall"]
    for recall, expected in ((first, STAGES), (second, STAGES | {"memoryd.neighbours"})):
        children = [s for s in spans if s.parent is not None and s.parent.span_id == recall.context.span_id]
        assert expected <= {s.name for s in children} <= STAGES | OPTIONAL
        assert all(s.context.trace_id == recall.context.trace_id for s in children)
        for span in children:
            attributes = str(dict(span.attributes or {}))
            assert not any(word in attributes for word in ("Lisbon", "Alice", "alice", "lasagne", "party"))

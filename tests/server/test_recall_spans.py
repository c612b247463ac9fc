"""Recall's stages are child spans of its RPC span, and carry no content."""

from __future__ import annotations

from memoryd.v1 import memory_service_pb2 as svc

from ..support import draft

STAGES = {"memoryd.entities", "memoryd.embed", "memoryd.vector_search", "memoryd.keyword_search",
          "memoryd.row_fetch", "memoryd.rerank"}
# vector_fetch only when a candidate came from the keyword channel alone; neighbours only when
# a turn (an event with a source turn id) matched.
OPTIONAL = {"memoryd.vector_fetch", "memoryd.neighbours"}


async def test_recall_has_a_child_span_per_stage(traced):
    stub, meta = traced.stub, traced.meta
    await stub.Write(svc.WriteRequest(subject="alice", items=[draft("fact", "Alice lives in Lisbon", key="home")],
                                      consistency=svc.CONSISTENCY_WAIT_INDEXED), metadata=meta)
    recalled = await stub.Recall(svc.RecallRequest(subject="alice", query="where does Alice live"), metadata=meta)
    assert recalled.memories and not recalled.degraded
    # Two turns of a conversation: the second comes as the first one's neighbour.
    await stub.Write(svc.WriteRequest(subject="alice", items=[
        draft("event", "Alice: I cooked lasagne in Lisbon for the party", source_turn_id="D1:1"),
        draft("event", "Bob: It was delicious", source_turn_id="D1:2")],
        consistency=svc.CONSISTENCY_WAIT_INDEXED), metadata=meta)
    turns = await stub.Recall(svc.RecallRequest(subject="alice", query="what did Alice cook for the party"),
                              metadata=meta)
    assert any(m.neighbour_of for m in turns.memories)
    spans = await traced.finished_spans()
    first, second = [s for s in spans if s.name == "memoryd.v1.MemoryService/Recall"]
    for recall, expected in ((first, STAGES), (second, STAGES | {"memoryd.neighbours"})):
        children = [s for s in spans if s.parent is not None and s.parent.span_id == recall.context.span_id]
        assert expected <= {s.name for s in children} <= STAGES | OPTIONAL
        assert all(s.context.trace_id == recall.context.trace_id for s in children)
        for span in children:
            attributes = str(dict(span.attributes or {}))
            assert not any(word in attributes for word in ("Lisbon", "Alice", "alice", "lasagne", "party"))

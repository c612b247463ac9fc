"""Recall from a conversation (RecallRequest.context) on a real server: a context alone is a
request, what it recalls is what its latest user turn is about, and its words go nowhere but
the search — not into a span, not into a log line. (Bad contexts: test_bad_input.py; a view
that may not search by text: test_hidden_fields.py; what a view hides: test_non_interference.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
from google.protobuf import timestamp_pb2

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, ServerProcess, draft, fails, unique

T0 = 1_714_550_400
# Three memories on unrelated topics; the conversation's latest user turn is about the cat.
MEMORIES = ["Adopted a grey kitten named Miso from the animal shelter",
            "Ran the Berlin marathon in April in under four hours",
            "Started learning to play the cello with a teacher on Tuesdays"]
CAT = MEMORIES[0]


def said(turn_id: str, speaker: str, text: str, minute: int) -> pb.Turn:
    return pb.Turn(turn_id=turn_id, speaker=speaker, text=text, time=timestamp_pb2.Timestamp(seconds=T0 + 60 * minute))


CONVERSATION = [
    said("t1", "user", "Hi! I had a long and busy week.", 0),
    said("t2", "assistant", "Sorry to hear that. Is there anything I can help you with today?", 1),
    said("t3", "user", "How should I take care of my kitten Miso now that she lives with me?", 2),
]


def written(agent: Agent, subject: str) -> dict[str, str]:
    response = agent.write(subject, *(draft("event", text) for text in MEMORIES),
                           consistency=svc.CONSISTENCY_WAIT_INDEXED)
    assert response.indexed
    return {text: r.memory_id for text, r in zip(MEMORIES, response.results, strict=True)}


def test_a_context_alone_recalls_what_its_latest_user_turn_is_about(agent: Agent):
    subject = unique("subject")
    ids = written(agent, subject)
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, context=CONVERSATION, top_k=3))
    assert recalled.memories and not recalled.degraded
    assert recalled.memories[0].memory.id == ids[CAT]
    assert recalled.memories[0].memory.text == CAT


def test_a_query_with_a_context_is_taken_and_the_query_is_the_focus(agent: Agent):
    subject = unique("subject")
    ids = written(agent, subject)
    small_talk = CONVERSATION[:2]
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, query="my cello lessons", context=small_talk,
                                                      top_k=3))
    assert recalled.memories[0].memory.id == ids["Started learning to play the cello with a teacher on Tuesdays"]


def test_a_context_with_keys_adds_the_keyed_memories(agent: Agent):
    subject = unique("subject")
    ids = written(agent, subject)
    agent.write(subject, draft("fact", "Lyon", key="home_city"))
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, keys=["home_city"], context=CONVERSATION,
                                                      top_k=5))
    texts = [m.memory.text for m in recalled.memories]
    assert "Lyon" in texts and ids[CAT] in [m.memory.id for m in recalled.memories]


async def test_the_context_never_reaches_a_span(traced):
    # Each word is in the conversation only (not in the memory): a span attribute carrying any
    # of them would carry what the user said.
    words = ("Miso", "kitten", "busy", "assistant", "Sorry")
    await traced.stub.Write(svc.WriteRequest(subject="alice", items=[draft("event", "Adopted a grey cat")],
                                             consistency=svc.CONSISTENCY_WAIT_INDEXED), metadata=traced.meta)
    recalled = await traced.stub.Recall(svc.RecallRequest(subject="alice", context=CONVERSATION, min_relevance=0),
                                        metadata=traced.meta)
    assert recalled.memories
    spans = await traced.finished_spans()
    [recall] = [s for s in spans if s.name == "memoryd.v1.MemoryService/Recall"]
    children = [s for s in spans if s.parent is not None and s.parent.span_id == recall.context.span_id]
    assert children
    for span in (recall, *children):
        attributes = str(dict(span.attributes or {})) + " ".join(str(e.attributes) for e in span.events)
        assert not any(word in attributes for word in words), (span.name, attributes)


def test_the_context_never_reaches_the_servers_log(server: ServerProcess, agent: Agent):
    marker = unique("Zanzibar")  # a word no other test says
    request_id = unique("req")
    turns = [said("t1", "user", f"Remember my trip to {marker} with my sister?", 0)]
    agent.memory.Recall(svc.RecallRequest(subject=unique("subject"), context=turns),
                        metadata=(*agent.metadata, ("x-request-id", request_id)), timeout=30)
    # Refused too (a repeated turn id): a violation names the field, never what it holds.
    refused = fails(agent.call, "Recall", svc.RecallRequest(subject=unique("subject"), context=[*turns, turns[0]]))
    assert refused.code == grpc.StatusCode.INVALID_ARGUMENT and marker not in str(refused)
    log = access_lines(server.log_path, request_id)
    assert log and marker not in server.log_path.read_text()


def access_lines(log: Path, request_id: str, timeout: float = 10.0) -> list[str]:
    """The server's access line of ``request_id``, once written (the server logs after answering)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in log.read_text().splitlines() if f"request_id={request_id} " in line]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)

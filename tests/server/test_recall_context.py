"""Recall from a conversation (RecallRequest.context) on a real server: a context alone is a
request, what it recalls is what its latest user turn is about, and its words go nowhere but
the search — not into a span, not into a log line. (Bad contexts: test_bad_input.py; a view
that may not search by text: test_hidden_fields.py; what a view hides: test_non_interference.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
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


def written(agent: Agent, subject: str, memories: list[str] = MEMORIES) -> dict[str, str]:
    response = agent.write(subject, *(draft("event", text) for text in memories),
                           consistency=svc.CONSISTENCY_WAIT_INDEXED)
    assert response.indexed
    return {text: r.memory_id for text, r in zip(memories, response.results, strict=True)}


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


# Issue 40: a conversation, not a clean question. Ana's memories, one of which the talk is about.
ANA = ["Ana ran her first half marathon in Lisbon in October and felt proud of herself",
       "Ana adopted a grey kitten named Miso from the animal shelter",
       "Ana's cello teacher is Mr. Alvarez, on Tuesday evenings",
       "Ana's brother Tom works as a nurse in Porto",
       "Ana repainted the kitchen a pale green in the spring"]
RACE = ANA[0]
# About the race, as most integrations send it: the dialogue as query text, ~600 characters.
RACE_TALK = """Ana: "Guess what, I signed up for another race next spring!"
Assistant: "That's fantastic news! Which one are you going for this time?"
Ana: "A full marathon this time. I'm excited but honestly a little scared."
Assistant: "That's completely normal. A good training plan will make a big difference."
Ana: "I keep thinking about how hard the last few kilometres were the first time."
Assistant: "You've done it before, so you know you can push through."
Ana: "Do you have any tips for the long weekend runs?"
"""


def ana(agent: Agent, subject: str) -> dict[str, str]:
    return written(agent, subject, ANA)


def test_a_dialogue_sent_as_query_text_recalls_what_it_is_about_at_the_default_minimum(agent: Agent):
    # Embedded whole, this English dialogue scored below the default minimum relevance and got
    # nothing back (half of MADial's English dialogues did); read as turns it finds the race.
    subject = unique("subject")
    ids = ana(agent, subject)
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, query=RACE_TALK, top_k=3))
    assert recalled.memories, "nothing recalled at the default minimum relevance"
    assert recalled.memories[0].memory.id == ids[RACE]


def test_the_same_turns_as_context_recall_the_same(agent: Agent):
    subject = unique("subject")
    ana(agent, subject)
    context = [said(f"t{i}", speaker, text.strip('"'), i)
               for i, (speaker, text) in enumerate(line.split(": ", 1) for line in RACE_TALK.splitlines())]
    by_text = agent.call("Recall", svc.RecallRequest(subject=subject, query=RACE_TALK, top_k=5, min_relevance=0))
    by_turns = agent.call("Recall", svc.RecallRequest(subject=subject, context=context, top_k=5, min_relevance=0))
    assert [m.memory.id for m in by_turns.memories] == [m.memory.id for m in by_text.memories]
    assert [round(m.relevance, 5) for m in by_turns.memories] == [round(m.relevance, 5) for m in by_text.memories]


def test_what_the_latest_turn_refers_to_comes_from_the_turns_before_it(agent: Agent):
    # "her teacher" alone could be anyone's; the turn before says whose and of what.
    subject = unique("subject")
    ids = ana(agent, subject)
    agent.write(subject, draft("event", "Ana's swimming coach is Ms. Brandt at the city pool"),
                draft("event", "Ana's maths teacher at school was Mrs. Okafor"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
    context = [said("t1", "user", "I've been practising the cello every evening this month.", 0),
               said("t2", "assistant", "That's wonderful dedication!", 1),
               said("t3", "user", "I want to thank her. What was my teacher called again?", 2)]
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, context=context, top_k=3))
    assert recalled.memories and recalled.memories[0].memory.id == ids["Ana's cello teacher is Mr. Alvarez, on Tuesday evenings"]


def test_after_a_change_of_topic_the_latest_turn_leads(agent: Agent):
    # Three turns about the kitten, then another topic: the earlier turns must not outweigh it.
    subject = unique("subject")
    ids = ana(agent, subject)
    context = [said("t1", "user", "Miso the kitten has been scratching the sofa all week.", 0),
               said("t2", "assistant", "Kittens do that! A scratching post usually helps.", 1),
               said("t3", "user", "She also refuses her food unless it's the salmon kind from the shelter.", 2),
               said("t4", "assistant", "Picky eaters are common at that age.", 3),
               said("t5", "user", "And she hides under the bed whenever the vacuum cleaner is on.", 4),
               said("t6", "assistant", "That's very normal for a young cat.", 5),
               said("t7", "user", "Anyway, other thing: which evening do I have my music lesson?", 6)]
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, context=context, top_k=3))
    assert recalled.memories and recalled.memories[0].memory.id == ids["Ana's cello teacher is Mr. Alvarez, on Tuesday evenings"], \
        [m.memory.text for m in recalled.memories]


def test_a_name_the_assistant_just_said_finds_the_memory_tagged_with_it(agent: Agent):
    # "the hotel" alone could be either; the assistant's question the user answers names Lyon.
    subject = unique("subject")
    response = agent.write(subject, draft("event", "Stayed at a small hotel by the river, room 12", tags=["entity:paris"]),
                           draft("event", "Stayed at a small hotel near the old town, room 7", tags=["entity:lyon"]),
                           consistency=svc.CONSISTENCY_WAIT_INDEXED)
    lyon = response.results[1].memory_id
    written(agent, subject)  # and a few on other topics
    context = [said("t1", "assistant", "Do you remember your trip to Lyon last spring?", 0),
               said("t2", "user", "Yes! Which room did we have at the hotel?", 1)]
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, context=context, top_k=2, min_relevance=0))
    assert recalled.memories[0].memory.id == lyon, [(m.memory.text, list(m.memory.tags), m.named_entity, m.score) for m in recalled.memories]
    assert recalled.memories[0].named_entity == "entity:lyon"


@pytest.mark.parametrize("talk", [
    pytest.param([("user", "Hey there! How are you doing today?")], id="english-greeting"),
    pytest.param([("user", "Morning!"), ("assistant", "Good morning! What can I do for you?"),
                  ("user", "Nothing, just saying hello.")], id="english-hello"),
    pytest.param([("user", "Thanks, that's all I needed."), ("assistant", "You're welcome!"),
                  ("user", "Bye for now!")], id="english-goodbye"),
    pytest.param([("user", "你好呀，今天过得怎么样？")], id="chinese-greeting"),
    pytest.param([("user", "谢谢你，就这样吧。"), ("assistant", "不客气！"), ("user", "拜拜！")], id="chinese-goodbye"),
])
def test_small_talk_recalls_nothing(agent: Agent, talk: list[tuple[str, str]]):
    subject = unique("subject")
    ana(agent, subject)
    agent.write(subject, draft("event", "安娜十月在里斯本跑了第一个半程马拉松"), draft("preference", "安娜喜欢喝乌龙茶"),
                consistency=svc.CONSISTENCY_WAIT_INDEXED)
    context = [said(f"t{i}", speaker, text, i) for i, (speaker, text) in enumerate(talk)]
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, context=context, top_k=5))
    assert not recalled.memories, [(m.memory.text, m.relevance) for m in recalled.memories]
    # The latest turn alone, as a plain query, is a question that asks for nothing either.
    recalled = agent.call("Recall", svc.RecallRequest(subject=subject, query=talk[-1][1], top_k=5))
    assert not recalled.memories, [(m.memory.text, m.relevance) for m in recalled.memories]


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

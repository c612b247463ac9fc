"""A memory answers to every turn that said what it holds, and an Erase by any of them removes
it whole (issue 38 item 4e), on the suite's server: its own turns, the turns of a value said
again or merged into it, of its older versions and of its pending values."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import draft, fails, full_view, unique


def turns_of(memory: pb.Memory | pb.PendingValue) -> list[str]:
    return list(memory.provenance.source_turn_ids)


def write(agent: Any, subject: str, *items: pb.MemoryDraft) -> svc.WriteResponse:
    # Indexed before it returns, so no erase races the outbox worker (its receipt is verified).
    return agent.write(subject, *items, consistency=svc.CONSISTENCY_WAIT_INDEXED)


def erased(agent: Any, subject: str, turn: str) -> svc.ErasureReceipt:
    receipt = agent.erase(subject, source_turn_id=turn).receipt
    assert receipt.verified
    return receipt


def test_a_written_item_answers_to_each_of_its_turns_once_the_first_for_old_clients(agent):
    subject = unique("subject")
    item = draft("event", "Flew to Porto with Bartholomew", source_turn_id="t2",
                 source_turn_ids=["t5", "t2", "D1:7"])
    write(agent, subject, item, draft("event", "Bought a bike", source_turn_id="t2"))
    memories = {m.text: m for m in agent.list_all(subject)}
    porto = memories["Flew to Porto with Bartholomew"]
    assert (turns_of(porto), porto.provenance.source_turn_id) == (["t2", "t5", "D1:7"], "t2")
    assert erased(agent, subject, "t5").counts.memories == 1
    assert [m.text for m in agent.list_all(subject)] == ["Bought a bike"]


def test_bad_source_turns_are_refused_field_by_field_and_nothing_is_written(agent):
    subject = unique("subject")
    items = [draft("event", "a", source_turn_ids=["t1", "", "t 3", "x" * 129]),
             draft("event", "b", source_turn_ids=[f"t{i}" for i in range(33)])]
    failure = fails(agent.write, subject, *items)
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT
    assert set(failure.violations) == {"items[0].source_turn_ids[1]", "items[0].source_turn_ids[2]",
                                       "items[0].source_turn_ids[3]", "items[1].source_turn_ids"}
    assert agent.list_all(subject) == []


@pytest.mark.parametrize(("first", "again"), [
    (draft("fact", "Lives in Lyon", key="home_city", source_turn_id="t1"),
     draft("fact", "Lives in Lyon", key="home_city", source_turn_id="t5")),
    (draft("constraint", "No peanuts", key="diet", source_turn_id="t1"),
     draft("constraint", "No peanuts", key="diet", source_turn_id="t5")),
    (draft("event", "Moved to Porto", source_turn_id="t1"), draft("event", "moved to porto", source_turn_id="t5")),
], ids=["same-value", "same-constraint", "repeated-event"])
def test_a_value_said_again_in_another_turn_answers_to_that_turn_too(agent, first, again):
    subject = unique("subject")
    write(agent, subject, first)
    outcome = write(agent, subject, again).results[0].outcome
    assert outcome in (svc.WRITE_OUTCOME_UNCHANGED, svc.WRITE_OUTCOME_MERGED)
    [memory] = agent.list_all(subject)
    assert turns_of(memory) == ["t1", "t5"]
    assert erased(agent, subject, "t5").counts.memories == 1
    assert agent.list_all(subject) == []


def test_a_replaced_value_keeps_its_turns_in_history_and_an_erase_by_them_removes_the_memory(agent):
    subject = unique("subject")
    memory_id = write(agent, subject, draft("fact", "Lives in Lyon", key="home_city",
                                           source_turn_id="t1")).results[0].memory_id
    write(agent, subject, draft("fact", "Lives in Paris", key="home_city", source_turn_id="t2"))
    [memory] = agent.list_all(subject)
    assert turns_of(memory) == ["t2"]  # the current value came from t2 alone
    history = agent.history(subject, memory_id).versions
    assert [(v.memory.text, turns_of(v.memory)) for v in history] == [("Lives in Paris", ["t2"]),
                                                                      ("Lives in Lyon", ["t1"])]
    # What t1 said is in the memory's history: erasing t1 removes the memory, history included.
    receipt = erased(agent, subject, "t1")
    assert (receipt.counts.memories, receipt.counts.versions) == (1, 2)
    assert agent.list_all(subject, statuses=[pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]) == []


def test_a_pending_value_answers_to_its_turns_and_an_erase_by_them_removes_the_memory(connect):
    subject = unique("subject")
    sync, chat = connect("crm-sync"), connect("chat")
    write(sync, subject, draft("preference", "Tea", key="drink", source_kind=pb.SOURCE_KIND_SYNC, source_turn_id="t1"))
    for turn in ("t8", "t9"):  # the same pending value, said in two turns
        result = write(chat, subject, draft("preference", "Coffee", key="drink", source_kind=pb.SOURCE_KIND_INPUT,
                                           source_turn_id=turn)).results[0]
        assert result.outcome == svc.WRITE_OUTCOME_PENDING
    [memory] = chat.list_all(subject)
    [pending] = memory.pending
    assert (turns_of(memory), pending.text, turns_of(pending)) == (["t1"], "Coffee", ["t8", "t9"])
    assert erased(chat, subject, "t8").counts.memories == 1
    assert chat.list_all(subject) == []


def test_a_chunk_of_several_turns_answers_to_each_of_them(agent):
    subject = unique("subject")
    at = timestamp_pb2.Timestamp(seconds=1_714_550_400)
    turns = [pb.Turn(turn_id=f"t{i}", speaker="user", text=text, time=at)
             for i, text in enumerate(["I moved to Berlin.", "I take German classes.", "My sister visited."], 1)]
    agent.call("Write", svc.WriteRequest(subject=subject, turns=turns, turn_mode=svc.TURN_MODE_CHUNK,
                                         consistency=svc.CONSISTENCY_WAIT_INDEXED))
    [chunk] = agent.list_all(subject)
    assert turns_of(chunk) == ["t1", "t2", "t3"] and chunk.provenance.source_turn_id == "t1"
    assert erased(agent, subject, "t3").counts.memories == 1


def test_a_view_that_hides_provenance_sees_no_source_turn_anywhere(connect):
    subject = unique("subject")
    seeder = connect("seeder")
    memory_id = write(seeder, subject, draft("preference", "Tea", key="drink", source_kind=pb.SOURCE_KIND_SYNC,
                                            source_turn_ids=["t1", "t2"])).results[0].memory_id
    write(seeder, subject, draft("preference", "Coffee", key="drink", source_turn_ids=["t3", "t4"]))  # pending
    def everywhere(agent: Any) -> list[pb.Memory]:
        return [*agent.list_all(subject), *(v.memory for v in agent.history(subject, memory_id).versions),
                *(s.memory for s in agent.recall_keys(subject, "drink").memories)]

    # The seeder's full view shows them all, in each place...
    assert [(turns_of(m), [turns_of(p) for p in m.pending]) for m in everywhere(seeder)] == [
        (["t1", "t2"], [["t3", "t4"]])] * 3
    # ...a view without provenance none, nor the pending value's.
    fields = ["id", "key", "text", "category", "version", "pending"]
    shown = everywhere(connect("probe", view=full_view("probe", visible_fields=fields)))
    assert len(shown) == 3 and all(m.text == "Tea" and [p.text for p in m.pending] == ["Coffee"] for m in shown)
    for m in shown:
        assert not m.HasField("provenance") and not any(p.HasField("provenance") for p in m.pending)
        assert not any(turn in str(m) for turn in ("t1", "t2", "t3", "t4"))

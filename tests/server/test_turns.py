"""Turns on the suite's server, which has no extraction model: chunk mode, refusals, job lookups."""

from __future__ import annotations

import uuid

import grpc
from google.protobuf import timestamp_pb2

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import fails, unique


def turn(turn_id: str, speaker: str, text: str, seconds: int = 1_714_550_400) -> pb.Turn:
    return pb.Turn(turn_id=turn_id, speaker=speaker, text=text, time=timestamp_pb2.Timestamp(seconds=seconds))


def test_turns_to_extract_without_a_model_fail_with_extraction_not_configured_and_write_nothing(agent):
    subject = unique("subject")
    failure = fails(agent.call, "Write", svc.WriteRequest(subject=subject, turns=[turn("t1", "user", "I live in Lyon")]))
    assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "EXTRACTION_NOT_CONFIGURED")
    assert agent.list_all(subject) == []


def test_bad_turns_are_refused_field_by_field(agent):
    turns = [turn("t1", "user", "hello"), turn("t1", "", "again"), pb.Turn(turn_id="t 3", speaker="u", text=" "),
             turn("x" * 65, "user", "ok")]
    failure = fails(agent.call, "Write", svc.WriteRequest(subject="alice", turns=turns))
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT
    assert set(failure.violations) == {"turns[1].turn_id", "turns[1].speaker", "turns[2].turn_id", "turns[2].text",
                                       "turns[2].time", "turns[3].turn_id"}
    many = [turn(f"t{i}", "user", "hi") for i in range(201)]
    assert set(fails(agent.call, "Write", svc.WriteRequest(subject="alice", turns=many)).violations) == {"turns"}


def test_turns_totalling_more_than_64_kib_are_refused_and_write_nothing(agent):
    # Found by the fuzz tests: 200 turns of 8 KiB each were accepted, and one CHUNK Write then
    # made thousands of memories in one transaction.
    subject = unique("subject")
    long = [turn(f"t{i}", "user", f"turn {i}: " + "the quick brown fox jumps over the lazy dog. " * 180)
            for i in range(9)]
    assert sum(len(t.text.encode()) for t in long) > 64 * 1024
    failure = fails(agent.call, "Write", svc.WriteRequest(subject=subject, turns=long, turn_mode=svc.TURN_MODE_CHUNK))
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and set(failure.violations) == {"turns"}
    assert agent.list_all(subject) == []
    # Just under the limit is fine.
    fits = agent.call("Write", svc.WriteRequest(subject=subject, turns=long[:8], turn_mode=svc.TURN_MODE_CHUNK))
    assert len(fits.results) > 8


def test_chunk_mode_stores_turns_as_dated_events_searchable_by_meaning_and_erasable_by_turn(agent):
    subject = unique("subject")
    long_text = ("I moved to Berlin last spring for a job at a robotics startup. The first months were hard because "
                 "of the language. Now I take German classes twice a week and it is getting better. My sister "
                 "visited in August and we cycled along the Spree for a whole day. Next year I want to run the "
                 "Berlin marathon, so I train in the mornings before work.")
    turns = [turn("t1", "user", long_text), turn("t2", "assistant", "That sounds like a great year!", 1_714_550_460),
             turn("t3", "小王", "我下个月要去东京出差，顺便看看樱花。", 1_714_550_520)]
    response = agent.call("Write", svc.WriteRequest(subject=subject, turns=turns, turn_mode=svc.TURN_MODE_CHUNK,
                                                    consistency=svc.CONSISTENCY_WAIT_INDEXED))
    assert response.indexed and not response.extraction_job_id
    assert all(r.outcome == svc.WRITE_OUTCOME_CREATED for r in response.results)
    memories = sorted(agent.list_all(subject), key=lambda m: (m.valid_from.seconds, m.text))
    assert [m.provenance.source_turn_id for m in memories] == ["t1", "t1", "t2", "t3"]
    assert all(m.category == pb.CATEGORY_EVENT and 100 <= len(m.text) <= 300 for m in memories[:2])
    assert memories[2].text == "assistant: That sounds like a great year!"
    assert memories[3].text == "小王: 我下个月要去东京出差，顺便看看樱花。"
    assert [list(m.tags) for m in memories] == [["t1"], ["t1"], ["t2"], ["t3"]]
    assert memories[3].valid_from.seconds == 1_714_550_520
    found = agent.call("Recall", svc.RecallRequest(subject=subject, query="cherry blossoms in Tokyo", top_k=1))
    assert found.memories[0].memory.provenance.source_turn_id == "t3" and not found.degraded

    again = agent.call("Write", svc.WriteRequest(subject=subject, turns=turns[1:2], turn_mode=svc.TURN_MODE_CHUNK))
    assert again.results[0].outcome == svc.WRITE_OUTCOME_MERGED  # an exact repeat, as for any event

    receipt = agent.erase(subject, source_turn_id="t1").receipt
    assert receipt.counts.memories == 2 and receipt.verified
    assert sorted(m.provenance.source_turn_id for m in agent.list_all(subject)) == ["t2", "t3"]


def test_chunks_holding_identity_numbers_are_dropped_by_the_default_policy_and_counted(agent):
    subject = unique("subject")
    turns = [turn("t1", "user", "My passport number is E12345678, please remember it for the visa form."),
             turn("t2", "assistant", "I will not store passport numbers, but I noted the visa appointment.",
                  1_714_550_460),
             turn("t3", "user", "The appointment is on Friday at the consulate in Lyon.", 1_714_550_520)]

    response = agent.call("Write", svc.WriteRequest(subject=subject, turns=turns, turn_mode=svc.TURN_MODE_CHUNK))

    assert {d.reason: d.count for d in response.dropped} == {"pii": 1}
    stored = [m.text for m in agent.list_all(subject)]
    assert len(response.results) == len(stored) >= 1
    assert not any("E12345678" in text for text in stored) and any("consulate" in text for text in stored)
    # Nothing but numbers: nothing written, and the answer says why.
    only = agent.call("Write", svc.WriteRequest(subject=subject, turns=[turn("t9", "user", "E12345678")],
                                                turn_mode=svc.TURN_MODE_CHUNK))
    assert not only.results and {d.reason: d.count for d in only.dropped} == {"pii": 1}


def test_get_extraction_job_of_an_unknown_id_is_not_found_and_a_bad_id_invalid(agent):
    missing = fails(agent.call, "GetExtractionJob", svc.GetExtractionJobRequest(subject="alice",
                                                                                 job_id=str(uuid.uuid4())))
    assert (missing.code, missing.reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    bad = fails(agent.call, "GetExtractionJob", svc.GetExtractionJobRequest(subject="alice", job_id="job-1"))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and set(bad.violations) == {"job_id"}

"""Background extraction acts with the view of the agent that queued it.

Non-interference: two worlds that differ only in what an agent may not read give that agent
identical answers — GetExtractionJob's included — and its queued extraction the same effects
on what it can read. Each test builds both worlds (two subjects, or two tenants where the
difference is per subject) and tries the leak for real against a running server.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from memoryd.server.ingest._chat_errors import ExtractionUnavailable
from memoryd.server.ingest._extraction_llm import ChatExtractor
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import ALL_FIELDS, draft, fails, free_port, full_view, rule, unique, wait_until
from .test_extraction import (
    CAT_EN,
    CAT_SAID,
    HIKE_EN,
    HIKE_EN_AGAIN,
    HIKE_SAID,
    LYON_SAID,
    Rig,
    extract,
    extraction_server,
    finished,
    item,
    turn,
    wait_indexed,
)

POLICY_TTL_DAYS, POLICY_INFERENCE_TRUST = 10, 0.3


@pytest.fixture(scope="module")
def strict_tenant() -> str:
    return unique("tenant-strict")


@pytest.fixture(scope="module")
def rig(postgres, key_file, tmp_path_factory, strict_tenant) -> Iterator[Rig]:
    policies = (f'[policy.tenants."{strict_tenant}"]\nttl_days = {{ fact = {POLICY_TTL_DAYS} }}\n'
                f'trust = {{ inference = {POLICY_INFERENCE_TRUST} }}\n')
    with extraction_server(postgres, key_file, tmp_path_factory, policies) as started:
        yield started


def answer(j: svc.ExtractionJob) -> tuple[Any, ...]:
    """What GetExtractionJob tells the agent, but for what names the job itself (and whether,
    not which, a memory id is given: a blind item's memory of its own has a fresh id)."""
    return (j.state, j.turns, j.attempts, j.error,
            [(bool(r.memory_id), r.outcome, r.reason, r.version) for r in j.results],
            sorted((d.reason, d.count) for d in j.dropped))


def writes_events_reads_facts(agent: str) -> pb.View:
    """May write events but read only facts: it cannot see the events it (or anyone) wrote."""
    return full_view(agent, read_rules=[rule("fact")], write_rules=[rule("event")])


def _port(rig: Rig) -> str:
    return rig.fake.base_url.rsplit(":", 1)[1]


TOKYO = "Alice flies to Tokyo tomorrow"


@pytest.mark.parametrize(("script", "error"), [
    (("500", "500", "500"), "the extraction model was unavailable: HTTP 500 (server error) (gave up after 3 attempts)"),
    (("400",), "the extraction model refused the request: HTTP 400"),
    (("Sure! Alice lives in Lyon.",), "the extraction model's answer could not be parsed"),
    (({"items": "Alice lives in Lyon"},), "the extraction model's answer could not be parsed"),
], ids=["overloaded", "refused", "not-json", "off-schema"])
def test_a_failed_job_says_what_happened_without_the_models_address_output_or_key(rig, script, error):
    agent = rig.agent()
    subject = unique("subject")
    rig.fake.script_chat(*script)
    done, _ = finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon")))
    assert done.state == svc.EXTRACTION_JOB_STATE_FAILED and done.error == error
    # The status and a reason of memoryd's (``_chat_errors``): not where the server is, nor its words.
    for secret in ("127.0.0.1", _port(rig), "Lyon", "sk-extract"):
        assert secret not in done.error
    # The operator's log keeps the detail, never the API key.
    log = rig.log.read_text(errors="replace")
    assert "sk-extract" not in log
    if "parsed" not in error:
        assert f"127.0.0.1:{_port(rig)}" in log


def test_while_retrying_a_job_shows_no_address_either(rig):
    agent = rig.agent()
    subject = unique("subject")
    rig.fake.script_chat("500", {"items": []})
    job_id = extract(agent, subject, turn("t1", LYON_SAID))
    seen = set()

    def succeeded() -> bool:
        current = agent.call("GetExtractionJob", svc.GetExtractionJobRequest(subject=subject, job_id=job_id)).job
        seen.add(current.error)
        return current.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED

    wait_until(succeeded, interval=0.02, what="the retried job succeeds")
    assert seen <= {"", "the extraction model was unavailable: HTTP 500 (server error)"}


def test_a_model_that_is_down_is_named_in_generic_words():
    port = free_port()
    extractor = ChatExtractor(f"http://127.0.0.1:{port}/v1", "fake-chat", "sk-secret", timeout=2.0)
    try:
        with pytest.raises(ExtractionUnavailable) as raised:
            asyncio.run(extractor.extract([], datetime.now(UTC), UTC))
    finally:
        extractor.close()
    assert raised.value.message == "the extraction model could not be reached" == str(raised.value)
    assert f"127.0.0.1:{port}" in raised.value.detail and "sk-secret" not in raised.value.detail


def test_extracted_memories_follow_the_tenants_policy(rig, strict_tenant):
    for tenant, ttl_days, trust in ((strict_tenant, POLICY_TTL_DAYS, POLICY_INFERENCE_TRUST), (unique("tenant"), 730, 0.5)):
        agent = rig.agent(tenant)
        subject = unique("subject")
        rig.fake.script_chat({"items": [item("Alice lives in Lyon", "fact", "home_city")]})
        finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon")))
        [memory] = agent.list_all(subject)
        assert memory.trust == pytest.approx(trust)
        lives = memory.expires_at.seconds - time.time()
        assert ttl_days * 86400 - 600 < lives <= ttl_days * 86400



def test_another_agent_of_the_tenant_cannot_read_a_job_it_did_not_queue(rig):
    tenant = unique("tenant")
    owner = rig.agent(tenant, "agent-1")
    other = rig.agent(tenant, "agent-2")  # the full view too, and the same subject
    subject = unique("subject")
    rig.fake.script_chat({"items": [item("Alice lives in Lyon", "fact", "home_city")]})
    job_id = extract(owner, subject, turn("t1", "I live in Lyon"))
    done, _ = finished(owner, subject, job_id)
    assert done.results[0].memory_id
    answers = [fails(other.call, "GetExtractionJob", svc.GetExtractionJobRequest(subject=subject, job_id=job_id)),
               fails(other.call, "GetExtractionJob", svc.GetExtractionJobRequest(subject=subject,
                                                                                  job_id=str(uuid.uuid4())))]
    assert {(a.code, a.reason, a.message) for a in answers} == {
        (grpc.StatusCode.NOT_FOUND, "NOT_FOUND", "no such extraction job for this subject")}


@pytest.mark.parametrize("view", [
    full_view("extractor", read_rules=[rule("event")], write_rules=[rule("event")]),
    full_view("extractor", read_rules=[rule("event"), rule("preference", "timezone"), rule("fact", "timezone")],
              write_rules=[rule("event")], visible_fields=["id", "key", "category"]),
], ids=["cannot-read-the-key", "cannot-read-the-text"])
def test_a_time_zone_the_agent_may_not_read_does_not_shape_extracted_dates(rig, view):
    worlds = []
    for hidden_zone in ("Asia/Shanghai", ""):
        tenant = unique("tenant")
        owner = rig.agent(tenant, "owner")
        extractor = rig.agent(tenant, "extractor", view)
        subject = "alice"  # the same subject in both tenants
        if hidden_zone:
            owner.write(subject, pb.MemoryDraft(category=pb.CATEGORY_PREFERENCE, key="timezone", text=hidden_zone))
        rig.fake.script_chat({"items": [item(TOKYO)]})
        # 16:00 UTC on Wednesday 1 May is already Thursday 2 May in Shanghai.
        done, _ = finished(extractor, subject,
                           extract(extractor, subject, turn("t1", "I fly to Tokyo tomorrow", minutes=480)))
        system, user = rig.fake.chat_requests[-1].body["messages"]
        worlds.append((answer(done)[:4], [m.text for m in owner.list_all(subject) if m.category == pb.CATEGORY_EVENT],
                       system["content"].split("(", 1)[1][:20], user["content"]))
    assert worlds[0] == worlds[1]
    assert worlds[0][1] == [f"{TOKYO} (2024-05-02)"]


@pytest.mark.parametrize("fields", [["id", "key", "text", "category"], ["id", "key", "text"]],
                         ids=["category-shown", "category-hidden"])
def test_which_of_two_time_zones_is_used_depends_on_no_hidden_update_time(rig, fields):
    # The subject has a preference and a fact `timezone`, written in opposite orders in two
    # tenants. A view that hides update times must get the same dates in both: the zone is
    # chosen by what it shows (the category, else the text), never by which was written last.
    view = full_view("extractor", read_rules=[rule("event"), rule("preference", "timezone"),
                                              rule("fact", "timezone")],
                     write_rules=[rule("event")], visible_fields=fields)
    zones = [(pb.CATEGORY_PREFERENCE, "Asia/Shanghai"), (pb.CATEGORY_FACT, "America/New_York")]
    worlds = []
    for order in (zones, zones[::-1]):
        tenant = unique("tenant")
        owner = rig.agent(tenant, "owner")
        extractor = rig.agent(tenant, "extractor", view)
        for category, zone in order:
            owner.write("alice", pb.MemoryDraft(category=category, key="timezone", text=zone))
        rig.fake.script_chat({"items": [item(TOKYO)]})
        finished(extractor, "alice", extract(extractor, "alice", turn("t1", "I fly to Tokyo tomorrow", minutes=480)))
        worlds.append([m.text for m in owner.list_all("alice") if m.category == pb.CATEGORY_EVENT])
    assert worlds[0] == worlds[1]
    # 16:00 UTC on Wednesday 1 May: Thursday 2 May in Shanghai, still Wednesday in New York.
    assert worlds[0] in ([f"{TOKYO} (2024-05-03)"], [f"{TOKYO} (2024-05-02)"])


def test_a_time_zone_the_agent_may_read_is_used(rig):
    view = full_view("extractor", read_rules=[rule("event"), rule("preference", "timezone")],
                     write_rules=[rule("event")])
    tenant = unique("tenant")
    owner = rig.agent(tenant, "owner")
    extractor = rig.agent(tenant, "extractor", view)
    subject = unique("subject")
    owner.write(subject, pb.MemoryDraft(category=pb.CATEGORY_PREFERENCE, key="timezone", text="Asia/Shanghai"))
    rig.fake.script_chat({"items": [item(TOKYO)]})
    finished(extractor, subject, extract(extractor, subject, turn("t1", "I fly to Tokyo tomorrow", minutes=480)))
    assert [m.text for m in extractor.list_all(subject) if m.category == pb.CATEGORY_EVENT] == [f"{TOKYO} (2024-05-03)"]


def paraphrase_beside_a_hidden_hike(rig, owner, extractor):
    """The owner writes the hike in one subject; the extractor then extracts the same paraphrase
    there and in an empty subject. Returns the first subject, the hike's id and the two jobs."""
    hidden_world, empty_world = unique("subject"), unique("subject")
    hidden_id = owner.write(hidden_world, draft("event", HIKE_EN)).results[0].memory_id
    wait_indexed(rig, hidden_world)
    jobs = []
    for subject in (hidden_world, empty_world):
        rig.fake.script_chat({"items": [item(HIKE_EN_AGAIN)]})
        done, _ = finished(extractor, subject, extract(extractor, subject, turn("t1", HIKE_SAID)))
        jobs.append(done)
    return hidden_world, hidden_id, jobs


def test_extraction_never_merges_into_an_event_the_agent_may_not_read(rig):
    tenant = unique("tenant")
    owner = rig.agent(tenant, "owner")
    blind = rig.agent(tenant, "extractor", writes_events_reads_facts("extractor"))
    hidden_world, hidden_id, jobs = paraphrase_beside_a_hidden_hike(rig, owner, blind)
    assert all(done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED for done in jobs)
    assert answer(jobs[0]) == answer(jobs[1])

    # The paraphrase was written beside the event it may not read, which is untouched.
    memories = {m.id: m for m in owner.list_all(hidden_world)}
    assert memories[hidden_id].text == HIKE_EN and memories[hidden_id].version == 1
    assert sorted(m.text for m in memories.values()) == sorted([HIKE_EN, HIKE_EN_AGAIN])
    assert [v.memory.text for v in owner.history(hidden_world, hidden_id).versions] == [HIKE_EN]


def test_extraction_still_merges_into_events_the_agent_may_read(rig):
    tenant = unique("tenant")
    reader = rig.agent(tenant, "extractor", full_view("extractor", read_rules=[rule("event")],
                                                        write_rules=[rule("event")]))
    subject = unique("subject")
    seen_id = reader.write(subject, draft("event", HIKE_EN)).results[0].memory_id
    wait_indexed(rig, subject)
    rig.fake.script_chat({"items": [item(HIKE_EN_AGAIN)]})
    done, _ = finished(reader, subject, extract(reader, subject, turn("t1", HIKE_SAID)))
    assert [(r.outcome, r.memory_id) for r in done.results] == [(svc.WRITE_OUTCOME_MERGED, seen_id)]


def test_extraction_never_merges_into_an_event_whose_text_the_agent_may_not_see(rig):
    tenant = unique("tenant")
    owner = rig.agent(tenant, "owner")
    textless = [f for f in ALL_FIELDS if f != "text"]
    extractor = rig.agent(tenant, "extractor", full_view("extractor", read_rules=[rule("event")],
                                                         write_rules=[rule("event")], visible_fields=textless))
    hidden_world, hidden_id, jobs = paraphrase_beside_a_hidden_hike(rig, owner, extractor)
    assert [[r.outcome for r in done.results] for done in jobs] == [[svc.WRITE_OUTCOME_CREATED]] * 2
    assert {m.id: m.text for m in owner.list_all(hidden_world)}[hidden_id] == HIKE_EN


def test_the_results_of_a_job_never_tell_what_the_agent_may_not_read(rig):
    # An exact repeat of an event is merged into it by the write path: the outcome and the id
    # would say whether such an event existed.
    tenant = unique("tenant")
    owner = rig.agent(tenant, "owner")
    blind = rig.agent(tenant, "extractor", writes_events_reads_facts("extractor"))
    hidden_world, empty_world = unique("subject"), unique("subject")
    owner.write(hidden_world, draft("event", CAT_EN))
    answers = []
    for subject in (hidden_world, empty_world):
        rig.fake.script_chat({"items": [item(CAT_EN), item("Alice lives in Lyon", "fact", "home_city")]})
        done, _ = finished(blind, subject, extract(blind, subject, turn("t1", f"{CAT_SAID} {LYON_SAID}")))
        answers.append(answer(done))
    assert answers[0] == answers[1]
    # Writing facts is outside its view; the event, written blind, is a memory of its own.
    assert answers[0][4] == [(True, svc.WRITE_OUTCOME_CREATED, "", 1)]
    assert dict(answers[0][5]) == {"outside_view": 1}

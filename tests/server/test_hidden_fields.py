"""Hidden fields shape nothing (issue 37, item 4): a request may select, filter, order, count
and tie-break only on what the caller's view shows.

Each attack is tried for real on the suite's server: two tenants that differ only in a field
the probe's view hides must answer alike, and a request that would select by a hidden field
is refused from the view alone, before anything is read.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import draft, fails, full_view, unique

NARROW = ["id", "key", "text", "category"]  # no update time, version, status, scope, session or provenance


def test_memories_that_score_the_same_are_ordered_by_what_the_view_shows(connect):
    # Two constraints under one key, written in opposite orders: their update times (hidden)
    # are all that tells them apart besides what the probe reads.
    answers = []
    for texts in (["shellfish", "peanuts", "sesame"], ["sesame", "peanuts", "shellfish"]):
        tenant = unique("ties")
        seeder = connect("seeder", tenant=tenant)
        for text in texts:
            seeder.write("alice", draft("constraint", text, key="allergy"))
        probe = connect("probe", tenant=tenant, view=full_view("probe", visible_fields=NARROW))
        answers.append([s.memory.text for s in probe.recall_keys("alice", "allergy", top_k=3).memories])
        answers.append([s.memory.text for s in probe.recall_keys("alice", "allergy", top_k=1).memories])
    assert answers[0] == answers[2] and answers[1] == answers[3]
    assert sorted(answers[0]) == ["peanuts", "sesame", "shellfish"]


SAID_LYON = pb.Turn(turn_id="t1", speaker="user", text="Which city did I say I live in, Lyon?",
                    time=timestamp_pb2.Timestamp(seconds=1_714_550_400))
REFUSED: dict[str, tuple[str, str, Any]] = {
    # name: (the hidden field, the RPC, its request; "ID" is replaced by a real memory id)
    "statuses": ("status", "MemoryView", svc.MemoryViewRequest(subject="alice", statuses=[pb.MEMORY_STATUS_FORGOTTEN])),
    "include_org": ("scope", "Recall", svc.RecallRequest(subject="alice", query="Lyon",
                                                          filter=pb.MemoryFilter(include_org=True))),
    "session_id": ("session_id", "MemoryView", svc.MemoryViewRequest(subject="alice",
                                                                      filter=pb.MemoryFilter(session_id="s1"))),
    "filter-keys": ("key", "MemoryView", svc.MemoryViewRequest(subject="alice", filter=pb.MemoryFilter(keys=["city"]))),
    "keyed-recall": ("key", "Recall", svc.RecallRequest(subject="alice", keys=["city"])),
    # Free text is matched against text and key, whether it comes as a query or as a context.
    "query-text": ("text", "Recall", svc.RecallRequest(subject="alice", query="Lyon")),
    "query-key": ("key", "Recall", svc.RecallRequest(subject="alice", query="Lyon")),
    "context-text": ("text", "Recall", svc.RecallRequest(subject="alice", context=[SAID_LYON])),
    "context-key": ("key", "Recall", svc.RecallRequest(subject="alice", context=[SAID_LYON])),
    "history-by-id": ("id", "GetHistory", svc.GetHistoryRequest(subject="alice", memory_id="ID")),
    "resolve-by-id": ("id", "ResolveConflict", svc.ResolveConflictRequest(
        subject="alice", memory_id="ID", resolution=svc.CONFLICT_RESOLUTION_KEEP_CURRENT)),
    "erase-by-ids": ("id", "Erase", svc.EraseRequest(subject="alice", ids=svc.MemoryIds(ids=["ID"]),
                                                     mode=svc.ERASE_MODE_FORGET)),
    "erase-by-key": ("key", "Erase", svc.EraseRequest(subject="alice", key="city", mode=svc.ERASE_MODE_FORGET)),
    "erase-by-turn": ("provenance", "Erase", svc.EraseRequest(subject="alice", source_turn_id="t1",
                                                              mode=svc.ERASE_MODE_FORGET)),
    "erase-by-category": ("category", "Erase", svc.EraseRequest(subject="alice", category=pb.CATEGORY_FACT,
                                                                mode=svc.ERASE_MODE_FORGET)),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_selecting_by_a_hidden_field_is_refused_and_tells_nothing(connect, case):
    hidden, method, request = REFUSED[case]
    seeder = connect("seeder")
    memory_id = seeder.write("alice", draft("fact", "Lyon", key="city", source_turn_id="t1")).results[0].memory_id
    seeder.write("alice", draft("fact", "Paris", key="city", source_turn_id="t1"))
    if "memory_id" in request.DESCRIPTOR.fields_by_name:
        request.memory_id = memory_id
    elif case == "erase-by-ids":
        request.ids.ids[:] = [memory_id]
    fields = sorted(set(full_view("x").visible_fields) - {hidden})
    probe = connect("probe", view=full_view("probe", visible_fields=fields))
    before = seeder.list_all("alice", statuses=[pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN])
    refused = fails(probe.call, method, request)
    assert refused.code == grpc.StatusCode.PERMISSION_DENIED
    assert f"'{hidden}'" in refused.message and memory_id not in refused.message
    assert seeder.list_all("alice", statuses=[pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]) == before
    # With the field shown, the same request is taken (ResolveConflict then finds no pending value).
    fields.append(hidden)
    try:
        connect("probe", view=full_view("probe", visible_fields=fields)).call(method, request)
    except grpc.RpcError as error:
        assert (case, error.code()) == ("resolve-by-id", grpc.StatusCode.NOT_FOUND)


def test_a_view_that_hides_status_learns_nothing_of_forgetting_from_history(connect):
    seeder = connect("seeder")
    city = seeder.write("alice", draft("fact", "Lyon", key="city")).results[0].memory_id
    seeder.write("alice", draft("fact", "Paris", key="city"))
    hides = connect("hides", view=full_view("hides", visible_fields=[*NARROW, "version"]))
    shows = connect("shows", view=full_view("shows", visible_fields=[*NARROW, "version", "status"]))
    # The change kinds say what the write did (here: versioned a fact), which status and
    # category decide: only a view showing both gets them.
    assert [v.change for v in hides.history("alice", city).versions] == [svc.CHANGE_KIND_UNSPECIFIED] * 2
    assert [v.change for v in shows.history("alice", city).versions] == [svc.CHANGE_KIND_VERSIONED,
                                                                         svc.CHANGE_KIND_CREATED]
    seeder.erase("alice", mode=svc.ERASE_MODE_FORGET, ids=svc.MemoryIds(ids=[city]))
    # Forgotten: gone for a view that cannot tell a forgotten memory from an erased one.
    unknown = fails(hides.history, "alice", city)
    assert unknown.code == grpc.StatusCode.NOT_FOUND
    assert unknown.message == fails(hides.history, "alice", "00000000-0000-4000-8000-000000000000").message
    assert [v.change for v in shows.history("alice", city).versions][0] == svc.CHANGE_KIND_FORGOTTEN


def test_an_erasure_receipt_counts_only_what_the_view_can_see(connect):
    seeder = connect("seeder")
    lyon = seeder.write("alice", draft("fact", "Lyon", key="city")).results[0].memory_id
    seeder.erase("alice", mode=svc.ERASE_MODE_FORGET, ids=svc.MemoryIds(ids=[lyon]))
    seeder.write("alice", draft("fact", "Paris", key="city"))
    seeder.write("alice", draft("fact", "Rome", key="city"))  # a second version of that memory
    probe = connect("probe", view=full_view("probe", visible_fields=NARROW))
    receipt = probe.erase("alice", key="city").receipt
    # Both memories are purged, the forgotten one too ...
    assert seeder.list_all("alice", statuses=[pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]) == []
    # ... but the probe is told of the one it could list, and of no versions (it hides them).
    assert (receipt.counts.memories, receipt.counts.versions) == (1, 0)
    assert receipt.verified
    # The same erase again is answered with the same receipt (a client's retry).
    assert probe.erase("alice", key="city").receipt.counts == receipt.counts


def test_a_view_that_shows_status_and_version_is_told_every_count(connect):
    seeder = connect("seeder")
    lyon = seeder.write("alice", draft("fact", "Lyon", key="city")).results[0].memory_id
    seeder.erase("alice", mode=svc.ERASE_MODE_FORGET, ids=svc.MemoryIds(ids=[lyon]))
    seeder.write("alice", draft("fact", "Paris", key="city"))
    seeder.write("alice", draft("fact", "Rome", key="city"))
    receipt = seeder.erase("alice", key="city").receipt
    assert (receipt.counts.memories, receipt.counts.versions) == (2, 4)

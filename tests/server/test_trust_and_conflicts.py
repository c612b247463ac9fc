"""Source trust through gRPC: a lower-trust write never silently replaces a higher-trust value.

Default trust: sync 0.9, input 0.6, inference 0.5. A keyed write trusted less than the
current value is kept as a pending value (WRITE_OUTCOME_PENDING), visible with both values and
sources in MemoryView and GetHistory, until a write of at least the current trust settles it
or ResolveConflict keeps the current value or accepts the pending one.
"""

from __future__ import annotations

from typing import Any

import grpc
import psycopg
import pytest

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from tests.support import draft, fails, full_view, rule

SYNC, INPUT, INFERENCE = pb.SOURCE_KIND_SYNC, pb.SOURCE_KIND_INPUT, pb.SOURCE_KIND_INFERENCE


def outcome(result: svc.WriteResult) -> str:
    return svc.WriteOutcome.Name(result.outcome)


def current(agent: Any, subject: str = "alice") -> pb.Memory:
    [memory] = agent.list(subject).memories
    return memory


def counts(postgres: Any, tenant: str) -> dict[str, int]:
    with psycopg.connect(postgres.owner_dsn) as conn:
        rows = conn.execute("SELECT name, value FROM pipeline_counts WHERE tenant_id = %s AND name LIKE 'conflicts.%%'",
                            (tenant,)).fetchall()
    return dict(rows)


def resolve(agent: Any, memory_id: str, resolution: int, pending_id: str = "", subject: str = "alice") -> pb.Memory:
    return agent.call("ResolveConflict", svc.ResolveConflictRequest(
        subject=subject, memory_id=memory_id, resolution=resolution, pending_id=pending_id)).memory


@pytest.fixture
def conflict(connect: Any) -> tuple[Any, Any, str]:
    """A SYNC value of `drink` by `crm-sync`, then an INPUT value held back as pending by `chat`."""
    sync, chat = connect("crm-sync"), connect("chat")
    first = sync.write("alice", draft("preference", "Tea", key="drink", source_kind=SYNC)).results[0]
    return sync, chat, first.memory_id


def test_a_lower_trust_write_is_kept_pending_beside_the_current_value(conflict, tenant, postgres):
    sync, chat, memory_id = conflict
    result = chat.write("alice", draft("preference", "Coffee", key="drink", source_kind=INPUT,
                                       source_turn_id="turn-7")).results[0]
    assert (outcome(result), result.memory_id, result.version) == ("WRITE_OUTCOME_PENDING", memory_id, 1)
    assert "trusted less" in result.reason

    memory = current(chat)
    assert (memory.text, memory.version, memory.provenance.agent, memory.trust) == ("Tea", 1, "crm-sync",
                                                                                   pytest.approx(0.9))
    [pending] = memory.pending
    assert (pending.text, pending.provenance.agent, pending.provenance.source_kind, pending.provenance.source_turn_id,
            pending.trust) == ("Coffee", "chat", INPUT, "turn-7", pytest.approx(0.6))
    assert pending.id and pending.written_at.seconds > 0

    [version] = chat.history("alice", memory_id).versions
    assert (version.memory.text, [p.text for p in version.memory.pending]) == ("Tea", ["Coffee"])
    # Recall answers with the current value only.
    [recalled] = chat.recall_keys("alice", "drink").memories
    assert recalled.memory.text == "Tea"
    assert counts(postgres, tenant) == {"conflicts.pending": 1}


def test_the_same_pending_value_written_twice_is_kept_once(conflict):
    _, chat, _ = conflict
    for _ in range(2):
        chat.write("alice", draft("preference", "Coffee", key="drink"))
    chat.write("alice", draft("preference", "Cocoa", key="drink", source_kind=INFERENCE))
    assert sorted((p.text, p.trust) for p in current(chat).pending) == [("Cocoa", pytest.approx(0.5)),
                                                                        ("Coffee", pytest.approx(0.6))]


def test_a_write_of_higher_or_equal_trust_replaces_and_settles_what_it_outranks(connect, tenant, postgres):
    app, crm = connect("app"), connect("crm")
    first = app.write("alice", draft("fact", "Lyon", key="home_city")).results[0]  # input 0.6
    assert outcome(app.write("alice", draft("fact", "Nice", key="home_city", source_kind=INFERENCE)).results[0]) \
        == "WRITE_OUTCOME_PENDING"
    replaced = app.write("alice", draft("fact", "Paris", key="home_city")).results[0]  # input again: 0.6 >= 0.6
    assert (outcome(replaced), replaced.version) == ("WRITE_OUTCOME_VERSIONED", 2)
    assert list(current(app).pending) == []  # the 0.5 value is settled

    app.write("alice", draft("fact", "Nice", key="home_city", source_kind=INFERENCE))
    crm.write("alice", draft("fact", "Berlin", key="home_city", source_kind=SYNC))
    memory = current(app)
    assert (memory.text, memory.provenance.source_kind, memory.trust, list(memory.pending)) == (
        "Berlin", SYNC, pytest.approx(0.9), [])
    assert outcome(app.write("alice", draft("fact", "Rome", key="home_city")).results[0]) == "WRITE_OUTCOME_PENDING"
    assert [v.memory.text for v in app.history("alice", first.memory_id).versions] == ["Berlin", "Paris", "Lyon"]
    assert counts(postgres, tenant) == {"conflicts.pending": 3, "conflicts.settled": 2}


def test_a_more_trusted_source_confirming_the_current_value_settles_the_conflict(conflict):
    sync, chat, memory_id = conflict
    chat.write("alice", draft("preference", "Coffee", key="drink"))
    same = sync.write("alice", draft("preference", "Tea", key="drink", source_kind=SYNC)).results[0]
    assert outcome(same) == "WRITE_OUTCOME_UNCHANGED"
    assert list(current(chat).pending) == []


def test_constraints_accumulate_whatever_the_trust(connect):
    agent = connect()
    agent.write("alice", draft("constraint", "No peanuts", key="diet", source_kind=SYNC))
    result = agent.write("alice", draft("constraint", "No shellfish", key="diet", source_kind=INFERENCE)).results[0]
    assert outcome(result) == "WRITE_OUTCOME_CREATED"
    assert sorted(m.text for m in agent.list("alice").memories) == ["No peanuts", "No shellfish"]


# --- ResolveConflict -------------------------------------------------------------------------


def test_accepting_a_pending_value_makes_it_current_with_its_own_provenance(conflict, tenant, postgres):
    sync, chat, memory_id = conflict
    chat.write("alice", draft("preference", "Coffee", key="drink", source_turn_id="turn-7", importance=0.8))
    chat.write("alice", draft("preference", "Cocoa", key="drink", source_kind=INFERENCE))
    coffee = next(p for p in current(chat).pending if p.text == "Coffee")

    memory = resolve(sync, memory_id, svc.CONFLICT_RESOLUTION_ACCEPT_PENDING, coffee.id)
    assert (memory.text, memory.version, memory.importance, memory.trust) == ("Coffee", 2, pytest.approx(0.8),
                                                                              pytest.approx(0.6))
    assert (memory.provenance.agent, memory.provenance.source_kind, memory.provenance.source_turn_id) == (
        "chat", INPUT, "turn-7")
    assert [p.text for p in memory.pending] == []  # the 0.5 value is outranked by the accepted 0.6
    rows = [(v.memory.text, svc.ChangeKind.Name(v.change)) for v in chat.history("alice", memory_id).versions]
    assert rows == [("Coffee", "CHANGE_KIND_UPDATED"), ("Tea", "CHANGE_KIND_CREATED")]
    assert chat.recall_keys("alice", "drink").memories[0].memory.text == "Coffee"
    assert counts(postgres, tenant)["conflicts.resolved"] == 1
    with psycopg.connect(postgres.owner_dsn) as conn:
        [(agent, ids)] = conn.execute("SELECT agent, memory_ids::text[] FROM audit_log WHERE tenant_id = %s "
                                      "AND action = 'resolve_conflict'", (tenant,)).fetchall()
    assert (agent, ids) == ("crm-sync", [memory_id])


def test_keeping_the_current_value_discards_the_pending_ones(conflict, tenant, postgres):
    sync, chat, memory_id = conflict
    chat.write("alice", draft("preference", "Coffee", key="drink"))
    memory = resolve(chat, memory_id, svc.CONFLICT_RESOLUTION_KEEP_CURRENT)
    assert (memory.text, memory.version, list(memory.pending)) == ("Tea", 1, [])
    assert len(chat.history("alice", memory_id).versions) == 1
    failure = fails(resolve, chat, memory_id, svc.CONFLICT_RESOLUTION_KEEP_CURRENT)
    assert failure.code == grpc.StatusCode.NOT_FOUND  # nothing left to resolve
    assert counts(postgres, tenant)["conflicts.resolved"] == 1


def test_resolve_conflict_is_refused_outside_the_callers_view(conflict, connect):
    sync, chat, memory_id = conflict
    chat.write("alice", draft("preference", "Coffee", key="drink"))
    pending_id = current(chat).pending[0].id
    reader = connect("reader", view=full_view("reader", write_rules=[rule("preference", "other")]))
    denied = fails(resolve, reader, memory_id, svc.CONFLICT_RESOLUTION_ACCEPT_PENDING, pending_id)
    assert denied.code == grpc.StatusCode.PERMISSION_DENIED

    blind = connect("blind", view=full_view("blind", read_rules=[rule("fact")]))
    hidden = fails(resolve, blind, memory_id, svc.CONFLICT_RESOLUTION_ACCEPT_PENDING, pending_id)
    unknown = fails(resolve, blind, "00000000-0000-4000-8000-000000000000", svc.CONFLICT_RESOLUTION_KEEP_CURRENT)
    assert hidden.code == unknown.code == grpc.StatusCode.NOT_FOUND
    assert hidden.message == unknown.message  # an id outside the view looks like any unknown id

    other_subject = fails(resolve, chat, memory_id, svc.CONFLICT_RESOLUTION_KEEP_CURRENT, subject="bob")
    assert other_subject.code == grpc.StatusCode.NOT_FOUND
    wrong_pending = fails(resolve, chat, memory_id, svc.CONFLICT_RESOLUTION_ACCEPT_PENDING, memory_id)
    assert wrong_pending.code == grpc.StatusCode.NOT_FOUND
    assert (current(chat).text, len(current(chat).pending)) == ("Tea", 1)  # nothing changed


@pytest.mark.parametrize("request_fields, field", [
    ({"memory_id": "x", "resolution": svc.CONFLICT_RESOLUTION_KEEP_CURRENT}, "memory_id"),
    ({"memory_id": "00000000-0000-4000-8000-000000000000"}, "resolution"),
    ({"memory_id": "00000000-0000-4000-8000-000000000000", "resolution": svc.CONFLICT_RESOLUTION_ACCEPT_PENDING},
     "pending_id"),
    ({"memory_id": "00000000-0000-4000-8000-000000000000", "resolution": svc.CONFLICT_RESOLUTION_KEEP_CURRENT,
      "pending_id": "nope"}, "pending_id"),
], ids=["bad-memory-id", "no-resolution", "accept-without-pending-id", "bad-pending-id"])
def test_resolve_conflict_validates_its_request(agent, request_fields, field):
    failure = fails(agent.call, "ResolveConflict", svc.ResolveConflictRequest(subject="alice", **request_fields))
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and field in failure.violations


def test_pending_values_are_masked_like_the_memory(conflict, connect):
    _, chat, _ = conflict
    chat.write("alice", draft("preference", "Coffee", key="drink"))
    fields = ["id", "key", "pending", "trust"]
    masked = connect("masked", view=full_view("masked", visible_fields=fields))
    [pending] = current(masked).pending
    assert (pending.text, pending.HasField("provenance"), pending.trust) == ("", False, pytest.approx(0.6))
    without = connect("without", view=full_view("without", visible_fields=["id", "text"]))
    memory = current(without)
    assert (memory.text, list(memory.pending), memory.trust, memory.HasField("expires_at")) == ("Tea", [], 0.0, False)


def test_memories_show_their_expiry_and_trust(agent):
    agent.write("alice", draft("context", "In Paris", key="city"), draft("context", "On call", key="duty", pinned=True))
    by_key = {m.key: m for m in agent.list("alice").memories}
    city = by_key["city"]
    assert city.expires_at.seconds - city.updated_at.seconds == 7 * 86400
    assert city.trust == pytest.approx(0.6)
    assert not by_key["duty"].HasField("expires_at")

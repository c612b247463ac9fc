"""Write through gRPC: the per-category conflict policies, all-or-nothing batches,
idempotency, concurrent writers and provenance.

Conflict policies apply per (owner subject, session, category, key):

* preference, goal, context (keyed): last write wins — CREATED, UNCHANGED, UPDATED;
* fact (keyed): a new value is VERSIONED and the old one is kept as a dated version;
* constraint (keyed): a different text is CREATED alongside, the same text is UNCHANGED;
* unkeyed items (event, decision, and any other category without a key): appended, and an
  exact repeat (case and whitespace aside) is MERGED into the existing memory.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf import timestamp_pb2

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from tests.support import draft, fails

ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]
LAST_WRITE_WINS = ["preference", "goal", "context"]
ALL_CATEGORIES = ["fact", "preference", "constraint", "goal", "context", "event", "decision"]


def outcome(result: svc.WriteResult) -> str:
    return svc.WriteOutcome.Name(result.outcome)


def history_rows(agent, subject: str, memory_id: str) -> list[tuple[int, str, str, str]]:
    """(version, text, status, change) of every version, as GetHistory returns them."""
    versions = agent.history(subject, memory_id).versions
    return [
        (v.memory.version, v.memory.text, pb.MemoryStatus.Name(v.memory.status), svc.ChangeKind.Name(v.change))
        for v in versions
    ]


def stamp(year: int, month: int, day: int) -> timestamp_pb2.Timestamp:
    value = timestamp_pb2.Timestamp()
    value.FromDatetime(datetime(year, month, day, tzinfo=UTC))
    return value


def everything(agent, subject: str) -> list[pb.Memory]:
    """Every memory of ``subject`` in any status, including org and session memories."""
    return agent.list_all(subject, statuses=ALL_STATUSES, filter=pb.MemoryFilter(include_org=True))


# --- conflict policies -------------------------------------------------------------------


@pytest.mark.parametrize("category", LAST_WRITE_WINS, ids=LAST_WRITE_WINS)
def test_keyed_last_write_wins_creates_then_keeps_then_replaces(agent, category):
    first = agent.write("alice", draft(category, "Dark mode", key="ui_theme")).results[0]
    assert (outcome(first), first.version) == ("WRITE_OUTCOME_CREATED", 1)

    same = agent.write("alice", draft(category, "Dark mode", key="ui_theme")).results[0]
    assert (outcome(same), same.version, same.memory_id) == ("WRITE_OUTCOME_UNCHANGED", 1, first.memory_id)

    changed = agent.write("alice", draft(category, "Light mode", key="ui_theme")).results[0]
    assert (outcome(changed), changed.version, changed.memory_id) == ("WRITE_OUTCOME_UPDATED", 2, first.memory_id)

    assert history_rows(agent, "alice", first.memory_id) == [
        (2, "Light mode", "MEMORY_STATUS_ACTIVE", "CHANGE_KIND_UPDATED"),
        (1, "Dark mode", "MEMORY_STATUS_SUPERSEDED", "CHANGE_KIND_CREATED"),
    ]
    assert [(m.id, m.text, m.version) for m in everything(agent, "alice")] == [(first.memory_id, "Light mode", 2)]


@pytest.mark.parametrize("category", LAST_WRITE_WINS, ids=LAST_WRITE_WINS)
def test_keyed_last_write_wins_counts_a_changed_field_other_than_text_as_an_update(agent, category):
    first = agent.write("alice", draft(category, "Dark mode", key="ui_theme", importance=0.2)).results[0]
    changed = agent.write("alice", draft(category, "Dark mode", key="ui_theme", importance=0.9)).results[0]

    assert (outcome(changed), changed.version, changed.memory_id) == ("WRITE_OUTCOME_UPDATED", 2, first.memory_id)
    [current] = everything(agent, "alice")
    assert current.importance == pytest.approx(0.9)


@pytest.mark.parametrize("with_valid_from", [True, False], ids=["new-value-has-valid-from", "no-valid-from"])
def test_keyed_fact_new_value_is_versioned_and_the_old_one_dated(agent, with_valid_from):
    moved = stamp(2024, 6, 1)
    first = agent.write("alice", draft("fact", "Lives in Lisbon", key="home_city", valid_from=stamp(2020, 1, 1)))
    first_id = first.results[0].memory_id
    assert (outcome(first.results[0]), first.results[0].version) == ("WRITE_OUTCOME_CREATED", 1)

    extra = {"valid_from": moved} if with_valid_from else {}
    second = agent.write("alice", draft("fact", "Lives in Porto", key="home_city", **extra)).results[0]
    assert (outcome(second), second.version, second.memory_id) == ("WRITE_OUTCOME_VERSIONED", 2, first_id)

    assert history_rows(agent, "alice", first_id) == [
        (2, "Lives in Porto", "MEMORY_STATUS_ACTIVE", "CHANGE_KIND_VERSIONED"),
        (1, "Lives in Lisbon", "MEMORY_STATUS_SUPERSEDED", "CHANGE_KIND_CREATED"),
    ]
    newest, oldest = agent.history("alice", first_id).versions
    assert not newest.memory.HasField("valid_until"), "the current fact must not be dated"
    assert oldest.memory.HasField("valid_until"), "the replaced fact must keep a dated validity"
    if with_valid_from:
        # The old value stops being true where the new one starts.
        assert oldest.memory.valid_until == moved
    else:
        assert oldest.memory.valid_until.ToDatetime() <= newest.recorded_at.ToDatetime()
    assert [(m.text, m.version) for m in everything(agent, "alice")] == [("Lives in Porto", 2)]


def test_a_replaced_fact_with_a_later_end_date_ends_where_the_new_value_starts(agent):
    moved = stamp(2024, 6, 1)
    first = agent.write("alice", draft("fact", "Lives in Lisbon", key="home_city", valid_from=stamp(2020, 1, 1),
                                       valid_until=stamp(2030, 1, 1))).results[0]
    agent.write("alice", draft("fact", "Lives in Porto", key="home_city", valid_from=moved))

    newest, oldest = agent.history("alice", first.memory_id).versions

    assert oldest.memory.valid_until == moved  # no overlap between the two values


def test_keyed_fact_same_value_again_is_unchanged(agent):
    first = agent.write("alice", draft("fact", "Lives in Lisbon", key="home_city")).results[0]
    again = agent.write("alice", draft("fact", "Lives in Lisbon", key="home_city")).results[0]

    assert (outcome(again), again.version, again.memory_id) == ("WRITE_OUTCOME_UNCHANGED", 1, first.memory_id)
    assert len(agent.history("alice", first.memory_id).versions) == 1


def test_keyed_constraint_with_a_different_text_is_kept_alongside(agent):
    peanuts = agent.write("alice", draft("constraint", "No peanuts", key="diet")).results[0]
    shellfish = agent.write("alice", draft("constraint", "No shellfish", key="diet")).results[0]
    again = agent.write("alice", draft("constraint", "No peanuts", key="diet")).results[0]

    assert (outcome(peanuts), peanuts.version) == ("WRITE_OUTCOME_CREATED", 1)
    assert (outcome(shellfish), shellfish.version) == ("WRITE_OUTCOME_CREATED", 1)
    assert shellfish.memory_id != peanuts.memory_id
    assert "alongside" in shellfish.reason
    assert (outcome(again), again.version, again.memory_id) == ("WRITE_OUTCOME_UNCHANGED", 1, peanuts.memory_id)

    listed = everything(agent, "alice")
    assert sorted((m.text, pb.MemoryStatus.Name(m.status)) for m in listed) == [
        ("No peanuts", "MEMORY_STATUS_ACTIVE"),
        ("No shellfish", "MEMORY_STATUS_ACTIVE"),
    ]
    for result in (peanuts, shellfish):
        assert history_rows(agent, "alice", result.memory_id)[0][2:] == ("MEMORY_STATUS_ACTIVE", "CHANGE_KIND_CREATED")
        assert len(agent.history("alice", result.memory_id).versions) == 1


@pytest.mark.parametrize("category", ALL_CATEGORIES, ids=ALL_CATEGORIES)
def test_unkeyed_exact_repeat_is_merged(agent, category):
    first = agent.write("alice", draft(category, "Visited Lisbon in May", importance=0.3, tags=["travel"])).results[0]
    assert (outcome(first), first.version) == ("WRITE_OUTCOME_CREATED", 1)

    repeat = agent.write(
        "alice", draft(category, "  visited   LISBON in may ", importance=0.8, tags=["portugal"])
    ).results[0]
    assert (outcome(repeat), repeat.version, repeat.memory_id) == ("WRITE_OUTCOME_MERGED", 2, first.memory_id)

    weaker = agent.write("alice", draft(category, "Visited Lisbon in May", importance=0.1)).results[0]
    assert (outcome(weaker), weaker.version, weaker.memory_id) == ("WRITE_OUTCOME_MERGED", 3, first.memory_id)

    [memory] = everything(agent, "alice")
    assert memory.text == "Visited Lisbon in May"
    assert memory.importance == pytest.approx(0.8), "a merge keeps the highest importance"
    assert sorted(memory.tags) == ["portugal", "travel"], "a merge keeps the union of the tags"
    assert memory.version == 3
    assert [row[2:] for row in history_rows(agent, "alice", first.memory_id)] == [
        ("MEMORY_STATUS_ACTIVE", "CHANGE_KIND_MERGED"),
        ("MEMORY_STATUS_SUPERSEDED", "CHANGE_KIND_MERGED"),
        ("MEMORY_STATUS_SUPERSEDED", "CHANGE_KIND_CREATED"),
    ]


@pytest.mark.parametrize("category", ["event", "decision"], ids=["event", "decision"])
def test_unkeyed_different_text_is_appended(agent, category):
    first = agent.write("alice", draft(category, "Visited Lisbon")).results[0]
    second = agent.write("alice", draft(category, "Visited Porto")).results[0]

    assert [outcome(first), outcome(second)] == ["WRITE_OUTCOME_CREATED", "WRITE_OUTCOME_CREATED"]
    assert first.memory_id != second.memory_id
    assert sorted(m.text for m in everything(agent, "alice")) == ["Visited Lisbon", "Visited Porto"]


@pytest.mark.parametrize(
    "other",
    [
        {"category": "goal"},
        {"subject": "bob"},
        {"scope": pb.SCOPE_SESSION, "session_id": "session-1"},
        {"scope": pb.SCOPE_ORG},
    ],
    ids=["other-category", "other-subject", "session-scope", "org-scope"],
)
def test_same_key_for_another_owner_session_or_category_is_a_separate_memory(agent, other):
    base = agent.write("alice", draft("preference", "Porto", key="city")).results[0]
    fields = {k: v for k, v in other.items() if k not in ("category", "subject")}
    second = agent.write(
        other.get("subject", "alice"), draft(other.get("category", "preference"), "Berlin", key="city", **fields)
    ).results[0]

    assert (outcome(second), second.version) == ("WRITE_OUTCOME_CREATED", 1)
    assert second.memory_id != base.memory_id
    [kept] = [m for m in everything(agent, "alice") if m.id == base.memory_id]
    assert (kept.text, kept.version) == ("Porto", 1)


# --- all or nothing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (draft("preference", "", key="empty_text"), "items[2].text"),
        (draft("event", "Went hiking", key="not_allowed"), "items[2].key"),
        (draft("goal", "Run a marathon", key="fitness", importance=1.5), "items[2].importance"),
        (draft("context", "Travelling", key="bad key!"), "items[2].key"),
    ],
    ids=["blank-text", "keyed-event", "importance-out-of-range", "malformed-key"],
)
def test_batch_with_an_invalid_later_item_writes_nothing(agent, bad, field):
    existing = agent.write("alice", draft("preference", "Python", key="primary_language")).results[0]

    failure = fails(
        agent.write,
        "alice",
        draft("preference", "Rust", key="primary_language"),
        draft("event", "Started a new job"),
        bad,
    )

    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in failure.violations
    # Neither the update of item 0 nor the new event of item 1 happened.
    assert [(m.id, m.text, m.version) for m in everything(agent, "alice")] == [
        (existing.memory_id, "Python", 1)
    ]
    assert len(agent.history("alice", existing.memory_id).versions) == 1


def test_batch_with_a_later_org_item_from_a_subject_bound_credential_writes_nothing(connect):
    bound = connect(agent="alice-assistant", subject="alice")
    unbound = connect(agent="auditor")

    failure = fails(
        bound.write,
        "alice",
        draft("preference", "Python", key="primary_language"),
        draft("constraint", "No alcohol at work events", key="policy", scope=pb.SCOPE_ORG),
    )

    assert failure.code == grpc.StatusCode.PERMISSION_DENIED
    assert failure.reason == "SUBJECT_NOT_ALLOWED"
    assert everything(unbound, "alice") == []


# --- idempotency -------------------------------------------------------------------------


def test_retry_with_the_same_idempotency_key_returns_the_first_response(agent):
    items = [draft("preference", "Python", key="primary_language"), draft("event", "Started a new job")]

    first = agent.write("alice", *items, idempotency_key="request-1")
    retry = agent.write("alice", *items, idempotency_key="request-1")

    assert [outcome(r) for r in first.results] == ["WRITE_OUTCOME_CREATED", "WRITE_OUTCOME_CREATED"]
    # The results are the first call's; only `indexed` is as of the retry (see the contract).
    assert retry.results == first.results
    for result in first.results:
        assert len(agent.history("alice", result.memory_id).versions) == 1, "a retry must not write again"
    assert len(everything(agent, "alice")) == 2


def test_retry_after_a_later_change_still_returns_the_first_response_and_changes_nothing(agent):
    item = draft("preference", "Python", key="primary_language")
    first = agent.write("alice", item, idempotency_key="request-1")
    agent.write("alice", draft("preference", "Rust", key="primary_language"))

    retry = agent.write("alice", item, idempotency_key="request-1")

    assert retry.results == first.results
    [current] = everything(agent, "alice")
    assert (current.text, current.version) == ("Rust", 2), "the retry must not re-apply the first request"
    assert len(agent.history("alice", current.id).versions) == 2


@pytest.mark.parametrize(
    ("subject", "items"),
    [
        ("alice", [draft("preference", "Rust", key="primary_language")]),
        ("bob", [draft("preference", "Python", key="primary_language")]),
        ("alice", [draft("preference", "Python", key="primary_language"), draft("event", "Started a new job")]),
        ("alice", [draft("preference", "Python", key="primary_language", importance=0.9)]),
    ],
    ids=["other-text", "other-subject", "extra-item", "other-importance"],
)
def test_idempotency_key_reused_for_a_different_request_is_refused_and_writes_nothing(agent, subject, items):
    first = agent.write("alice", draft("preference", "Python", key="primary_language"), idempotency_key="request-1")

    failure = fails(agent.write, subject, *items, idempotency_key="request-1")

    assert failure.code == grpc.StatusCode.FAILED_PRECONDITION
    assert failure.reason == "IDEMPOTENCY_KEY_REUSED"
    assert [(m.text, m.version) for m in everything(agent, "alice")] == [("Python", 1)]
    assert everything(agent, "bob") == []
    assert len(agent.history("alice", first.results[0].memory_id).versions) == 1


def test_idempotency_keys_of_different_agents_are_independent(connect):
    planner, scheduler, notetaker = connect(agent="planner"), connect(agent="scheduler"), connect(agent="notetaker")
    item = draft("preference", "Python", key="primary_language")

    first = planner.write("alice", item, idempotency_key="request-1")
    # Another agent's identical request with the same key is executed, not replayed.
    same_request = scheduler.write("alice", item, idempotency_key="request-1")
    # And another agent may use the key for a different request.
    other_request = notetaker.write("alice", draft("event", "Started a new job"), idempotency_key="request-1")

    assert outcome(first.results[0]) == "WRITE_OUTCOME_CREATED"
    assert outcome(same_request.results[0]) == "WRITE_OUTCOME_UNCHANGED"
    assert same_request.results[0].memory_id == first.results[0].memory_id
    assert outcome(other_request.results[0]) == "WRITE_OUTCOME_CREATED"
    assert sorted(m.text for m in everything(planner, "alice")) == ["Python", "Started a new job"]
    # The first agent's key still replays its own first response.
    assert planner.write("alice", item, idempotency_key="request-1").results == first.results


# --- concurrency -------------------------------------------------------------------------


def test_concurrent_retries_with_one_idempotency_key_apply_the_request_once(agent):
    retries = 6
    start = threading.Barrier(retries)
    items = [draft("preference", "Python", key="primary_language"), draft("event", "Started a new job")]

    def write(_: int) -> svc.WriteResponse:
        start.wait()
        return agent.write("alice", *items, idempotency_key="request-1")

    with ThreadPoolExecutor(retries) as pool:
        responses = list(pool.map(write, range(retries)))

    assert all(r == responses[0] for r in responses)
    assert [outcome(r) for r in responses[0].results] == ["WRITE_OUTCOME_CREATED", "WRITE_OUTCOME_CREATED"]
    listed = everything(agent, "alice")
    assert sorted((m.text, m.version) for m in listed) == [("Python", 1), ("Started a new job", 1)]



@pytest.mark.parametrize("same_value", [False, True], ids=["different-values", "same-value"])
def test_concurrent_writes_of_one_preference_key_leave_exactly_one_active_memory(agent, same_value):
    writers = 8
    start = threading.Barrier(writers)

    def write(i: int) -> svc.WriteResult:
        text = "Dark mode" if same_value else f"Theme {i}"
        start.wait()
        return agent.write("alice", draft("preference", text, key="ui_theme")).results[0]

    with ThreadPoolExecutor(writers) as pool:
        results = list(pool.map(write, range(writers)))

    assert len({r.memory_id for r in results}) == 1
    [memory] = agent.list_all("alice", filter=pb.MemoryFilter(keys=["ui_theme"]))
    history = agent.history("alice", memory.id).versions
    outcomes = Counter(outcome(r) for r in results)
    if same_value:
        assert outcomes == Counter({"WRITE_OUTCOME_CREATED": 1, "WRITE_OUTCOME_UNCHANGED": writers - 1})
        assert memory.version == 1
        assert {r.version for r in results} == {1}
    else:
        assert outcomes == Counter({"WRITE_OUTCOME_CREATED": 1, "WRITE_OUTCOME_UPDATED": writers - 1})
        assert sorted(r.version for r in results) == list(range(1, writers + 1))
        assert memory.version == writers
        last_writer = next(i for i, r in enumerate(results) if r.version == writers)
        assert memory.text == f"Theme {last_writer}", "the current value is the one written last"
    assert [v.memory.version for v in history] == list(range(memory.version, 0, -1))
    assert [pb.MemoryStatus.Name(v.memory.status) for v in history].count("MEMORY_STATUS_ACTIVE") == 1
    assert history[0].memory.text == memory.text


# --- provenance --------------------------------------------------------------------------


def test_provenance_agent_is_the_token_agent_never_a_request_field(connect):
    writer, editor = connect(agent="writer-a"), connect(agent="writer-b")
    spoofed = (*writer.metadata, ("x-agent", "impostor"), ("agent", "impostor"), ("x-memoryd-agent", "impostor"))
    request = svc.WriteRequest(
        subject="alice",
        items=[draft("preference", "Python", key="primary_language", source_kind=pb.SOURCE_KIND_INFERENCE,
                     source_turn_id="turn-1")],
    )

    created = writer.memory.Write(request, metadata=spoofed, timeout=30).results[0]
    editor.write("alice", draft("preference", "Rust", key="primary_language"))

    [current] = writer.list_all("alice")
    assert current.provenance.agent == "writer-b"
    newest, oldest = writer.history("alice", created.memory_id).versions
    assert newest.memory.provenance.agent == "writer-b"
    assert oldest.memory.provenance == pb.Provenance(
        agent="writer-a", source_kind=pb.SOURCE_KIND_INFERENCE, source_turn_id="turn-1", source_turn_ids=["turn-1"]
    )

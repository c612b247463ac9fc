"""Attacks between agents of one tenant on what the guard decides and presents: write answers
as an oracle (class 1), ranks and score parts describing hidden things (class 2), integrity
by assertion (class 4). Each attack is tried for real against the suite's server; each test
compares what the attacker gets in worlds that differ only in what it cannot read.
"""

from __future__ import annotations

from collections.abc import Callable
import grpc
import pytest

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import view_admin_service_pb2 as admin

from ..support import Agent, draft, fails, full_view, rule, unique

WAIT = svc.CONSISTENCY_WAIT_INDEXED
ALL = [rule("fact"), rule("preference"), rule("constraint"), rule("event"), rule("decision"), rule("goal"),
       rule("context")]


def outcome(result: svc.WriteResult) -> tuple[str, str, int, str]:
    return svc.WriteOutcome.Name(result.outcome), result.memory_id, result.version, result.reason


def _answer_without_id(result: svc.WriteResult) -> tuple[str, int, str]:
    return svc.WriteOutcome.Name(result.outcome), result.version, result.reason


@pytest.fixture
def world(connect: Callable[..., Agent]) -> Callable[..., tuple[Agent, Agent]]:
    """``world(view)`` → (seeder with a full view, attacker with ``view``) in a fresh tenant."""
    def make(view: pb.View) -> tuple[Agent, Agent]:
        tenant = unique("guard")
        return connect("seeder", tenant=tenant), connect(view.agent, tenant=tenant, view=view)
    return make


# --- class 1: a write answer is no oracle ---------------------------------------------------

WRITE_ONLY = full_view("sync-in", read_rules=[rule("preference")], write_rules=[rule("fact", "iban"), rule("event"),
                                                                                 rule("constraint")])


@pytest.mark.parametrize("stored", ["none", "same", "other"])
def test_a_write_only_key_answers_the_same_whatever_is_stored(world, stored):
    seeder, writer = world(WRITE_ONLY)
    if stored != "none":
        seeder.write("alice", draft("fact", "FR76 1111" if stored == "same" else "DE89 2222", key="iban"))
    [result] = writer.write("alice", draft("fact", "FR76 1111", key="iban")).results
    assert outcome(result) == ("WRITE_OUTCOME_ACCEPTED", "", 0, result.reason)
    assert "iban" not in result.reason and "trust" not in result.reason and "version" not in result.reason
    # ...and it was stored: the seeder, who reads it, sees the value.
    assert seeder.recall_keys("alice", "iban").memories[0].memory.text == "FR76 1111"


def test_the_indexed_flag_of_a_blind_write_tells_nothing_of_the_stored_trust(world):
    answers = []
    for stored in (False, True):  # a more trusted value held pending (no index work), or nothing
        seeder, writer = world(WRITE_ONLY)
        if stored:
            seeder.write("alice", draft("fact", "DE89 2222", key="iban", source_kind=pb.SOURCE_KIND_SYNC),
                         consistency=WAIT)
        response = writer.write("alice", draft("fact", "FR76 1111", key="iban"))
        answers.append((response.indexed, [_answer_without_id(r) for r in response.results]))
    assert answers[0] == answers[1]


@pytest.mark.parametrize("stored", [False, True])
def test_a_blind_repeat_of_a_hidden_event_is_a_memory_of_its_own(world, stored):
    seeder, writer = world(WRITE_ONLY)
    hidden_id = ""
    if stored:
        hidden_id = seeder.write("alice", draft("event", "Paid invoice 17", importance=0.2,
                                                tags=["billing"])).results[0].memory_id
    [result] = writer.write("alice", draft("event", "Paid invoice 17", importance=1.0, pinned=True,
                                           tags=["flood"])).results
    assert _answer_without_id(result) == ("WRITE_OUTCOME_CREATED", 1, "")
    assert result.memory_id and result.memory_id != hidden_id
    if stored:  # the hidden event was not merged into, so not changed
        [original] = [m for m in seeder.list_all("alice") if m.id == hidden_id]
        assert (original.version, list(original.tags), original.pinned) == (1, ["billing"], False)
        assert original.importance == pytest.approx(0.2)


@pytest.mark.parametrize("others", [0, 2])
def test_a_blind_constraint_does_not_count_the_hidden_ones(world, others):
    seeder, writer = world(WRITE_ONLY)
    for i in range(others):
        seeder.write("alice", draft("constraint", f"No peanuts {i}", key="diet"))
    [result] = writer.write("alice", draft("constraint", "No peanuts 0", key="diet")).results
    assert _answer_without_id(result) == ("WRITE_OUTCOME_CREATED", 1, "")


TEXT_HIDDEN = full_view("text-hidden", read_rules=ALL, write_rules=ALL,
                        visible_fields=["id", "key", "category", "updated_at"])


def test_a_view_hiding_text_and_version_learns_nothing_by_writing_a_guess(world):
    answers = []
    for guess in ("Tea", "Coffee"):  # the right guess, then a wrong one, each in a world of its own
        seeder, writer = world(TEXT_HIDDEN)
        seeder.write("alice", draft("preference", "Tea", key="drink"))
        [result] = writer.write("alice", draft("preference", guess, key="drink")).results
        answers.append((svc.WriteOutcome.Name(result.outcome), bool(result.memory_id), result.version, result.reason))
        # Not found equal: the guess was written as a new version either way.
        assert [v.memory.text for v in seeder.history("alice", result.memory_id).versions][0] == guess
    assert answers[0] == answers[1] == ("WRITE_OUTCOME_ACCEPTED", True, 0, answers[0][3])


def test_a_sighted_writer_still_gets_the_full_answer(world):
    seeder, writer = world(full_view("full-writer"))
    seeder.write("alice", draft("preference", "Tea", key="drink"))
    [same] = writer.write("alice", draft("preference", "Tea", key="drink")).results
    assert svc.WriteOutcome.Name(same.outcome) == "WRITE_OUTCOME_UNCHANGED" and same.memory_id


# --- class 2: ranks and score parts describe only what the caller reads ----------------------

BILLING = full_view("billing", read_rules=[rule("fact", "billing_*")], write_rules=[rule("fact", "billing_*")])


@pytest.mark.parametrize("hidden", [False, True])
def test_a_glob_with_underscore_never_lets_a_hidden_key_take_a_rank(world, hidden):
    seeder, billing = world(BILLING)
    if hidden:  # Milvus's like reads `billing_%` as billing + any char: this key over-matches there
        for i in range(6):
            seeder.write("alice", draft("fact", f"Billing offshore account number {i}", key=f"billing-offshore{i}"),
                         consistency=WAIT)
    seeder.write("alice", draft("fact", "Billing address is 12 rue de la Paix", key="billing_address"),
                 consistency=WAIT)
    # Without a minimum relevance: the one memory the caller reads answers the query weakly.
    response = billing.call("Recall", svc.RecallRequest(subject="alice", query="billing offshore account", top_k=1,
                                                        min_relevance=0.0))
    [found] = response.memories
    assert found.memory.key == "billing_address"
    assert (found.dense_rank, found.keyword_rank) == (1, found.keyword_rank) and found.keyword_rank in (0, 1)


def test_ranks_are_contiguous_among_what_the_caller_reads(world):
    seeder, billing = world(BILLING)
    for i in range(3):
        seeder.write("alice", draft("fact", f"Billing note {i} about the account", key=f"billing_{i}"),
                     consistency=WAIT)
        seeder.write("alice", draft("fact", f"Billing note {i} about the account, secret", key=f"secret_{i}"),
                     consistency=WAIT)
    memories = billing.call("Recall", svc.RecallRequest(subject="alice", query="billing note account",
                                                        top_k=10)).memories
    assert len(memories) == 3
    assert sorted(m.dense_rank for m in memories) == [1, 2, 3]
    assert sorted(m.keyword_rank for m in memories) == [1, 2, 3]


NO_IMPORTANCE = full_view("no-importance", visible_fields=["id", "key", "text", "category"])


@pytest.mark.parametrize("importance", [0.1, 0.9])
def test_hidden_importance_pinned_and_timestamps_shape_no_score(world, importance):
    seeder, reader = world(NO_IMPORTANCE)
    seeder.write("alice", draft("preference", "Tea", key="drink", importance=importance, pinned=importance > 0.5))
    [scored] = reader.recall_keys("alice", "drink").memories
    assert scored.importance == 0 and scored.recency == 0  # unset: their inputs are hidden
    # similarity 1 (a key match) × 0.65 + recency 1 (hidden inputs) × 0.25; no importance, no pin.
    assert scored.score == pytest.approx(0.65 + 0.25)


def test_pending_values_show_trust_and_time_only_to_views_that_show_them(connect):
    tenant = unique("pending")
    crm = connect("crm", tenant=tenant)
    crm.write("alice", draft("preference", "Tea", key="drink", source_kind=pb.SOURCE_KIND_SYNC))
    connect("chat", tenant=tenant).write("alice", draft("preference", "Coffee", key="drink"))
    viewer = connect("viewer", tenant=tenant, view=full_view("viewer", visible_fields=["id", "key", "text", "pending"]))
    [memory] = viewer.list_all("alice")
    [pending] = memory.pending
    assert pending.text == "Coffee" and pending.trust == 0 and not pending.HasField("written_at")


# --- class 4: integrity comes from the view, not from the request ---------------------------

def test_a_writer_cannot_claim_sync_trust_its_view_does_not_grant(world):
    seeder, writer = world(full_view("plain", max_source_kind=pb.SOURCE_KIND_INPUT))
    refused = fails(writer.write, "alice", draft("fact", "Berlin", key="home_city", source_kind=pb.SOURCE_KIND_SYNC))
    assert refused.code == grpc.StatusCode.PERMISSION_DENIED and "sync" in refused.message
    assert seeder.list_all("alice") == []  # nothing written
    # A lower claim than the view allows is fine.
    writer.write("alice", draft("fact", "Berlin", key="home_city", source_kind=pb.SOURCE_KIND_INFERENCE))


def test_a_view_without_max_source_kind_allows_input_not_sync(world):
    view = full_view("legacy")
    view.ClearField("max_source_kind")
    _, writer = world(view)
    assert fails(writer.write, "alice", draft("fact", "x", key="k", source_kind=pb.SOURCE_KIND_SYNC)).code == \
        grpc.StatusCode.PERMISSION_DENIED
    writer.write("alice", draft("fact", "x", key="k"))


def test_an_archive_cannot_smuggle_sync_provenance_past_the_importers_view(world, connect):
    seeder, importer = world(full_view("importer", max_source_kind=pb.SOURCE_KIND_INPUT))
    seeder.write("bob", draft("fact", "Berlin", key="home_city", source_kind=pb.SOURCE_KIND_SYNC))
    archive = seeder.call("ExportMemories", svc.ExportMemoriesRequest(subject="bob")).archive
    importer.call("ImportMemories", svc.ImportMemoriesRequest(subject="alice", archive=archive))
    [memory] = importer.list_all("alice")
    assert memory.provenance.source_kind == pb.SOURCE_KIND_INPUT
    assert memory.trust == pytest.approx(0.6)


def test_a_subject_bound_admin_token_cannot_manage_views(connect, tenant):
    bound = connect("ops", roles=("admin", "agent"), subject="alice", view=None)
    for method, request in (("ListViews", admin.ListViewsRequest()),
                            ("PutView", admin.PutViewRequest(view=full_view("anyone"))),
                            ("DeleteView", admin.DeleteViewRequest(agent="anyone"))):
        failure = fails(bound.call, method, request)
        assert failure.code == grpc.StatusCode.PERMISSION_DENIED and failure.reason == "SUBJECT_NOT_ALLOWED"



def test_a_listing_never_orders_by_a_hidden_update_time(world):
    seeder, reader = world(full_view("no-times", visible_fields=["id", "key", "text", "category"]))
    for key in ("a", "b", "c", "d"):
        seeder.write("alice", draft("preference", f"first {key}", key=key))
    seeder.write("alice", draft("preference", "second a", key="a"))  # `a` is now the most recent
    listed = [m.id for m in reader.list_all("alice", page_size=2)]
    assert listed == sorted(listed, reverse=True) and len(listed) == 4
    newest_first = [m.key for m in seeder.list_all("alice")]
    assert newest_first[0] == "a"

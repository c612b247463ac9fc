"""ViewAdminService: stored, versioned, audited views; deny by default; changes apply at once."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import psycopg
import pytest

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import view_admin_service_pb2 as admin

from ..support import Agent, draft, fails, full_view, rule

MEMORY_CALLS = {
    "Write": lambda a: a.write("alice", draft("fact", "Lives in Lyon", key="home_city")),
    "Recall": lambda a: a.recall_keys("alice", "home_city"),
    "RecallQuery": lambda a: a.call("Recall", svc.RecallRequest(subject="alice", query="where does she live")),
    "MemoryView": lambda a: a.list("alice"),
    "GetHistory": lambda a: a.history("alice", "8e1c4f38-0f0e-4d53-9d0a-7f3f1f4f7a10"),
    "Erase": lambda a: a.erase("alice", all_of_subject=True),
}


@pytest.fixture
def ops(connect: Callable[..., Agent]) -> Agent:
    return connect("ops", roles=("admin",), view=None)


def _put(ops: Agent, view: pb.View, expected: int = 0) -> admin.PutViewResponse:
    return ops.call("PutView", admin.PutViewRequest(view=view, expected_version=expected))


@pytest.mark.parametrize("call", MEMORY_CALLS.values(), ids=MEMORY_CALLS.keys())
def test_an_agent_without_a_view_is_denied_every_call_and_nothing_is_written(connect, call):
    owner = connect("owner")
    owner.write("alice", draft("fact", "Lives in Lyon", key="home_city"))
    for roles in (("agent",), ("admin", "agent")):  # the admin role opens views, not memories
        stranger = connect("stranger", view=None, roles=roles)
        failure = fails(call, stranger)
        assert failure.code == grpc.StatusCode.PERMISSION_DENIED and failure.reason == "VIEW_MISSING"
        assert "stranger" in failure.message and "Lyon" not in failure.message
    [kept] = owner.list_all("alice")
    assert kept.text == "Lives in Lyon" and kept.version == 1


def test_views_are_versioned_and_storing_the_same_view_changes_nothing(ops: Agent):
    first = _put(ops, full_view("planner"))
    assert first.changed and first.view.version == 1
    again = _put(ops, full_view("planner"))
    assert not again.changed and again.view.version == 1
    narrower = full_view("planner", read_rules=[rule("goal")], visible_fields=["id", "text"])
    second = _put(ops, narrower)
    assert second.changed and second.view.version == 2
    got = ops.call("GetView", admin.GetViewRequest(agent="planner")).view
    assert got == second.view
    assert [r.category for r in got.read_rules] == [pb.CATEGORY_GOAL] and list(got.visible_fields) == ["id", "text"]


def test_a_stale_expected_version_is_refused_and_changes_nothing(ops: Agent):
    _put(ops, full_view("planner"))
    _put(ops, full_view("planner", description="second"), expected=1)
    failure = fails(_put, ops, full_view("planner", description="third"), 1)
    assert failure.code == grpc.StatusCode.FAILED_PRECONDITION and failure.reason == "VIEW_VERSION_CONFLICT"
    got = ops.call("GetView", admin.GetViewRequest(agent="planner")).view
    assert (got.version, got.description) == (2, "second")


def test_deleting_a_view_denies_the_agent_at_once_and_versions_continue(ops: Agent, connect):
    planner = connect("planner")
    planner.write("alice", draft("goal", "Ship v1", key="q4"))
    assert ops.call("DeleteView", admin.DeleteViewRequest(agent="planner")).deleted
    assert fails(planner.recall_keys, "alice", "q4").reason == "VIEW_MISSING"
    assert not ops.call("DeleteView", admin.DeleteViewRequest(agent="planner")).deleted
    assert fails(ops.call, "GetView", admin.GetViewRequest(agent="planner")).code == grpc.StatusCode.NOT_FOUND
    restored = _put(ops, full_view("planner"))
    assert restored.view.version == 3  # 1 put, 2 deleted, 3 put again: the history is kept
    assert [m.memory.text for m in planner.recall_keys("alice", "q4").memories] == ["Ship v1"]


def test_a_narrowed_view_applies_to_the_next_call(ops: Agent, connect):
    planner = connect("planner")
    planner.write("alice", draft("goal", "Ship v1", key="q4"), draft("fact", "Lives in Lyon", key="home_city"))
    _put(ops, full_view("planner", read_rules=[rule("goal")]))
    assert [m.key for m in planner.list_all("alice")] == ["q4"]
    # A goal could have the key home_city, so asking is allowed; the fact is not returned.
    assert planner.recall_keys("alice", "home_city").memories == []
    facts = svc.RecallRequest(subject="alice", keys=["home_city"], filter=pb.MemoryFilter(categories=[pb.CATEGORY_FACT]))
    assert fails(planner.call, "Recall", facts).code == grpc.StatusCode.PERMISSION_DENIED


def test_list_views_pages_through_the_tenants_views_only(ops: Agent, connect, tenant):
    for agent in ("c-agent", "a-agent", "b-agent"):
        _put(ops, full_view(agent))
    other_ops = connect("ops", tenant=tenant + "-other", roles=("admin",), view=None)
    _put(other_ops, full_view("z-agent"))
    agents, token = [], ""
    while True:
        page = ops.call("ListViews", admin.ListViewsRequest(page_size=2, page_token=token))
        assert len(page.views) <= 2
        agents += [v.agent for v in page.views]
        token = page.next_page_token
        if not token:
            break
    assert agents == ["a-agent", "b-agent", "c-agent"]
    # The other tenant's admin sees none of them, and cannot reuse this tenant's page token.
    assert [v.agent for v in other_ops.call("ListViews", admin.ListViewsRequest()).views] == ["z-agent"]
    first = ops.call("ListViews", admin.ListViewsRequest(page_size=1))
    assert fails(other_ops.call, "ListViews", admin.ListViewsRequest(page_token=first.next_page_token)).code \
        == grpc.StatusCode.INVALID_ARGUMENT
    assert fails(other_ops.call, "GetView", admin.GetViewRequest(agent="a-agent")).code == grpc.StatusCode.NOT_FOUND


def test_invalid_views_are_refused_with_every_field_named(ops: Agent):
    bad = pb.View(
        agent="no spaces allowed",
        read_rules=[pb.ViewRule(category=pb.CATEGORY_UNSPECIFIED), pb.ViewRule(category=pb.CATEGORY_FACT,
                                                                                key_patterns=["ib%n", ""])],
        write_rules=[pb.ViewRule(category=99)],
        visible_fields=["text", "tenant_id"],
        erase_selectors=[pb.ERASE_SELECTOR_KEY],
    )
    failure = fails(_put, ops, bad)
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT
    assert set(failure.violations) == {
        "view.agent", "view.read_rules[0].category", "view.read_rules[1].key_patterns[0]",
        "view.read_rules[1].key_patterns[1]", "view.write_rules[0].category", "view.visible_fields[1]",
        "view.erase_selectors"}
    assert fails(ops.call, "GetView", admin.GetViewRequest(agent="no spaces allowed")).code \
        == grpc.StatusCode.INVALID_ARGUMENT


def test_every_view_change_is_in_the_audit_chain(ops: Agent, postgres, tenant):
    _put(ops, full_view("planner"))
    _put(ops, full_view("planner"))  # unchanged: not a change, not an event
    _put(ops, full_view("planner", may_erase=False))
    ops.call("DeleteView", admin.DeleteViewRequest(agent="planner"))
    with psycopg.connect(postgres.owner_dsn) as conn:
        rows = conn.execute("SELECT agent, action, details FROM audit_log WHERE tenant_id = %s ORDER BY seq",
                            (tenant,)).fetchall()
    assert [(agent, action, details["agent"], details["version"]) for agent, action, details in rows] == [
        ("ops", "view.put", "planner", 1), ("ops", "view.put", "planner", 2), ("ops", "view.delete", "planner", 3)]
    assert rows[1][2]["definition"]["may_erase"] is False

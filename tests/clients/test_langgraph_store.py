"""memoryd.client.langgraph.MemorydStore against the suite's real server: LangGraph's BaseStore
behaviours, one test each (docs/langgraph.md lists them), most run on InMemoryStore too and
compared; the server's views through the store; a real StateGraph compiled with the store."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore

from memoryd.client import InvalidArgument, MemorydClient, PermissionDenied
from memoryd.client.langgraph import MemorydStore
from memoryd.v1 import memory_pb2 as pb

from ..support import ROOT, Agent, ServerProcess, full_view, rule

Connect = Callable[..., Agent]

# LangGraph's own listing cases (langgraph-checkpoint's tests/test_store.py, test_list_namespaces_basic).
NAMESPACES = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"),
              ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"), ("admin", "users", "789")]


@pytest.fixture
def client(server: ServerProcess, connect: Connect) -> Iterator[MemorydClient]:
    with MemorydClient(server.target, token=connect("lg-agent").token) as c:
        yield c


@pytest.fixture
def store(client: MemorydClient) -> MemorydStore:
    return MemorydStore(client, subject="alice")


def both(memoryd: MemorydStore) -> list[BaseStore]:
    return [InMemoryStore(), memoryd]


def keys_of(items: list[Any]) -> list[tuple[tuple[str, ...], str]]:
    return [(item.namespace, item.key) for item in items]


# --- get / put / delete ------------------------------------------------------------------

VALUES = [
    {"text": "Alice likes tea", "n": 1, "x": 1.0, "big": 2**60, "ok": True, "none": None,
     "nested": {"list": [1, "two", [3.5, False]], "empty": {}}, "uni": "Lyon — 里昂 ✓"},
    {"deep": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}},  # deeper than a Struct may be
    {},
]


@pytest.mark.parametrize("value", VALUES, ids=["mixed-types", "ten-levels", "empty"])
def test_get_returns_exactly_the_value_that_was_put(store: MemorydStore, value: dict[str, Any]):
    reference = InMemoryStore()
    for s in (reference, store):
        s.put(("users", "alice"), "profile", value)
    got, expected = store.get(("users", "alice"), "profile"), reference.get(("users", "alice"), "profile")
    assert got is not None and expected is not None
    assert got.value == expected.value == value
    assert repr(got.value) == repr(value)  # 1 stays int, 1.0 float: types survive, not just equality
    assert (got.namespace, got.key) == (("users", "alice"), "profile")


def test_get_of_a_missing_key_or_namespace_is_none(store: MemorydStore):
    store.put(("users",), "k", {"v": 1})
    assert store.get(("users",), "other") is None
    assert store.get(("users", "k"), "k") is None  # the same key one level down is another item


def test_put_again_replaces_the_value_keeps_created_at(store: MemorydStore):
    store.put(("docs",), "d1", {"v": 1})
    first = store.get(("docs",), "d1")
    store.put(("docs",), "d1", {"v": 2})
    second = store.get(("docs",), "d1")
    assert first is not None and second is not None
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert len(store.search(("docs",))) == 1
    store.put(("docs",), "d1", {"v": 2})  # the same value again: memoryd's UNCHANGED
    assert store.get(("docs",), "d1").updated_at == second.updated_at  # type: ignore[union-attr]


def test_delete_removes_the_item_from_get_search_and_listing(store: MemorydStore):
    store.put(("docs", "x"), "d1", {"v": 1})
    store.put(("docs", "y"), "d2", {"v": 2})
    store.delete(("docs", "x"), "d1")
    assert store.get(("docs", "x"), "d1") is None
    assert keys_of(store.search(("docs",))) == [(("docs", "y"), "d2")]
    assert store.list_namespaces(prefix=("docs",)) == [("docs", "y")]
    store.put(("docs", "x"), "d1", {"v": 3})  # a deleted key can be put again
    assert store.get(("docs", "x"), "d1").value == {"v": 3}  # type: ignore[union-attr]


@pytest.mark.parametrize("namespace,key", [
    (("a/b",), "c"), (("a",), "b/c"), (("with space", "ünï"), "k:ey/with.dots"), (("-lead", "_x"), "%"),
    (("users", "u" * 60), "k" * 100),  # past memoryd's 128-byte key: hashed
], ids=["slash-in-label", "slash-in-key", "spaces-unicode-colon", "leading-punctuation", "too-long-hashed"])
def test_any_label_and_key_round_trip_without_collisions(store: MemorydStore, namespace: tuple[str, ...], key: str):
    store.put(("a/b",), "c", {"who": "a/b + c"})
    store.put(("a",), "b/c", {"who": "a + b/c"})
    store.put(namespace, key, {"who": "this one"})
    assert store.get(namespace, key).value == {"who": "this one"}  # type: ignore[union-attr]
    others = {(("a/b",), "c"): "a/b + c", (("a",), "b/c"): "a + b/c"}
    for (ns, k), who in others.items():
        if (ns, k) != (namespace, key):
            assert store.get(ns, k).value == {"who": who}  # type: ignore[union-attr]


@pytest.mark.parametrize("namespace", [(), ("has.dot",), ("",), ("langgraph", "x")],
                         ids=["empty", "dot", "empty-label", "reserved-root"])
def test_invalid_namespaces_are_refused_as_by_every_store(store: MemorydStore, namespace: tuple[str, ...]):
    for s in both(store):
        with pytest.raises(InvalidNamespaceError):
            s.put(namespace, "k", {"v": 1})


def test_a_value_that_is_not_json_is_refused_before_any_call(store: MemorydStore):
    with pytest.raises(TypeError, match="JSON"):
        store.put(("docs",), "d", {"when": object()})
    assert store.get(("docs",), "d") is None


def test_values_past_memoryds_limits_fail_with_the_servers_reason(store: MemorydStore):
    store.put(("docs",), "fits", {"text": "x" * 12_000})
    assert store.get(("docs",), "fits").value == {"text": "x" * 12_000}  # type: ignore[union-attr]
    with pytest.raises(InvalidArgument) as refused:
        store.put(("docs",), "too-big", {"text": "x" * 20_000})
    assert any("data" in field for field in refused.value.violations)
    assert store.get(("docs",), "too-big") is None
    with pytest.raises(ValueError, match="31 labels"):
        store.put(tuple(f"l{i}" for i in range(32)), "deep", {"v": 1})


# --- search -----------------------------------------------------------------------------

def fill(s: BaseStore) -> None:
    """28 items in one batch (for MemorydStore, one Write)."""
    s.batch([PutOp(ns, f"k{i}", {"i": i, "even": i % 2 == 0, "name": f"n{i}", "meta": {"tier": i // 3}})
             for i in range(7) for ns in [("a",), ("a", "b"), ("ab",), ("a", "c", "d")]])


def test_search_by_prefix_finds_what_the_reference_finds(store: MemorydStore):
    results = []
    for s in both(store):
        fill(s)
        results.append({prefix: sorted(keys_of(s.search(prefix, limit=100))) for prefix in
                        [(), ("a",), ("a", "b"), ("ab",), ("a", "c"), ("nope",)]})
    assert results[0] == results[1]
    assert len(results[1][("a",)]) == 21  # ("ab",) is not under ("a",)


@pytest.mark.parametrize("filter", [
    {"even": True}, {"i": {"$eq": 3}}, {"i": {"$ne": 3}}, {"i": {"$gt": 4}}, {"i": {"$gte": 4}},
    {"i": {"$lt": 2}}, {"i": {"$lte": 2}}, {"i": {"$gt": 1, "$lt": 5}, "even": False}, {"meta": {"tier": 1}},
    {"name": "n5"}, {"missing": None}, {"name": {"$ne": "n5"}},
], ids=["exact", "eq", "ne", "gt", "gte", "lt", "lte", "range-and-exact", "nested", "string", "missing-is-none",
        "string-ne"])
def test_search_filters_match_the_reference(store: MemorydStore, filter: dict[str, Any]):
    found = []
    for s in both(store):
        fill(s)
        found.append(sorted(keys_of(s.search(("a",), filter=filter, limit=100))))
    assert found[0] == found[1] and found[1]


def test_ordering_operators_compare_strings_and_skip_what_is_not_comparable(store: MemorydStore):
    # Where InMemoryStore raises (it converts both sides to float), MemorydStore compares two
    # strings as strings and lets a missing or non-number field not match.
    fill(store)
    assert sorted(i.key for i in store.search(("ab",), filter={"name": {"$gt": "n4"}})) == ["k5", "k6"]
    assert store.search(("a",), filter={"missing": {"$gt": 1}}) == []
    assert store.search(("a",), filter={"name": {"$lt": 3}}) == []
    with pytest.raises(ValueError, match="operator"):
        store.search(("a",), filter={"i": {"$in": [1]}})


def test_search_pages_add_up_to_the_full_listing(store: MemorydStore):
    fill(store)
    full = keys_of(store.search(("a",), limit=100))
    paged = [k for offset in range(0, len(full), 4) for k in keys_of(store.search(("a",), limit=4, offset=offset))]
    assert paged == full and len(full) == 21
    even = keys_of(store.search(("a",), filter={"even": True}, limit=100))
    assert keys_of(store.search(("a",), filter={"even": True}, limit=3, offset=2)) == even[2:5]


def test_search_without_a_query_lists_most_recently_updated_first(store: MemorydStore):
    for key in ["first", "second", "third"]:
        store.put(("docs",), key, {"v": key})
    store.put(("docs",), "first", {"v": "again"})
    assert [i.key for i in store.search(("docs",))] == ["first", "third", "second"]
    assert all(i.score is None for i in store.search(("docs",)))


DOCS = {"pie": {"text": "Grandma's apple pie recipe with cinnamon and butter"},
        "bike": {"text": "How to fix a flat tyre on a road bicycle"},
        "tax": {"text": "Filing the yearly income tax return before the deadline"},
        "cat": {"text": "The cat sleeps on the warm windowsill all afternoon"}}


def test_search_with_a_query_ranks_by_meaning_and_words(store: MemorydStore):
    for key, value in DOCS.items():
        store.put(("docs",), key, value)
    found = store.search(("docs",), query="baking a dessert with apples", limit=4)
    assert found[0].key == "pie"
    scores = [i.score for i in found]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert store.search(("docs",), query="repairing a bicycle wheel", limit=1)[0].key == "bike"
    assert store.search(("other",), query="apple pie") == []


def test_search_with_a_query_and_a_filter(store: MemorydStore):
    for key, value in DOCS.items():
        store.put(("docs",), key, {**value, "kind": "home" if key in ("pie", "cat") else "chores"})
    found = store.search(("docs",), query="apple pie", filter={"kind": "chores"}, limit=4)
    assert {i.key for i in found} == {"bike", "tax"}


def test_index_fields_decide_what_a_query_searches(client: MemorydClient):
    store = MemorydStore(client, subject="alice", index_fields=["title"])
    store.put(("docs",), "a", {"title": "apple pie", "body": "bicycle repair manual"})
    store.put(("docs",), "b", {"title": "bicycle repair", "body": "apple pie"})
    assert store.search(("docs",), query="apple pie", limit=1)[0].key == "a"
    store.put(("docs",), "c", {"title": "zzz", "body": "apple pie apple pie"}, index=["body"])
    assert store.search(("docs",), query="apple pie apple pie", limit=1)[0].key in ("a", "c")
    store.put(("docs",), "hidden", {"title": "apple pie"}, index=False)
    assert store.get(("docs",), "hidden").value == {"title": "apple pie"}  # type: ignore[union-attr]
    assert "hidden" not in [i.key for i in store.search(("docs",), query="apple pie", limit=2)]


# --- list_namespaces ----------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {}, {"prefix": ("a", "b")}, {"suffix": ("f",)}, {"prefix": ("a",), "suffix": ("f",)},
    {"prefix": ("a", "b"), "max_depth": 3}, {"max_depth": 2}, {"prefix": ("a", "b"), "limit": 2},
    {"prefix": ("a", "b"), "offset": 2}, {"prefix": ("a", "*", "f")}, {"suffix": ("*", "f")},
    {"prefix": ("nonexistent",)}, {"prefix": ("users", "123")}, {"prefix": ("*", "users"), "suffix": ("*", "settings")},
], ids=["all", "prefix", "suffix", "prefix-suffix", "max-depth-3", "max-depth-2", "limit", "offset",
        "prefix-wildcard", "suffix-wildcard", "none", "exact", "no-match"])
def test_list_namespaces_matches_the_reference(store: MemorydStore, kwargs: dict[str, Any]):
    listed = []
    for s in both(store):
        for i, ns in enumerate(NAMESPACES):
            s.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
        listed.append(s.list_namespaces(**kwargs))
    assert listed[0] == listed[1]


# --- async, and sync inside a running loop -----------------------------------------------

async def test_async_operations_and_sync_ones_inside_a_running_loop(store: MemorydStore):
    await store.aput(("docs",), "a", {"v": 1})
    assert (await store.aget(("docs",), "a")).value == {"v": 1}  # type: ignore[union-attr]
    # A blocking call from inside the loop works as well (as in a sync node of an async graph).
    store.put(("docs",), "b", {"v": 2})
    assert store.get(("docs",), "b").value == {"v": 2}  # type: ignore[union-attr]
    # Concurrent calls on one store run side by side on the loop's executor.
    got = await asyncio.gather(*(store.aget(("docs",), k) for k in ["a", "b", "c"]))
    assert [g.value if g else None for g in got] == [{"v": 1}, {"v": 2}, None]
    assert sorted(keys_of(await store.asearch(("docs",)))) == [(("docs",), "a"), (("docs",), "b")]
    assert await store.alist_namespaces() == [("docs",)]
    await store.adelete(("docs",), "a")
    assert await store.aget(("docs",), "a") is None


def test_one_batch_reads_before_it_writes_like_the_reference(store: MemorydStore):
    answers = []
    for s in both(store):
        s.put(("docs",), "k", {"v": "old"})
        results = s.batch([PutOp(("docs",), "k", {"v": "new"}), GetOp(("docs",), "k"),
                           PutOp(("docs",), "j", {"v": 1}), PutOp(("docs",), "j", {"v": 2})])
        answers.append(([r.value if r else r for r in results], s.get(("docs",), "j").value))  # type: ignore[union-attr]
    assert answers[0] == answers[1] == ([None, {"v": "old"}, None, None], {"v": 2})


# --- TTL --------------------------------------------------------------------------------

def test_an_item_with_a_ttl_is_gone_once_it_runs_out(store: MemorydStore):
    store.put(("docs",), "short", {"v": 1}, ttl=1 / 60)  # one second
    store.put(("docs",), "long", {"v": 2}, ttl=60)
    store.put(("docs",), "none", {"v": 3})
    assert store.get(("docs",), "short") is not None  # a read does not extend a memoryd TTL (docs/langgraph.md)
    time.sleep(1.5)
    assert store.get(("docs",), "short") is None
    assert sorted(i.key for i in store.search(("docs",))) == ["long", "none"]


def test_the_store_default_ttl_applies(client: MemorydClient):
    store = MemorydStore(client, subject="alice", ttl={"default_ttl": 1 / 60})
    store.put(("docs",), "short", {"v": 1})
    store.put(("docs",), "kept", {"v": 2}, ttl=None)
    time.sleep(1.5)
    assert [i.key for i in store.search(("docs",))] == ["kept"]


# --- subjects and views ------------------------------------------------------------------

def test_subject_at_puts_each_user_in_their_own_subject(client: MemorydClient):
    store = MemorydStore(client, subject_at=1)
    store.put(("memories", "alice"), "m", {"text": "Alice likes tea"})
    store.put(("memories", "bob"), "m", {"text": "Bob likes coffee"})
    assert store.get(("memories", "bob"), "m").value == {"text": "Bob likes coffee"}  # type: ignore[union-attr]
    # memoryd itself files them under the subjects, keyed and tagged by namespace.
    alice = client.recall(subject="alice", keys=["lg/memories.alice/m"]).memories
    assert [m.memory.text for m in alice] == ['{"text": "Alice likes tea"}']
    assert set(alice[0].memory.tags) == {"langgraph", "lg:memories", "lg:memories.alice"}
    assert list(client.recall(subject="bob", keys=["lg/memories.alice/m"]).memories) == []
    assert store.list_namespaces(prefix=("memories", "alice")) == [("memories", "alice")]
    with pytest.raises(ValueError, match="subject"):
        store.search(("memories",))
    with pytest.raises(ValueError, match="subject"):
        store.list_namespaces(prefix=("memories", "*"))


def test_a_view_hides_namespaces_from_get_search_and_listing(server: ServerProcess, connect: Connect,
                                                             store: MemorydStore):
    store.put(("notes",), "n1", {"text": "Alice's shopping list: apples"})
    store.put(("secrets",), "s1", {"text": "Alice's apple bank PIN is 1234"})
    # Another agent, whose view reads and writes only the "notes" namespace of the fact category.
    notes_only = full_view("notes-agent", read_rules=[rule("fact", "lg/notes.*", "lg/notes/*")],
                           write_rules=[rule("fact", "lg/notes/*")])
    with MemorydClient(server.target, token=connect("notes-agent", view=notes_only).token) as other:
        theirs = MemorydStore(other, subject="alice")
        assert theirs.get(("notes",), "n1").value == {"text": "Alice's shopping list: apples"}  # type: ignore[union-attr]
        # Asking for a key the view does not read is refused, whether or not it exists.
        for key in ["s1", "never-written"]:
            with pytest.raises(PermissionDenied) as refused:
                theirs.get(("secrets",), key)
            assert refused.value.reason == "VIEW_DENIED"
        assert keys_of(theirs.search(())) == [(("notes",), "n1")]
        assert keys_of(theirs.search((), query="apple bank PIN", limit=10)) == [(("notes",), "n1")]
        assert theirs.list_namespaces() == [("notes",)]
        with pytest.raises(PermissionDenied):
            theirs.put(("secrets",), "s2", {"text": "overwrite"})
    assert store.get(("secrets",), "s1").value == {"text": "Alice's apple bank PIN is 1234"}  # type: ignore[union-attr]


def test_a_token_bound_to_one_subject_reaches_no_other(server: ServerProcess, connect: Connect,
                                                       client: MemorydClient):
    MemorydStore(client, subject_at=1).put(("memories", "bob"), "m", {"v": "bob's"})
    with MemorydClient(server.target, token=connect("lg-agent", subject="alice").token) as bound:
        store = MemorydStore(bound, subject_at=1)
        store.put(("memories", "alice"), "m", {"v": "alice's"})
        assert store.get(("memories", "alice"), "m").value == {"v": "alice's"}  # type: ignore[union-attr]
        with pytest.raises(PermissionDenied):
            store.get(("memories", "bob"), "m")
        with pytest.raises(PermissionDenied):
            store.search(("memories", "bob"))


# --- a real graph ----------------------------------------------------------------------

class State(TypedDict):
    user: str
    said: str
    recalled: list[str]


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    store.put(("memories", state["user"]), f"m{len(state['said'])}", {"text": state["said"]})
    return {}


def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    found = store.search(("memories", state["user"]), query="what food does the user like?", limit=2)
    return {"recalled": [item.value["text"] for item in found]}


async def arecall(state: State, *, store: BaseStore) -> dict[str, Any]:
    found = await store.asearch(("memories", state["user"]), query="what food does the user like?", limit=2)
    return {"recalled": [item.value["text"] for item in found]}


def graph(store: BaseStore, recall_node: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall_node)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_state_graph_writes_in_one_node_and_searches_in_the_next(client: MemorydClient):
    store = MemorydStore(client, subject_at=1)
    store.put(("memories", "alice"), "m0", {"text": "Alice is training for a marathon"})
    out = graph(store, recall).invoke({"user": "alice", "said": "I love Neapolitan pizza", "recalled": []})
    assert out["recalled"][0] == "I love Neapolitan pizza"
    assert store.get(("memories", "alice"), "m23").value == {"text": "I love Neapolitan pizza"}  # type: ignore[union-attr]
    assert graph(store, recall).invoke({"user": "bob", "said": "x", "recalled": []})["recalled"] == ["x"]


async def test_the_same_graph_runs_async(client: MemorydClient):
    store = MemorydStore(client, subject_at=1)
    out = await graph(store, arecall).ainvoke({"user": "carol", "said": "Sushi is my favourite food",
                                               "recalled": []})
    assert out["recalled"] == ["Sushi is my favourite food"]


def test_what_the_store_writes_other_memoryd_clients_read(client: MemorydClient):
    MemorydStore(client, subject="alice", category="preference").put(("prefs",), "theme", {"theme": "dark"})
    [memory] = client.recall(subject="alice", keys=["lg/prefs/theme"]).memories
    assert memory.memory.category == pb.CATEGORY_PREFERENCE
    assert memory.memory.text == '{"theme": "dark"}'
    assert memory.memory.data["langgraph"]["value"] == '{"theme":"dark"}'


def test_constructor_errors_say_what_is_wrong(client: MemorydClient):
    with pytest.raises(ValueError, match="exactly one"):
        MemorydStore(client)
    with pytest.raises(ValueError, match="exactly one"):
        MemorydStore(client, subject="a", subject_at=1)
    with pytest.raises(ValueError, match="category"):
        MemorydStore(client, subject="a", category="event")


def test_the_docs_example_runs(server: ServerProcess, connect: Connect, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]):
    page = ROOT / "docs" / "langgraph.md"
    section = page.read_text().split("\n## Example\n", 1)[1].split("\n## ", 1)[0]
    [code, printed] = re.findall(r"```(?:python|text)\n(.*?)```", section, flags=re.S)
    token_file = tmp_path / "demo-agent.token"
    token_file.write_text(connect("demo-agent").token)
    code = code.replace("127.0.0.1:50051", server.target).replace(".memoryd/tokens/demo-agent.token", str(token_file))
    exec(compile(code, str(page), "exec"), {"__name__": "docs"})
    assert capsys.readouterr().out == printed

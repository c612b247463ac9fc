"""@memoryd/client/langgraph, the TypeScript MemorydStore, against the suite's real server, run by
node: its operations, a view that hides a namespace, a real StateGraph compiled with it, and the
cross-language promise: what Python's MemorydStore puts, the TypeScript store reads, and back, with
byte-equal memory keys, tags, text and data."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.client import MemorydClient
from memoryd.client.langgraph import MemorydStore
from memoryd.client.langgraph._mapping import memory_key, namespace_tags

from ..support import Agent, ServerProcess, full_view, rule
from .test_typescript import PACKAGE, _npm

Connect = Callable[..., Agent]

# One store per run: it calls the store's methods in order and prints each answer (or error) as
# JSON. It imports the package by its name, through a node_modules that links the checkout's.
DRIVER = """
import { readFileSync } from "node:fs";
import { createMemorydClient } from "@memoryd/client";
import { MemorydStore } from "@memoryd/client/langgraph";

const { target, token, options, calls } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const client = createMemorydClient({ target, token });
const store = new MemorydStore(client, options);
const answers = [];
for (const [method, ...args] of calls) {
  try {
    answers.push({ ok: (await store[method](...args)) ?? null });
  } catch (e) {
    answers.push({ error: { name: e.constructor.name, message: e.message, code: e.codeName, reason: e.reason } });
  }
}
client.close();
console.log(JSON.stringify(answers));
"""


@pytest.fixture(scope="module")
def node_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose node_modules holds the built package as @memoryd/client beside the package's
    own dependencies (LangGraph.js among its devDependencies)."""
    lock, installed = PACKAGE / "package-lock.json", PACKAGE / "node_modules" / ".package-lock.json"
    if not installed.exists() or lock.stat().st_mtime > installed.stat().st_mtime:
        run = _npm("ci", "--ignore-scripts")
        assert run.returncode == 0, run.stdout + run.stderr
    run = _npm("run", "build")
    assert run.returncode == 0, f"tsc failed:\n{run.stdout}{run.stderr}"
    project = tmp_path_factory.mktemp("lgjs")
    modules = project / "node_modules"
    modules.mkdir()
    for entry in (PACKAGE / "node_modules").iterdir():
        if not entry.name.startswith("."):
            (modules / entry.name).symlink_to(entry)
    (modules / "@memoryd").mkdir()
    (modules / "@memoryd" / "client").symlink_to(PACKAGE)
    (project / "package.json").write_text(json.dumps({"name": "lg-test", "private": True, "type": "module"}))
    (project / "driver.mjs").write_text(DRIVER)
    return project


def node(project: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("node") or "node", script, *args], cwd=project, capture_output=True,
                          text=True, timeout=120)


class TsStore:
    """The TypeScript store of one agent, driven from here: each ``run`` is one node process."""

    def __init__(self, project: Path, target: str, token: str, **options: Any) -> None:
        self.project, self.target, self.token, self.options = project, target, token, options

    def run(self, *calls: list[Any]) -> list[Any]:
        spec = self.project / "calls.json"
        spec.write_text(json.dumps({"target": self.target, "token": self.token, "options": self.options,
                                    "calls": calls}))
        done = node(self.project, "driver.mjs", str(spec))
        assert done.returncode == 0, done.stdout + done.stderr
        return [a.get("ok", a) for a in json.loads(done.stdout)]

    def one(self, *call: Any) -> Any:
        [answer] = self.run(list(call))
        return answer


def ns_keys(items: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], str]]:
    return [(tuple(i["namespace"]), i["key"]) for i in items]


@pytest.fixture
def token(connect: Connect) -> str:
    return connect("lg-ts-agent").token


@pytest.fixture
def ts(node_project: Path, server: ServerProcess, token: str) -> TsStore:
    return TsStore(node_project, server.target, token, subject="alice")


@pytest.fixture
def client(server: ServerProcess, token: str) -> Iterator[MemorydClient]:
    with MemorydClient(server.target, token=token) as c:
        yield c


# --- the store's operations ----------------------------------------------------------------

def test_put_get_replace_and_delete(ts: TsStore):
    value = {"text": "Alice likes tea", "n": 1, "x": 1.5, "ok": True, "none": None,
             "nested": {"list": [1, "two", [3.5, False]], "empty": {}}, "uni": "Lyon — 里昂 ✓ 🍵"}
    put, got, again, replaced, gone, missing, deeper = ts.run(
        ["put", ["users", "alice"], "profile", value], ["get", ["users", "alice"], "profile"],
        ["put", ["users", "alice"], "profile", {"text": "Alice likes coffee now"}],
        ["get", ["users", "alice"], "profile"],
        ["delete", ["users", "alice"], "profile"], ["get", ["users", "alice"], "profile"],
        ["get", ["users", "alice", "profile"], "profile"])
    assert put is None and got["value"] == value
    assert (got["namespace"], got["key"]) == (["users", "alice"], "profile")
    assert replaced["value"] == {"text": "Alice likes coffee now"} and replaced["createdAt"] == got["createdAt"]
    assert replaced["updatedAt"] > got["updatedAt"]
    assert again is None and gone is None and missing is None and deeper is None


def test_one_batch_reads_before_it_writes(ts: TsStore):
    """As in InMemoryStore (and the Python store): a batch's reads see the state before its writes,
    and the last put of a key wins."""
    ops = [{"namespace": ["b"], "key": "k", "value": {"v": 2}}, {"namespace": ["b"], "key": "k"},
           {"namespacePrefix": ["b"], "limit": 10}, {"namespace": ["b"], "key": "k", "value": {"v": 3}},
           {"namespace": ["b"], "key": "new", "value": {"v": 4}}, {"namespace": ["b"], "key": "new"}]
    _, batch, after = ts.run(["put", ["b"], "k", {"v": 1}], ["batch", ops], ["search", ["b"]])
    assert batch[0] is None and batch[1]["value"] == {"v": 1} and [i["value"] for i in batch[2]] == [{"v": 1}]
    assert batch[5] is None
    assert sorted((i["key"], i["value"]["v"]) for i in after) == [("k", 3), ("new", 4)]


def test_search_with_a_query_and_a_filter(ts: TsStore):
    ts.run(["put", ["docs"], "pasta", {"text": "Carbonara: pasta, eggs, pecorino, guanciale", "kind": "recipe", "min": 20}],
           ["put", ["docs"], "bike", {"text": "How to fix a flat bicycle tyre", "kind": "howto", "min": 15}],
           ["put", ["docs"], "soup", {"text": "A quick tomato soup", "kind": "recipe", "min": 35}],
           ["put", ["other"], "pasta2", {"text": "Pasta with pesto", "kind": "recipe", "min": 10}])
    ranked, filtered, operators, by_prefix, page = ts.run(
        ["search", ["docs"], {"query": "an Italian pasta dish with eggs", "limit": 3}],
        ["search", ["docs"], {"query": "something to cook", "filter": {"kind": "recipe"}}],
        ["search", ["docs"], {"filter": {"min": {"$gte": 20}, "kind": {"$ne": "howto"}}}],
        ["search", []], ["search", ["docs"], {"limit": 1, "offset": 1}])
    assert ranked[0]["key"] == "pasta" and ranked[0]["score"] > 0
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)
    assert sorted(r["key"] for r in filtered) == ["pasta", "soup"]
    assert sorted(r["key"] for r in operators) == ["pasta", "soup"] and "score" not in operators[0]
    assert sorted(ns_keys(by_prefix)) == [(("docs",), "bike"), (("docs",), "pasta"), (("docs",), "soup"),
                                          (("other",), "pasta2")]
    assert len(page) == 1 and page[0]["key"] in {"pasta", "bike", "soup"}


FILTERS = [{"color": "red"}, {"n": 1}, {"n": True}, {"n": {"$gt": 1}}, {"n": {"$gte": 1, "$lt": 3}}, {"n": {"$ne": 2}},
           {"name": {"$lt": "b"}}, {"tags": ["x", "y"]}, {"meta": {"size": "L"}}, {"meta": {"$eq": {"size": "L"}}},
           {"missing": None}, {"n": {"$gt": "a"}}]


def test_filters_answer_as_the_python_store(ts: TsStore, client: MemorydClient):
    python = MemorydStore(client, subject="alice")
    for i, value in enumerate([{"color": "red", "n": 1, "name": "apple", "tags": ["x", "y"], "meta": {"size": "L"}},
                               {"color": "blue", "n": 2, "name": "banana", "tags": ["x"], "meta": {"size": "S"}},
                               {"color": "red", "n": 3.5, "name": "Cherry", "meta": {"size": "L", "w": 1}},
                               {"color": "red", "n": True, "name": "áb"}]):
        python.put(("f",), f"i{i}", value)
    answers = ts.run(*[["search", ["f"], {"filter": f, "limit": 100}] for f in FILTERS],
                     ["search", ["f"], {"filter": {"n": {"$in": [1]}}}])
    for wanted, answer in zip(FILTERS, answers):
        assert [i["key"] for i in answer] == [i.key for i in python.search(("f",), filter=wanted, limit=100)], wanted
    assert [len(a) for a in answers[:4]] == [3, 2, 2, 2]
    assert answers[-1]["error"]["name"] == "RangeError" and "$in" in answers[-1]["error"]["message"]


def test_list_namespaces_answers_as_the_python_store(ts: TsStore, client: MemorydClient):
    namespaces = [["a", "b", "c"], ["a", "b", "d", "e"], ["a", "b", "d", "i"], ["a", "b", "f"], ["a", "c", "f"],
                  ["b", "a", "f"], ["users", "123"], ["users", "456", "settings"], ["admin", "users", "789"]]
    ts.run(*[["put", n, "k", {"v": i}] for i, n in enumerate(namespaces)])
    asks = [{}, {"prefix": ["a", "b"]}, {"suffix": ["f"]}, {"prefix": ["a", "*"], "suffix": ["f"]}, {"maxDepth": 2},
            {"prefix": ["a"], "maxDepth": 2, "limit": 2, "offset": 1}]
    answers = ts.run(*[["listNamespaces", ask] for ask in asks])
    python = MemorydStore(client, subject="alice")
    for ask, answer in zip(asks, answers):
        expected = python.list_namespaces(prefix=ask.get("prefix"), suffix=ask.get("suffix"),
                                          max_depth=ask.get("maxDepth"), limit=ask.get("limit", 100),
                                          offset=ask.get("offset", 0))
        assert [tuple(n) for n in answer] == expected, ask
    assert answers[1] == [["a", "b", "c"], ["a", "b", "d", "e"], ["a", "b", "d", "i"], ["a", "b", "f"]]


def test_a_view_hides_a_namespace_from_the_typescript_store(ts: TsStore, server: ServerProcess, connect: Connect):
    ts.run(["put", ["notes"], "n1", {"text": "Alice's shopping list: apples"}],
           ["put", ["secrets"], "s1", {"text": "Alice's apple bank PIN is 1234"}])
    notes_only = full_view("notes-agent", read_rules=[rule("fact", "lg/notes.*", "lg/notes/*")],
                           write_rules=[rule("fact", "lg/notes/*")])
    theirs = TsStore(ts.project, server.target, connect("notes-agent", view=notes_only).token, subject="alice")
    note, secret, unknown, listed, searched, namespaces, write = theirs.run(
        ["get", ["notes"], "n1"], ["get", ["secrets"], "s1"], ["get", ["secrets"], "never-written"],
        ["search", []], ["search", [], {"query": "apple bank PIN", "limit": 10}], ["listNamespaces"],
        ["put", ["secrets"], "s2", {"text": "overwrite"}])
    assert note["value"] == {"text": "Alice's shopping list: apples"}
    # Asking for a key the view does not read is refused, whether or not it exists.
    for refused in (secret, unknown, write):
        assert refused["error"]["name"] == "MemorydError" and refused["error"]["code"] == "PERMISSION_DENIED"
    assert secret["error"]["reason"] == unknown["error"]["reason"] == "VIEW_DENIED"
    assert ns_keys(listed) == ns_keys(searched) == [(("notes",), "n1")]
    assert namespaces == [["notes"]]
    assert "1234" not in json.dumps([listed, searched, namespaces])
    assert ts.one("get", ["secrets"], "s1")["value"] == {"text": "Alice's apple bank PIN is 1234"}


def test_bad_input_fails_with_a_reason(ts: TsStore, node_project: Path, server: ServerProcess, token: str):
    big, dotted, by_user = ts.run(["put", ["docs"], "big", {"text": "x" * 20000}], ["put", ["a.b"], "k", {"v": 1}],
                                  ["search", ["memories"]])
    assert big["error"]["code"] == "INVALID_ARGUMENT" and big["error"]["reason"]
    assert dotted["error"]["name"] == "InvalidNamespaceError"
    assert by_user is not None and by_user == []  # subject= names the subject: any prefix is fine
    [unnamed] = TsStore(node_project, server.target, token, subjectAt=1).run(["search", ["memories"]])
    assert unnamed["error"]["name"] == "RangeError" and "does not name it" in unnamed["error"]["message"]


def test_the_default_ttl_ends_an_item_for_both_languages(ts: TsStore, node_project: Path, server: ServerProcess,
                                                          token: str, client: MemorydClient):
    short = TsStore(node_project, server.target, token, subject="alice", defaultTtl=0.05)  # three seconds
    put, read = short.run(["put", ["docs"], "short", {"v": 1}], ["get", ["docs"], "short"])
    assert put is None and read["value"] == {"v": 1}  # a read does not extend a memoryd TTL
    python = MemorydStore(client, subject="alice")
    python.put(("docs",), "python-short", {"v": 1}, ttl=0.05)
    lapsed = time.monotonic() + 3.5  # both TTLs have run out by then (this put was the later)
    ts.one("put", ["docs"], "kept", {"v": 2})
    entries = {m.key: m.data["langgraph"] for m in client.iter_memories(subject="alice", page_size=10)}
    assert entries["lg/docs/short"]["ttl_minutes"] == entries["lg/docs/python-short"]["ttl_minutes"] == 0.05
    assert "ttl_minutes" not in entries["lg/docs/kept"]
    time.sleep(max(0.0, lapsed - time.monotonic()))
    assert ns_keys(ts.one("search", ["docs"])) == [(("docs",), "kept")]
    assert python.get(("docs",), "short") is None and ts.one("get", ["docs"], "python-short") is None


# --- one memory for both languages ---------------------------------------------------------

ITEMS = [
    (("memories", "alice"), "diet", {"text": "Alice is vegetarian", "since": 2019, "score": 0.25, "tags": ["a", "b"]}),
    (("numbers",), "floats", {"small": 1e-07, "sum": 0.1 + 0.2, "neg": -2.5e-05, "huge": 1.5e300, "x": 123456.789,
                              "int": -(2**53) + 1, "quote": "a \"b\" \\ \u2028 \x7f \x1f"}),
    (("my notes", "été/2024", "里昂"), "key with spaces:and/colons", {"text": "Lyon — 里昂 ✓ 🍵", "z": {"b": 1, "a": [True]}}),
    (("n",) * 3, "k" * 200, {"long": "a key over 128 bytes is hashed"}),
    (("x" * 70, "tab\there"), "t", {"text": "a tag over 64 bytes, and a control character, are hashed"}),
]


# The value's paths a put indexes: the memory's text is made of what they pick, in both languages.
INDEXED = (("docs",), "guide", {"title": "Pasta", "steps": [{"do": "boil"}, {"do": "drain"}], "n": 2.5, "ok": True,
                                "meta": {"b": 1, "a": "x"}, "float": 2.0**60},
           ["title", "steps[*].do", "{n,ok}", "meta", "steps[-1].do", "missing"])
UNINDEXED = (("docs",), "quiet", {"text": "kept out of query search"}, False)


NAMING_CASES = [
    (["a"], ""), (["users", "u-42", "prefs"], "theme"), (["a/b"], "c"), (["a"], "b/c"), (["my notes"], "x:y"),
    (["\x7f\u2028", "\u00e9t\u00e9"], "\U0001f375 tea"), (["q\"uote\\back"], "\n\t\r\b\f\x01"),
    (["\ud7ff\ue000\U00010000"], "k"), (["l" * 60], "k" * 70), (["\u00e9" * 40], "\u00e9" * 80),
    ([str(i) for i in range(31)], "deep"),
]


def test_keys_and_tags_are_python_s_for_every_label(node_project: Path):
    """memoryKey and namespaceTags, exported by the TypeScript package, name each item as Python's
    mapping does: escapes, hashed long keys (Python's json.dumps with \\u escapes) and hashed tags."""
    (node_project / "naming.mjs").write_text("""
import { memoryKey, namespaceTags } from "@memoryd/client/langgraph";
const cases = JSON.parse(process.argv[2]);
console.log(JSON.stringify(cases.map(([namespace, key]) => [memoryKey(namespace, key), namespaceTags(namespace)])));
""")
    done = node(node_project, "naming.mjs", json.dumps(NAMING_CASES))
    assert done.returncode == 0, done.stdout + done.stderr
    expected = [[memory_key(namespace, key), namespace_tags(namespace)] for namespace, key in NAMING_CASES]
    assert json.loads(done.stdout) == expected
    assert sum(k.startswith("lg/:h") for k, _ in expected) >= 2 and any("lg#" in t for _, tags in expected for t in tags)


def raw(client: MemorydClient, subject: str) -> dict[str, tuple[Any, ...]]:
    """What memoryd holds for each key: tags, text, category and data, as any client reads them."""
    return {m.key: (list(m.tags), m.text, m.category, m.data["langgraph"]["value"],
                    list(m.data["langgraph"]["namespace"]), m.data["langgraph"]["key"])
            for m in client.iter_memories(subject=subject, page_size=100)}


def test_python_and_typescript_write_the_same_bytes(ts: TsStore, node_project: Path, server: ServerProcess,
                                                     token: str, client: MemorydClient):
    python = MemorydStore(client, subject="py")
    for namespace, key, value in ITEMS:
        python.put(namespace, key, value)
    for namespace, key, value, index in (INDEXED, UNINDEXED):
        python.put(namespace, key, value, index=index)
    TsStore(node_project, server.target, token, subject="ts").run(
        *[["put", list(namespace), key, value] for namespace, key, value in ITEMS],
        *[["put", list(namespace), key, value, index] for namespace, key, value, index in (INDEXED, UNINDEXED)])
    written_by_python, written_by_ts = raw(client, "py"), raw(client, "ts")
    assert written_by_ts == written_by_python
    assert sorted(written_by_ts) == sorted(memory_key(n, k) for n, k, *_ in [*ITEMS, INDEXED, UNINDEXED])
    assert written_by_ts["lg/docs/guide"][1] == 'Pasta\nboil\ndrain\n2.5\nTrue\n{"a": "x", "b": 1}\ndrain'
    assert written_by_ts["lg/docs/quiet"][1] == "quiet"
    for namespace, key, _ in ITEMS:
        assert sorted(written_by_ts[memory_key(namespace, key)][0]) == sorted(namespace_tags(namespace))
    assert any(k.startswith("lg/:h") for k in written_by_ts) and any(
        t.startswith("lg#") for tags, *_ in written_by_ts.values() for t in tags)


def test_what_python_puts_typescript_reads_and_back(ts: TsStore, client: MemorydClient):
    python = MemorydStore(client, subject="alice")
    for namespace, key, value in ITEMS:
        python.put(namespace, key, value)
    got = ts.run(*[["get", list(namespace), key] for namespace, key, _ in ITEMS],
                 ["search", ["memories", "alice"], {"query": "what does alice eat?"}],
                 ["listNamespaces", {"maxDepth": 1}])
    for (namespace, key, value), item in zip(ITEMS, got):
        assert (tuple(item["namespace"]), item["key"], item["value"]) == (namespace, key, value)
    *_, found, namespaces = got
    assert ns_keys(found) == [(("memories", "alice"), "diet")]
    assert namespaces == [["memories"], ["my notes"], ["n"], ["numbers"], ["x" * 70]]

    ts.run(["put", ["memories", "alice"], "trip", {"text": "Alice flies to Lisbon in May", "seats": [12, 13]}],
           ["delete", ["memories", "alice"], "diet"])
    trip = python.get(("memories", "alice"), "trip")
    assert trip is not None and trip.value == {"text": "Alice flies to Lisbon in May", "seats": [12, 13]}
    assert python.get(("memories", "alice"), "diet") is None
    [hit] = python.search(("memories", "alice"), query="where is alice travelling?", limit=1)
    assert hit.key == "trip" and hit.score is not None


def test_a_state_graph_compiled_with_the_store(node_project: Path, server: ServerProcess, token: str,
                                               client: MemorydClient):
    """LangGraph.js's own StateGraph: one node writes through the store, the next searches it."""
    (node_project / "graph.mjs").write_text("""
import { Annotation, StateGraph, START, END } from "@langchain/langgraph";
import { createMemorydClient } from "@memoryd/client";
import { MemorydStore } from "@memoryd/client/langgraph";

const [target, token] = process.argv.slice(2);
const client = createMemorydClient({ target, token });
const State = Annotation.Root({ user: Annotation(), said: Annotation(), recalled: Annotation() });
const graph = new StateGraph(State)
  .addNode("remember", async (state, config) => {
    await config.store.put(["memories", state.user], "latest", { text: state.said });
    return {};
  })
  .addNode("recall", async (state, config) => {
    const found = await config.store.search(["memories", state.user], { query: "what food does the user like?", limit: 1 });
    return { recalled: found.map((item) => item.value.text) };
  })
  .addEdge(START, "remember").addEdge("remember", "recall").addEdge("recall", END)
  .compile({ store: new MemorydStore(client, { subjectAt: 1 }) });
const out = await graph.invoke({ user: "dana", said: "I love Neapolitan pizza", recalled: [] });
console.log(JSON.stringify(out.recalled));
client.close();
""")
    done = node(node_project, "graph.mjs", server.target, token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == ["I love Neapolitan pizza"]
    item = MemorydStore(client, subject_at=1).get(("memories", "dana"), "latest")
    assert item is not None and item.value == {"text": "I love Neapolitan pizza"}


def test_the_docs_typescript_example_type_checks_and_runs(node_project: Path, server: ServerProcess,
                                                          connect: Connect, tmp_path: Path):
    """docs/langgraph.md's TypeScript block, as written (only the token file and the address point
    here): strict tsc against the shipped declarations, then node."""
    page = (PACKAGE.parents[1] / "docs" / "langgraph.md").read_text()
    section = page.split("\n## TypeScript\n", 1)[1]
    example = section.split("```typescript\n", 1)[1].split("```", 1)[0]
    printed = section.split("```text\n", 1)[1].split("```", 1)[0]
    token_file = tmp_path / "demo-agent.token"
    token_file.write_text(connect("demo-agent").token + "\n")
    (node_project / "example.ts").write_text(example.replace(".memoryd/tokens/demo-agent.token", str(token_file))
                                             .replace("127.0.0.1:50051", server.target))
    (node_project / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": True,
        "skipLibCheck": True, "types": ["node"], "outDir": "out"}, "include": ["example.ts"]}))
    tsc = node(node_project, str(PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"), "-p", ".")
    assert tsc.returncode == 0, f"the docs' TypeScript example does not type-check:\n{tsc.stdout}{tsc.stderr}"
    done = node(node_project, "out/example.js")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == printed

"""Non-interference, as a property: two worlds that differ only in what an agent cannot read
give that agent identical answers to every call.

Each example builds two tenants on the suite's server. Both get the same memories the agent
may read (written in the same order, interleaved, so their timestamps differ by
milliseconds); the second also gets memories the agent cannot read, written between them
(events and decisions are written as a conversation's turns, whose neighbours a Recall
ranks, and memories carry ``entity:`` tags that the queries name), including keys that a
Milvus ``like`` would over-match (``billing-x`` against the glob ``billing_*``), repeats of
texts the agent may write blind, and values under keys it may write but not read — and,
for the memories it does read, other values of the fields its view hides (importance and
pinned). A view that hides every time, version, status and provenance field ("no-times")
also meets a second world whose memories it reads were written in the opposite order, then
changed again in fields it hides only (a new version and update time each), and which holds
a forgotten memory inside its rules: memories it ranks equal (constraints under one key,
keys looked up together) must come in the same order, and erase receipts count the same.
Every seeded memory joins one session, which the seeder ends (its summary a context memory the
agent never reads), so ResumeSession and EndSession meet a snapshot built from both.
Then the agent makes the same random calls of every MemoryService RPC in both worlds —
filters and erase selectors on fields it may not see included, and Recalls from a
conversation (a context) as well as from a query. The answers must be
equal once the worlds' own ids are replaced by their order of appearance and timestamps
(which differ by the milliseconds between the two writes) are left out: every other field,
rank, score part, reason and count must match.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, timestamp_pb2
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from memoryd.server.usecases._archive import open_archive
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, draft, failure, full_view, rule, unique

SUBJECT = "alice"
SESSION = "chat"  # every seeded memory joins it; the seeder ends it (its summary: a context the agent never reads)
VISIBLE_TEXTS = ["Pays by bank transfer", "Lives in Lyon near the river", "Prefers tea in the morning",
                 "Complained about a late parcel", "Asked for a refund of order 1042"]
HIDDEN_TEXTS = ["Has type 2 diabetes", "Secret offshore billing account", "Pays by bank transfer",
                "Complained about a late parcel", "Internal fraud flag raised"]
QUERIES = ["bank transfer", "parcel", "refund order", "tea", "Lyon river", "offshore billing", "diabetes",
           "What did Lyon pay by bank transfer?", "Tea in Lyon"]
# Entity tags the queries name, by text (a text not listed has none). The agent's memories may
# carry some; those it cannot read carry ones it never sees on its own, which a query names
# beside other words: if the lookup saw them, the query would be embedded without that word.
# (A tag per text, not a drawn one: the examples stay those the property was checked with.)
VISIBLE_ENTITIES = {"Prefers tea in the morning": "entity:tea", "Complained about a late parcel": "entity:parcel"}
HIDDEN_ENTITIES = {"Has type 2 diabetes": "entity:lyon", "Secret offshore billing account": "entity:billing",
                   "Pays by bank transfer": "entity:bank", "Complained about a late parcel": "entity:lyon",
                   "Internal fraud flag raised": "entity:bank"}
# Left out of the comparison: timestamps (the worlds are written milliseconds apart), and
# access_count, which the agent's own recalls raise through a recorder that flushes once a
# second, so when it shows a recall depends on timing alone.
UNCOMPARED = {"created_at", "updated_at", "last_access_at", "expires_at", "valid_from", "recorded_at", "written_at",
              "started_at", "finished_at", "access_count"}

# What the agent reads: billing_* and iban facts, every preference and event. It may also write
# `secret_*` facts it cannot read (a write-only key) and constraints it cannot read.
READ = [rule("fact", "billing_*", "iban"), rule("preference"), rule("event"), rule("constraint", "allergy")]
WRITE = [*READ, rule("fact", "secret_*"), rule("constraint"), rule("context", "session.summary")]
FIELD_SETS = {
    "all": None,
    "no-importance-pinned": ["id", "key", "text", "category", "tags", "version", "status", "updated_at",
                             "created_at", "provenance", "data", "confidence", "stability", "trust", "pending",
                             "valid_from", "valid_until", "expires_at", "scope", "subject", "session_id"],
    "narrow": ["id", "key", "text", "category"],
    "no-times": ["id", "key", "text", "category", "tags", "data", "confidence", "stability", "valid_from",
                 "valid_until", "scope", "subject", "session_id"],
}
# Views that hide every field a change of a hidden field moves (version, update time, provenance)
# and the status: their second world is written in another order, changed again in hidden
# fields, and holds a forgotten memory (docs/security.md's remedy for "versions made by hidden fields").
REORDERED = {"no-times"}
FORGOTTEN_TEXT = "Cancelled the gym membership"
SWAPPED = {0.1: 0.9, 0.5: 0.1, 0.9: 0.5}  # another importance, one to one
# Items the agent reads: (category, key).
VISIBLE_SLOTS = [("fact", "billing_address"), ("fact", "iban"), ("preference", "drink"), ("event", ""),
                 ("event", ""), ("constraint", "allergy"), ("constraint", "allergy")]
# Items it cannot read: a key the Milvus glob over-matches, a fact key outside its rules, a
# write-only key, a constraint, a decision.
HIDDEN_SLOTS = [("fact", "billing-offshore"), ("fact", "diagnosis"), ("fact", "secret_pin"), ("constraint", "diet"),
                ("decision", "")]


@dataclass(frozen=True)
class Item:
    category: str
    key: str
    text: str
    importance: float
    pinned: bool
    entity: str = ""

    def draft(self, turn: str) -> pb.MemoryDraft:
        """Events and decisions are a conversation's turns (``turn``): a free-text Recall ranks the
        turns written next to its best match, among those the agent may read."""
        episodic = self.category in ("event", "decision")
        return draft(self.category, self.text, key=self.key, importance=self.importance, pinned=self.pinned,
                     source_turn_id=turn if episodic else "", tags=[self.entity] if self.entity else [])


def items(slots: list[tuple[str, str]], texts: list[str], entities: dict[str, str]) -> st.SearchStrategy[list[Item]]:
    one = st.builds(lambda slot, text, imp, pin: Item(slot[0], slot[1], text, imp, pin, entities.get(text, "")),
                    st.sampled_from(slots), st.sampled_from(texts), st.sampled_from([0.1, 0.5, 0.9]), st.booleans())
    return st.lists(one, min_size=0, max_size=4)


calls = st.lists(st.one_of(
    # With the default minimum relevance, or none (every candidate, with its scores).
    st.tuples(st.just("recall_query"), st.sampled_from(QUERIES), st.integers(1, 4), st.sampled_from([None, 0.0])),
    st.tuples(st.just("recall_keys"), st.sampled_from(["iban", "billing_address", "drink", "allergy"])),
    # Every key at once: equal scores wherever the view hides what would tell them apart.
    st.tuples(st.just("recall_keys_all")),
    st.tuples(st.just("list")),
    # Filters on fields a view may hide: statuses, the organisation, a key.
    st.tuples(st.just("list_filtered"), st.sampled_from(["statuses", "include_org", "keys"])),
    # Erase selectors on fields a view may hide (a purge: its receipt counts what went).
    st.tuples(st.just("erase_by"), st.sampled_from(["key", "category", "source_turn_id"])),
    st.tuples(st.just("history"), st.integers(0, 4)),
    st.tuples(st.just("write"), st.sampled_from([("fact", "secret_pin"), ("fact", "iban"), ("event", ""),
                                                ("constraint", "diet"), ("preference", "drink")]),
              st.sampled_from(VISIBLE_TEXTS + HIDDEN_TEXTS[:2])),
    st.tuples(st.just("erase"), st.integers(0, 4)),
    st.tuples(st.just("export")),
    st.tuples(st.just("import")),
    st.tuples(st.just("resolve"), st.integers(0, 4)),
    st.tuples(st.just("job")),
    # The session every seeded memory was written in, ended by the seeder: resumed, and ended
    # again by the agent (its summary, which it writes blind, made of what it reads).
    st.tuples(st.just("resume"), st.sampled_from(["", SESSION])),
    st.tuples(st.just("end_session")),
    # A conversation instead of a query (latest turn last, the user's): its turns name the
    # hidden memories' words and entities as the queries do.
    st.tuples(st.just("recall_context"), st.lists(st.sampled_from(QUERIES), min_size=1, max_size=3).map(tuple),
              st.sampled_from([None, 0.0])),
), min_size=1, max_size=6)


def conversation(texts: tuple[str, ...]) -> list[pb.Turn]:
    """The turns of a context: the user's and the assistant's in turn, the last one the user's."""
    last = len(texts) - 1
    return [pb.Turn(turn_id=f"c{n}", speaker="user" if (last - n) % 2 == 0 else "assistant", text=text,
                    time=timestamp_pb2.Timestamp(seconds=1_714_550_400 + 60 * n)) for n, text in enumerate(texts)]


class Normaliser:
    """Replaces each world's ids by their order of first appearance; drops timestamps."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.order: list[str] = []

    def see(self, memory_id: str) -> None:
        if memory_id and memory_id not in self.ids:
            self.ids[memory_id] = f"#{len(self.ids)}"
            self.order.append(memory_id)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self(v) for k, v in sorted(value.items()) if k not in UNCOMPARED}
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str):
            self_id = self.ids.get(value)
            return self_id if self_id is not None else value
        if isinstance(value, float):
            return round(value, 4)
        return value


def _ids_in(message: Any) -> list[str]:
    out: list[str] = []

    def walk(value: Any, name: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, name)
        elif isinstance(value, str) and name in ("id", "memoryId", "memory_id") and len(value) == 36:
            out.append(value)

    walk(message)
    return out


def run(agent: Agent, norm: Normaliser, call: tuple[Any, ...]) -> Any:
    """One call in one world, its answer (or its error) normalised."""
    kind = call[0]
    try:
        if kind == "recall_query":
            response = agent.call("Recall", svc.RecallRequest(subject=SUBJECT, query=call[1], top_k=call[2],
                                                              render_block=True, min_relevance=call[3]))
        elif kind == "recall_context":
            response = agent.call("Recall", svc.RecallRequest(subject=SUBJECT, context=conversation(call[1]), top_k=4,
                                                              render_block=True, min_relevance=call[2]))
        elif kind == "recall_keys":
            response = agent.recall_keys(SUBJECT, call[1], render_block=True)
        elif kind == "recall_keys_all":
            response = agent.recall_keys(SUBJECT, "iban", "billing_address", "drink", "allergy", top_k=4,
                                         render_block=True)
        elif kind == "list":
            response = agent.list(SUBJECT, page_size=50)
        elif kind == "list_filtered":
            filters = {"statuses": {"statuses": [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]},
                       "include_org": {"filter": pb.MemoryFilter(include_org=True)},
                       "keys": {"filter": pb.MemoryFilter(keys=["allergy"])}}
            response = agent.list(SUBJECT, page_size=50, **filters[call[1]])
        elif kind == "erase_by":
            selector = {"key": {"key": "allergy"}, "category": {"category": pb.CATEGORY_EVENT},
                        "source_turn_id": {"source_turn_id": "v0"}}
            response = agent.erase(SUBJECT, mode=svc.ERASE_MODE_PURGE, **selector[call[1]])
        elif kind == "history":
            if call[1] >= len(norm.order):
                return "no such id"
            response = agent.history(SUBJECT, norm.order[call[1]])
        elif kind == "write":
            (category, key), text = call[1], call[2]
            response = agent.write(SUBJECT, draft(category, text, key=key),
                                   consistency=svc.CONSISTENCY_WAIT_INDEXED)
        elif kind == "erase":
            if call[1] >= len(norm.order):
                return "no such id"
            response = agent.erase(SUBJECT, ids=svc.MemoryIds(ids=[norm.order[call[1]]]), mode=svc.ERASE_MODE_FORGET)
        elif kind == "export":
            exported = agent.call("ExportMemories", svc.ExportMemoriesRequest(subject=SUBJECT))
            document = open_archive(exported.archive)
            entries = sorted(document["memories"], key=lambda e: json.dumps(e, sort_keys=True, default=str))
            return ("export", exported.memories, norm(entries))
        elif kind == "import":  # the world's own memories, exported and imported into another subject
            archive = agent.call("ExportMemories", svc.ExportMemoriesRequest(subject=SUBJECT)).archive
            response = agent.call("ImportMemories", svc.ImportMemoriesRequest(subject="bob", archive=archive))
        elif kind == "resolve":
            if call[1] >= len(norm.order):
                return "no such id"
            response = agent.call("ResolveConflict", svc.ResolveConflictRequest(
                subject=SUBJECT, memory_id=norm.order[call[1]], resolution=svc.CONFLICT_RESOLUTION_KEEP_CURRENT))
        elif kind == "resume":
            response = agent.call("ResumeSession", svc.ResumeSessionRequest(subject=SUBJECT, session_id=call[1]))
        elif kind == "end_session":
            response = agent.call("EndSession", svc.EndSessionRequest(subject=SUBJECT, session_id=SESSION))
        else:  # a job id the agent never queued
            response = agent.call("GetExtractionJob", svc.GetExtractionJobRequest(
                subject=SUBJECT, job_id="00000000-0000-4000-8000-000000000000"))
    except grpc.RpcError as error:
        f = failure(error)
        return (f.code.name, norm(f.message), f.reason, f.violations)
    document = json_format.MessageToDict(response, preserving_proto_field_name=True)
    document.pop("next_page_token", None)  # bound to the tenant: differs by construction
    if kind.startswith("list") and "updated_at" not in document.get("view", {}).get("visible_fields", []):
        # A view that hides updated_at lists in id order, and ids are random in each world:
        # compare the listing as a set (by content), registering ids in that order.
        document["memories"] = sorted(document.get("memories", []),
                                      key=lambda m: (m.get("category", ""), m.get("key", ""), m.get("text", "")))
    document.get("receipt", {}).pop("erase_id", None)
    for memory_id in _ids_in(document):
        norm.see(memory_id)
    return norm(document)


@pytest.fixture
def worlds(connect):
    def make(fields: str) -> tuple[Agent, Agent, Any]:
        overrides: dict[str, Any] = dict(read_rules=READ, write_rules=WRITE)
        if FIELD_SETS[fields] is not None:
            overrides["visible_fields"] = FIELD_SETS[fields]
        view = full_view("probe", **overrides)
        first, second = unique("world-a"), unique("world-b")
        return (connect("probe", tenant=first, view=view), connect("probe", tenant=second, view=view),
                lambda tenant: connect("seeder", tenant=tenant))
    return make


@pytest.mark.timeout(1200)
@settings(max_examples=int(os.environ.get("MEMORYD_NI_EXAMPLES", "60")), deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fields=st.sampled_from(sorted(FIELD_SETS)), visible=items(VISIBLE_SLOTS, VISIBLE_TEXTS, VISIBLE_ENTITIES),
       hidden=items(HIDDEN_SLOTS, HIDDEN_TEXTS, HIDDEN_ENTITIES), hidden_values=st.lists(st.tuples(
           st.sampled_from([0.1, 0.5, 0.9]), st.booleans()), min_size=4, max_size=4), calls=calls)
# A tag only a hidden memory carries, named by a query with other words beside it: looked up
# past the filter, it would change how the query is embedded.
@example(fields="all", visible=[Item("preference", "drink", "Prefers tea in the morning", 0.5, False)],
         hidden=[Item("fact", "billing-offshore", "Secret offshore billing account", 0.5, False, "entity:lyon")],
         hidden_values=[(0.5, False)] * 4, calls=[("recall_query", "Tea in Lyon", 3, 0.0)])
# The same, from a conversation: its turns name a hidden memory's words and a tag only that
# memory carries, behind views that show every field and only four.
@example(fields="all", visible=[Item("preference", "drink", "Prefers tea in the morning", 0.5, False)],
         hidden=[Item("fact", "billing-offshore", "Secret offshore billing account", 0.5, False, "entity:lyon"),
                 Item("fact", "diagnosis", "Has type 2 diabetes", 0.5, False, "entity:lyon")],
         hidden_values=[(0.5, False)] * 4,
         calls=[("recall_context", ("offshore billing", "diabetes", "Tea in Lyon"), 0.0),
                ("recall_context", ("Tea in Lyon",), None)])
@example(fields="narrow", visible=[Item("event", "", "Complained about a late parcel", 0.5, False, "entity:parcel"),
                                   Item("preference", "drink", "Prefers tea in the morning", 0.9, True)],
         hidden=[Item("decision", "", "Internal fraud flag raised", 0.5, False, "entity:bank"),
                 Item("fact", "secret_pin", "Pays by bank transfer", 0.5, False, "entity:bank")],
         hidden_values=[(0.5, False)] * 4,
         calls=[("recall_context", ("parcel", "What did Lyon pay by bank transfer?"), 0.0)])
# Two constraints under one key, written in the other order in the second world: equal scores,
# told apart by nothing the view shows but their text; and a listing of forgotten memories.
@example(fields="no-times", visible=[Item("constraint", "allergy", "Prefers tea in the morning", 0.5, False),
                                     Item("constraint", "allergy", "Pays by bank transfer", 0.5, False)],
         hidden=[], hidden_values=[(0.5, False)] * 4,
         calls=[("recall_keys", "allergy"), ("recall_keys_all",), ("list_filtered", "statuses")])
# A session's snapshot, resumed and ended again, behind views that show what a snapshot needs
# (and one that does not): the hidden memories of the session, and the summary the seeder made
# of them, change nothing.
@example(fields="all", visible=[Item("preference", "drink", "Prefers tea in the morning", 0.5, False),
                                Item("event", "", "Complained about a late parcel", 0.9, False)],
         hidden=[Item("fact", "diagnosis", "Has type 2 diabetes", 0.5, False),
                 Item("decision", "", "Internal fraud flag raised", 0.5, False)],
         hidden_values=[(0.5, False)] * 4, calls=[("resume", ""), ("end_session",), ("resume", "chat")])
@example(fields="no-importance-pinned",
         visible=[Item("fact", "iban", "Pays by bank transfer", 0.1, True),
                  Item("event", "", "Asked for a refund of order 1042", 0.5, False)],
         hidden=[Item("fact", "billing-offshore", "Secret offshore billing account", 0.9, False)],
         hidden_values=[(0.5, False)] * 4, calls=[("end_session",), ("resume", "")])
@example(fields="narrow", visible=[Item("preference", "drink", "Prefers tea in the morning", 0.5, False)],
         hidden=[Item("fact", "diagnosis", "Has type 2 diabetes", 0.5, False)],
         hidden_values=[(0.5, False)] * 4, calls=[("resume", ""), ("end_session",)])
# The second world of a view that hides status holds a forgotten event: a purge of every event
# must count the same in both.
@example(fields="no-times", visible=[Item("event", "", "Complained about a late parcel", 0.5, False)],
         hidden=[], hidden_values=[(0.5, False)] * 4, calls=[("erase_by", "category")])
def test_what_an_agent_cannot_read_never_changes_its_answers(worlds, fields, visible, hidden, hidden_values, calls):
    probe_a, probe_b, seeder_for = worlds(fields)
    seed_a, seed_b = seeder_for(probe_a_tenant(probe_a)), seeder_for(probe_a_tenant(probe_b))
    masks_importance = FIELD_SETS[fields] is not None
    reordered = fields in REORDERED
    if reordered:  # one value a key: which of two is current would follow the order of writing
        last = {(i.category, i.key): n for n, i in enumerate(visible) if i.key and i.category != "constraint"}
        visible = [i for n, i in enumerate(visible) if not i.key or i.category == "constraint"
                   or last[(i.category, i.key)] == n]
    turns = list(enumerate(visible))
    for n, item in turns:
        seed_a.write(SUBJECT, item.draft(f"v{n}"), consistency=svc.CONSISTENCY_WAIT_INDEXED, session_id=SESSION)

    def other(n: int, item: Item, again: bool = False) -> Item:
        if not masks_importance:
            return item
        # A field the view hides holds something else in the other world. Its entity tags
        # stay the same: with other tags behind a view that hides them, Import answered
        # differently (found with this test; see issue 15's note). The other values are a
        # one-to-one map of this world's, so two writes of a key are equal in one world
        # exactly when they are in the other: a change of a hidden field is a new version
        # (docs/security.md, "What is not"), which a view showing versions sees. Changed again in
        # hidden fields only, the values are drawn freely.
        if again:
            importance, pinned = hidden_values[n % len(hidden_values)]
        else:
            importance, pinned = SWAPPED[item.importance], not item.pinned
        return Item(item.category, item.key, item.text, importance, pinned, item.entity)

    for place, (n, item) in enumerate(turns[::-1] if reordered else turns):
        seed_b.write(SUBJECT, other(n, item).draft(f"v{n}"), consistency=svc.CONSISTENCY_WAIT_INDEXED,
                     session_id=SESSION)
        if place < len(hidden):  # between the turns it may read: neighbours must skip it
            seed_b.write(SUBJECT, hidden[place].draft(f"h{place}"), consistency=svc.CONSISTENCY_WAIT_INDEXED,
                         session_id=SESSION)
    for n, item in enumerate(hidden[len(visible):], start=len(visible)):
        seed_b.write(SUBJECT, item.draft(f"h{n}"), consistency=svc.CONSISTENCY_WAIT_INDEXED, session_id=SESSION)
    if reordered:
        # Changed again in hidden fields only: a new version and update time for each memory
        # (a constraint's repeat changes nothing), and one memory forgotten.
        for n, item in turns:
            seed_b.write(SUBJECT, other(n, item, again=True).draft(f"v{n}"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
        gone = seed_b.write(SUBJECT, draft("event", FORGOTTEN_TEXT), consistency=svc.CONSISTENCY_WAIT_INDEXED)
        seed_b.erase(SUBJECT, mode=svc.ERASE_MODE_FORGET, ids=svc.MemoryIds(ids=[gone.results[0].memory_id]))
    for seeder in (seed_a, seed_b):
        seeder.call("EndSession", svc.EndSessionRequest(subject=SUBJECT, session_id=SESSION))
    norm_a, norm_b = Normaliser(), Normaliser()
    for call in calls:
        answer_a = run(probe_a, norm_a, call)
        answer_b = run(probe_b, norm_b, call)
        assert answer_a == answer_b, f"{call} answered differently in the world with hidden memories"


def probe_a_tenant(agent: Agent) -> str:
    """The tenant an agent's token names (the worlds are two tenants)."""
    import base64
    import json

    body = agent.token.split(".")[1]
    return str(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["tnt"])

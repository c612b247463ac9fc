"""Bad input: every malformed request is refused with INVALID_ARGUMENT, the ErrorInfo reason
INVALID_REQUEST and a BadRequest naming each bad field by its path; a refused call changes
nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from tests.support import Agent, RpcFailure, draft, failure, unique, varint

NAN = float("nan")
UUID = "7a4b8f9e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]

Build = Callable[[str], Message]
# Characters a tag must not carry (class 8): each of them once made a filtered Recall INTERNAL.
LINE_BREAKING = {"nul": "\x00", "soh": "\x01", "tab": "\t", "lf": "\n", "cr": "\r", "esc": "\x1b", "us": "\x1f",
                 "del": "\x7f", "nel": "\x85", "c1-apc": "\x9f", "line-separator": "\u2028",
                 "paragraph-separator": "\u2029"}


def refused(agent: Agent, method: str, request: Message) -> RpcFailure:
    """Send ``request``; it must fail with INVALID_ARGUMENT (checked before reading details)."""
    try:
        agent.call(method, request)
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()  # type: ignore[attr-defined]
        return failure(error)
    raise AssertionError(f"{method} accepted a bad request")


def everything(agent: Agent, subject: str) -> list[pb.Memory]:
    """All of the subject's memories, active and forgotten, and the tenant's org memories."""
    return agent.list_all(subject, filter=pb.MemoryFilter(include_org=True), statuses=ALL_STATUSES)


def fact(text: str = "lives in Lisbon", key: str = "home_city", **kwargs: Any) -> pb.MemoryDraft:
    return draft("fact", text, key=key, **kwargs)


def event(text: str = "went to the dentist", **kwargs: Any) -> pb.MemoryDraft:
    return draft("event", text, **kwargs)


def stamp(seconds: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds)


def nested(depth: int) -> struct_pb2.Struct:
    """A Struct ``depth`` levels deep: {"l1": {"l2": ... {"lN": 1}}}."""
    value: Any = 1
    for level in range(depth, 1, -1):
        value = {f"l{level}": value}
    data = struct_pb2.Struct()
    data.update({"l1": value})
    return data


def nested_lists(depth: int) -> struct_pb2.Struct:
    """A Struct ``depth`` levels deep built from lists: {"a": [[...[1]...]]}."""
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    data = struct_pb2.Struct()
    data.update({"a": value})
    return data


def struct(**values: Any) -> struct_pb2.Struct:
    data = struct_pb2.Struct()
    data.update(values)
    return data


def write(*items: pb.MemoryDraft, subject: str | None = None, **kwargs: Any) -> Build:
    return lambda s: svc.WriteRequest(subject=s if subject is None else subject, items=list(items), **kwargs)


def bad_write(item: pb.MemoryDraft, **kwargs: Any) -> Build:
    """A request whose first item is ``item``, followed by a good one."""
    return write(item, event("a good item after the bad one"), **kwargs)


# --- Write ----------------------------------------------------------------------------------

WRITE_CASES = [
    # subject
    pytest.param(write(fact(), subject=""), {"subject"}, id="subject-empty"),
    pytest.param(write(fact(), subject="al ice"), {"subject"}, id="subject-with-space"),
    pytest.param(write(fact(), subject="alice/bob"), {"subject"}, id="subject-with-slash"),
    pytest.param(write(fact(), subject="alice*"), {"subject"}, id="subject-with-star"),
    pytest.param(write(fact(), subject=".alice"), {"subject"}, id="subject-starting-with-dot"),
    pytest.param(write(fact(), subject="alice\x00"), {"subject"}, id="subject-with-nul"),
    pytest.param(write(fact(), subject="a" * 129), {"subject"}, id="subject-over-128-bytes"),
    pytest.param(write(fact(), subject="é" * 65), {"subject"}, id="subject-over-128-bytes-multibyte"),
    # items
    pytest.param(write(), {"items"}, id="no-items"),
    pytest.param(write(*[event(f"event {i}") for i in range(101)]), {"items"}, id="over-100-items"),
    # category
    pytest.param(bad_write(pb.MemoryDraft(category=99, text="x")), {"items[0].category"}, id="category-unknown-99"),
    pytest.param(bad_write(pb.MemoryDraft(category=pb.CATEGORY_UNSPECIFIED, text="x")), {"items[0].category"},
                 id="category-unspecified"),
    # key
    pytest.param(write(fact(), event(key="dentist")), {"items[1].key"}, id="key-on-event"),
    pytest.param(bad_write(draft("decision", "chose Rust", key="language")), {"items[0].key"}, id="key-on-decision"),
    pytest.param(bad_write(fact(key="k" * 129)), {"items[0].key"}, id="key-over-128-bytes"),
    pytest.param(bad_write(fact(key="home city")), {"items[0].key"}, id="key-with-space"),
    pytest.param(bad_write(fact(key="home_*")), {"items[0].key"}, id="key-with-star"),
    pytest.param(bad_write(fact(key="home_%")), {"items[0].key"}, id="key-with-percent"),
    pytest.param(bad_write(fact(key="-home")), {"items[0].key"}, id="key-starting-with-dash"),
    # text
    pytest.param(bad_write(fact(text="")), {"items[0].text"}, id="text-empty"),
    pytest.param(bad_write(fact(text=" \t\n ")), {"items[0].text"}, id="text-blank"),
    pytest.param(bad_write(fact(text="a" * (8 * 1024 + 1))), {"items[0].text"}, id="text-over-8KiB"),
    pytest.param(bad_write(fact(text="é" * (4 * 1024 + 1))), {"items[0].text"}, id="text-over-8KiB-in-bytes"),
    # importance and confidence
    pytest.param(bad_write(fact(importance=NAN)), {"items[0].importance"}, id="importance-nan"),
    pytest.param(bad_write(fact(importance=-0.01)), {"items[0].importance"}, id="importance-negative"),
    pytest.param(bad_write(fact(importance=1.01)), {"items[0].importance"}, id="importance-above-one"),
    pytest.param(bad_write(fact(importance=float("inf"))), {"items[0].importance"}, id="importance-infinite"),
    pytest.param(bad_write(fact(confidence=NAN)), {"items[0].confidence"}, id="confidence-nan"),
    pytest.param(bad_write(fact(confidence=-1.0)), {"items[0].confidence"}, id="confidence-negative"),
    pytest.param(bad_write(fact(confidence=1.5)), {"items[0].confidence"}, id="confidence-above-one"),
    # tags
    pytest.param(bad_write(fact(tags=[f"t{i}" for i in range(33)])), {"items[0].tags"}, id="tags-over-32"),
    pytest.param(bad_write(fact(tags=[""])), {"items[0].tags[0]"}, id="tag-empty"),
    pytest.param(bad_write(fact(tags=["ok", "t" * 65])), {"items[0].tags[1]"}, id="tag-over-64-bytes"),
    *(pytest.param(bad_write(fact(tags=["ok", f"vip{c}x"])), {"items[0].tags[1]"}, id=f"tag-with-{name}")
      for name, c in LINE_BREAKING.items()),
    # scope and session
    pytest.param(bad_write(fact(scope=pb.SCOPE_SESSION)), {"items[0].session_id"},
                 id="session-scope-without-session-id"),
    pytest.param(bad_write(fact(session_id="s-1")), {"items[0].session_id"}, id="session-id-without-session-scope"),
    pytest.param(bad_write(fact(scope=pb.SCOPE_ORG, session_id="s-1")), {"items[0].session_id"},
                 id="session-id-with-org-scope"),
    pytest.param(bad_write(fact(scope=pb.SCOPE_SESSION, session_id="s 1")), {"items[0].session_id"},
                 id="session-id-with-space"),
    pytest.param(bad_write(fact(scope=99)), {"items[0].scope"}, id="scope-unknown"),
    # other enums and identifiers
    pytest.param(bad_write(fact(stability=99)), {"items[0].stability"}, id="stability-unknown"),
    pytest.param(bad_write(fact(source_kind=99)), {"items[0].source_kind"}, id="source-kind-unknown"),
    pytest.param(bad_write(fact(source_turn_id="t" * 129)), {"items[0].source_turn_id"}, id="source-turn-id-over-128"),
    # validity
    pytest.param(bad_write(fact(valid_from=stamp(1_700_000_000), valid_until=stamp(1_600_000_000))),
                 {"items[0].valid_until"}, id="valid-until-before-valid-from"),
    pytest.param(bad_write(fact(valid_from=stamp(1_700_000_000), valid_until=stamp(1_700_000_000))),
                 {"items[0].valid_until"}, id="valid-until-equal-to-valid-from"),
    pytest.param(bad_write(fact(valid_from=timestamp_pb2.Timestamp(seconds=1, nanos=-1))), {"items[0].valid_from"},
                 id="valid-from-negative-nanos"),
    # data
    pytest.param(bad_write(fact(data=nested(9))), {"items[0].data"}, id="data-9-levels-deep"),
    pytest.param(bad_write(fact(data=nested_lists(9))), {"items[0].data"}, id="data-9-levels-deep-in-lists"),
    pytest.param(bad_write(fact(data=struct(blob="x" * (16 * 1024)))), {"items[0].data"}, id="data-over-16KiB"),
    pytest.param(bad_write(fact(data=struct(ratio=NAN))), {"items[0].data"}, id="data-with-nan-number"),
    # request level
    pytest.param(write(fact(), turns=[pb.Turn(turn_id="t1", speaker="user", text="hi", time=stamp(1))]), {"turns"},
                 id="items-and-turns"),
    pytest.param(write(fact(), idempotency_key="k" * 129), {"idempotency_key"}, id="idempotency-key-over-128"),
    pytest.param(write(fact(), consistency=99), {"consistency"}, id="consistency-unknown"),
    # several at once: all of them are named in one answer
    pytest.param(
        write(fact(key="bad key"), fact(importance=NAN, key="k2"), event(text=""), subject="",
              idempotency_key="k" * 129, consistency=7),
        {"subject", "items[0].key", "items[1].importance", "items[2].text", "idempotency_key", "consistency"},
        id="several-violations",
    ),
    pytest.param(
        write(pb.MemoryDraft(category=99, key="a b", text=" ", importance=2.0, confidence=NAN, tags=[""],
                             scope=pb.SCOPE_SESSION, data=nested(10))),
        {"items[0].category", "items[0].key", "items[0].text", "items[0].importance", "items[0].confidence",
         "items[0].tags[0]", "items[0].session_id", "items[0].data"},
        id="several-violations-in-one-item",
    ),
]


@pytest.mark.parametrize("build, fields", WRITE_CASES)
def test_write_refuses_bad_input_and_writes_nothing(agent: Agent, build: Build, fields: set[str]) -> None:
    subject = unique("subject")
    error = refused(agent, "Write", build(subject))
    assert error.reason == "INVALID_REQUEST"
    assert set(error.violations) == fields
    assert all(error.violations.values()), "every violation says what is wrong"
    assert everything(agent, subject) == []


def test_write_refuses_a_request_over_the_message_limit_and_writes_nothing(agent: Agent) -> None:
    subject = unique("subject")
    huge = fact(text="a" * (4 * 1024 * 1024 + 1))
    try:
        agent.write(subject, event("small and valid"), huge)
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
    else:
        raise AssertionError("a request over 4 MiB was accepted")
    assert everything(agent, subject) == []


def test_write_with_every_item_bad_in_several_fields_is_still_a_readable_invalid_argument(agent: Agent) -> None:
    # 100 items, each with an unknown category, a bad key and no text. However many
    # violations there are, the caller must get INVALID_ARGUMENT with a readable BadRequest,
    # not a transport error.
    subject = unique("subject")
    items = [pb.MemoryDraft(category=99, key=f"bad key {i}", text="") for i in range(100)]
    error = refused(agent, "Write", svc.WriteRequest(subject=subject, items=items))
    assert error.reason == "INVALID_REQUEST"
    assert "items[0].key" in error.violations
    assert all(name.startswith("items") for name in error.violations)
    assert everything(agent, subject) == []


LIMIT_CASES = [
    pytest.param(write(fact(), subject="a" * 128), id="subject-of-128-bytes"),
    pytest.param(write(*[event(f"event {i}") for i in range(100)]), id="100-items"),
    pytest.param(write(fact(key="k" * 128)), id="key-of-128-bytes"),
    pytest.param(write(fact(key="a.b_c:d/e-f")), id="key-with-all-allowed-punctuation"),
    pytest.param(write(fact(text="a" * (8 * 1024))), id="text-of-8KiB"),
    pytest.param(write(fact(importance=0.0, confidence=0.0)), id="importance-and-confidence-zero"),
    pytest.param(write(fact(importance=1.0, confidence=1.0)), id="importance-and-confidence-one"),
    pytest.param(write(fact(tags=[f"{i:02d}" + "t" * 62 for i in range(32)])), id="32-tags-of-64-bytes"),
    pytest.param(write(fact(data=nested(8))), id="data-8-levels-deep"),
    pytest.param(write(fact(data=struct(blob="x" * (16 * 1024 - len('{"blob":""}'))))), id="data-of-16KiB"),
    pytest.param(write(fact(scope=pb.SCOPE_SESSION, session_id="s-1")), id="session-scope-with-session-id"),
    pytest.param(write(fact(valid_from=stamp(1_600_000_000), valid_until=stamp(4_000_000_000))), id="valid-range"),
    pytest.param(write(fact(), idempotency_key="k" * 128), id="idempotency-key-of-128-bytes"),
    pytest.param(write(fact(tags=["café", "ＶＩＰ", "a b", "zero\u200bwidth"])), id="tags-with-printable-unicode"),
]


@pytest.mark.parametrize("build", LIMIT_CASES)
def test_write_accepts_values_at_the_limits(agent: Agent, build: Build) -> None:
    request = build(unique("subject"))
    response = agent.call("Write", request)
    assert len(response.results) == len(request.items)
    assert all(r.outcome == svc.WRITE_OUTCOME_CREATED for r in response.results)


# --- Recall ---------------------------------------------------------------------------------

def recall(keys: tuple[str, ...] = ("home_city",), subject: str | None = None, **kwargs: Any) -> Build:
    return lambda s: svc.RecallRequest(subject=s if subject is None else subject, keys=list(keys), **kwargs)


def said(turn_id: str = "t1", text: str = "Do you remember where I moved last year?", speaker: str = "user",
         **kwargs: Any) -> pb.Turn:
    """A turn of a Recall's context, valid unless told otherwise (``time=None``: no time)."""
    time = kwargs.pop("time", stamp(1_714_550_400))
    return pb.Turn(turn_id=turn_id, speaker=speaker, text=text, time=time, **kwargs)


def context(*turns: pb.Turn) -> Build:
    """A Recall with only a context: no query, no keys."""
    return recall(keys=(), context=list(turns))


RECALL_CASES = [
    pytest.param(recall(subject=""), {"subject"}, id="subject-empty"),
    pytest.param(recall(subject="al ice"), {"subject"}, id="subject-with-space"),
    pytest.param(recall(subject="a" * 129), {"subject"}, id="subject-over-128-bytes"),
    pytest.param(recall(keys=()), {"query"}, id="neither-query-nor-context-nor-keys"),
    pytest.param(recall(keys=(), query="   "), {"query"}, id="blank-query-and-no-keys"),
    pytest.param(recall(keys=(), query="q" * 2001), {"query"}, id="query-over-2000-bytes"),
    pytest.param(recall(top_k=101), {"top_k"}, id="top-k-101"),
    pytest.param(recall(top_k=-1), {"top_k"}, id="top-k-negative"),
    pytest.param(recall(token_budget=-1), {"token_budget"}, id="token-budget-negative"),
    pytest.param(recall(token_budget=32_001), {"token_budget"}, id="token-budget-over-32000"),
    pytest.param(recall(weights=svc.ScoreWeights(similarity=1.5)), {"weights.similarity"},
                 id="weight-similarity-above-one"),
    pytest.param(recall(weights=svc.ScoreWeights(similarity=-0.1)), {"weights.similarity"},
                 id="weight-similarity-negative"),
    pytest.param(recall(weights=svc.ScoreWeights(recency=NAN)), {"weights.recency"}, id="weight-recency-nan"),
    pytest.param(recall(weights=svc.ScoreWeights(recency=2.0)), {"weights.recency"}, id="weight-recency-above-one"),
    pytest.param(recall(weights=svc.ScoreWeights(importance=-1.0)), {"weights.importance"},
                 id="weight-importance-negative"),
    pytest.param(recall(min_relevance=-0.01), {"min_relevance"}, id="min-relevance-negative"),
    pytest.param(recall(min_relevance=1.01), {"min_relevance"}, id="min-relevance-above-one"),
    pytest.param(recall(min_relevance=NAN), {"min_relevance"}, id="min-relevance-nan"),
    pytest.param(recall(weights=svc.ScoreWeights(similarity=0.0, recency=0.0, importance=0.0)), {"weights"},
                 id="weights-all-zero"),
    pytest.param(recall(keys=tuple(f"k{i}" for i in range(101))), {"keys"}, id="keys-over-100"),
    pytest.param(recall(keys=("home_city", "")), {"keys[1]"}, id="key-empty"),
    pytest.param(recall(keys=("home city",)), {"keys[0]"}, id="key-with-space"),
    pytest.param(recall(keys=("ok", "home_*")), {"keys[1]"}, id="key-with-star"),
    pytest.param(recall(keys=("k" * 129,)), {"keys[0]"}, id="key-over-128-bytes"),
    pytest.param(recall(filter=pb.MemoryFilter(categories=[99])), {"filter.categories[0]"},
                 id="filter-category-unknown"),
    pytest.param(recall(filter=pb.MemoryFilter(categories=[pb.CATEGORY_FACT, pb.CATEGORY_UNSPECIFIED])),
                 {"filter.categories[1]"}, id="filter-category-unspecified"),
    pytest.param(recall(filter=pb.MemoryFilter(tags=[""])), {"filter.tags[0]"}, id="filter-tag-empty"),
    # With a query, the filter is compiled for the vector index too: that is where it failed.
    *(pytest.param(recall(keys=(), query="tea", filter=pb.MemoryFilter(tags=["ok", f"vip{c}"])), {"filter.tags[1]"},
                   id=f"filter-tag-with-{name}") for name, c in LINE_BREAKING.items()),
    pytest.param(recall(filter=pb.MemoryFilter(keys=["a b"])), {"filter.keys[0]"}, id="filter-key-with-space"),
    pytest.param(recall(filter=pb.MemoryFilter(session_id="s 1")), {"filter.session_id"},
                 id="filter-session-id-with-space"),
    # The context: each turn as in a Write, at most 50 turns, at most 64 KiB of text in all.
    pytest.param(context(*(said(f"t{i}") for i in range(51))), {"context"}, id="context-over-50-turns"),
    pytest.param(context(said("t1"), said("t2", time=None)), {"context[1].time"}, id="context-turn-without-time"),
    pytest.param(context(said("t1", text=" \n ")), {"context[0].text"}, id="context-turn-blank-text"),
    pytest.param(context(said("t1", text="")), {"context[0].text"}, id="context-turn-empty-text"),
    pytest.param(context(said("t1", speaker="  ")), {"context[0].speaker"}, id="context-turn-blank-speaker"),
    pytest.param(context(said("t1", speaker="")), {"context[0].speaker"}, id="context-turn-without-speaker"),
    pytest.param(context(said("t1"), said("t2"), said("t1")), {"context[2].turn_id"}, id="context-turn-id-repeated"),
    pytest.param(context(said("")), {"context[0].turn_id"}, id="context-turn-without-id"),
    pytest.param(context(said("t 1")), {"context[0].turn_id"}, id="context-turn-id-with-space"),
    pytest.param(context(said("t1", text="x" * 8193)), {"context[0].text"}, id="context-turn-text-over-8-kib"),
    pytest.param(context(said("t1", text="a\x00b")), {"context[0].text"}, id="context-turn-text-with-nul"),
    pytest.param(context(said("t1", time=timestamp_pb2.Timestamp(seconds=1, nanos=-1))), {"context[0].time"},
                 id="context-turn-time-invalid"),
    pytest.param(context(*(said(f"t{i}", text="x" * 8000) for i in range(9))), {"context"},
                 id="context-texts-over-64-kib"),
    # With keys or a query, a context is checked all the same.
    pytest.param(recall(context=[said(time=None)]), {"context[0].time"}, id="context-with-keys-turn-without-time"),
    pytest.param(recall(subject="", keys=(), query="where", context=[said("t1"), said("t1", text=" ")]),
                 {"subject", "context[1].turn_id", "context[1].text"}, id="context-several-violations"),
    pytest.param(
        recall(subject="", top_k=101, token_budget=-5, weights=svc.ScoreWeights(recency=2.0),
               filter=pb.MemoryFilter(categories=[pb.CATEGORY_FACT, 99])),
        {"subject", "top_k", "token_budget", "weights.recency", "filter.categories[1]"},
        id="several-violations",
    ),
]


@pytest.mark.parametrize("build, fields", RECALL_CASES)
def test_recall_refuses_bad_input(agent: Agent, build: Build, fields: set[str]) -> None:
    error = refused(agent, "Recall", build(unique("subject")))
    assert error.reason == "INVALID_REQUEST"
    assert set(error.violations) == fields
    assert all(error.violations.values())


def test_recall_top_k_zero_means_the_default(agent: Agent) -> None:
    subject = unique("subject")
    agent.write(subject, fact())
    recalled = agent.recall_keys(subject, "home_city", top_k=0)
    assert [m.memory.text for m in recalled.memories] == ["lives in Lisbon"]


@pytest.mark.parametrize("kwargs", [
    pytest.param({"top_k": 1}, id="top-k-1"),
    pytest.param({"top_k": 100}, id="top-k-100"),
    pytest.param({"token_budget": 32_000}, id="token-budget-32000"),
    pytest.param({"weights": svc.ScoreWeights(similarity=0.0, recency=0.0, importance=1.0)}, id="one-positive-weight"),
    pytest.param({"weights": svc.ScoreWeights(similarity=0.0)}, id="one-zero-weight-others-default"),
    pytest.param({"min_relevance": 0.0}, id="min-relevance-0"),
    pytest.param({"min_relevance": 1.0}, id="min-relevance-1-keys-are-exact"),
    pytest.param({"context": [said(f"t{i}") for i in range(50)]}, id="context-50-turns"),
    pytest.param({"context": [said(f"t{i}", text="x" * 8192) for i in range(8)]}, id="context-64-kib"),
])
def test_recall_accepts_values_at_the_limits(agent: Agent, kwargs: dict[str, Any]) -> None:
    subject = unique("subject")
    agent.write(subject, fact())
    recalled = agent.recall_keys(subject, "home_city", **kwargs)
    assert [m.memory.text for m in recalled.memories] == ["lives in Lisbon"]


def test_recall_accepts_100_keys(agent: Agent) -> None:
    subject = unique("subject")
    agent.write(subject, fact())
    recalled = agent.recall_keys(subject, "home_city", *(f"k{i}" for i in range(99)))
    assert [m.memory.text for m in recalled.memories] == ["lives in Lisbon"]


# --- MemoryView -----------------------------------------------------------------------------

def view(subject: str | None = None, **kwargs: Any) -> Build:
    return lambda s: svc.MemoryViewRequest(subject=s if subject is None else subject, **kwargs)


VIEW_CASES = [
    pytest.param(view(subject=""), {"subject"}, id="subject-empty"),
    pytest.param(view(subject="al%ice"), {"subject"}, id="subject-with-percent"),
    pytest.param(view(page_size=501), {"page_size"}, id="page-size-501"),
    pytest.param(view(page_size=-1), {"page_size"}, id="page-size-negative"),
    pytest.param(view(page_token="garbage"), {"page_token"}, id="page-token-garbage"),
    pytest.param(view(page_token="!!not base64!!"), {"page_token"}, id="page-token-not-base64"),
    pytest.param(view(page_token="A" * 200), {"page_token"}, id="page-token-forged"),
    pytest.param(view(page_token="A" * 1025), {"page_token"}, id="page-token-over-1024-bytes"),
    pytest.param(view(statuses=[99]), {"statuses[0]"}, id="status-unknown"),
    pytest.param(view(statuses=[pb.MEMORY_STATUS_SUPERSEDED]), {"statuses[0]"}, id="status-superseded"),
    pytest.param(view(statuses=[pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_UNSPECIFIED]), {"statuses[1]"},
                 id="status-unspecified"),
    pytest.param(view(filter=pb.MemoryFilter(categories=[99])), {"filter.categories[0]"}, id="filter-category-unknown"),
    pytest.param(view(filter=pb.MemoryFilter(keys=[f"k{i}" for i in range(101)])), {"filter.keys"},
                 id="filter-keys-over-100"),
    pytest.param(view(filter=pb.MemoryFilter(tags=[f"t{i}" for i in range(33)])), {"filter.tags"},
                 id="filter-tags-over-32"),
    *(pytest.param(view(filter=pb.MemoryFilter(tags=[f"vip{c}"])), {"filter.tags[0]"}, id=f"filter-tag-with-{name}")
      for name, c in LINE_BREAKING.items()),
    pytest.param(
        view(subject="", page_size=501, statuses=[pb.MEMORY_STATUS_ACTIVE, 99],
             filter=pb.MemoryFilter(categories=[pb.CATEGORY_UNSPECIFIED])),
        {"subject", "page_size", "statuses[1]", "filter.categories[0]"},
        id="several-violations",
    ),
]


@pytest.mark.parametrize("build, fields", VIEW_CASES)
def test_memory_view_refuses_bad_input(agent: Agent, build: Build, fields: set[str]) -> None:
    error = refused(agent, "MemoryView", build(unique("subject")))
    assert error.reason == "INVALID_REQUEST"
    assert set(error.violations) == fields
    assert all(error.violations.values())


def test_memory_view_refuses_a_page_token_issued_for_another_subject(agent: Agent) -> None:
    first, second = unique("subject"), unique("subject")
    agent.write(first, event("one"), event("two"))
    token = agent.list(first, page_size=1).next_page_token
    assert token
    error = refused(agent, "MemoryView", svc.MemoryViewRequest(subject=second, page_size=1, page_token=token))
    assert error.reason == "INVALID_REQUEST"
    assert set(error.violations) == {"page_token"}


def test_memory_view_refuses_a_page_token_issued_for_another_filter(agent: Agent) -> None:
    subject = unique("subject")
    agent.write(subject, event("one"), event("two"))
    token = agent.list(subject, page_size=1).next_page_token
    assert token
    other = pb.MemoryFilter(categories=[pb.CATEGORY_EVENT])
    error = refused(agent, "MemoryView",
                    svc.MemoryViewRequest(subject=subject, page_size=1, page_token=token, filter=other))
    assert set(error.violations) == {"page_token"}


@pytest.mark.parametrize("page_size", [0, 1, 500])
def test_memory_view_accepts_page_sizes_within_the_limits(agent: Agent, page_size: int) -> None:
    subject = unique("subject")
    agent.write(subject, fact())
    assert [m.text for m in agent.list(subject, page_size=page_size).memories] == ["lives in Lisbon"]


# --- GetHistory -----------------------------------------------------------------------------

def history(memory_id: str = UUID, subject: str | None = None, **kwargs: Any) -> Build:
    return lambda s: svc.GetHistoryRequest(subject=s if subject is None else subject, memory_id=memory_id, **kwargs)


HISTORY_CASES = [
    pytest.param(history(subject=""), {"subject"}, id="subject-empty"),
    pytest.param(history(memory_id="not-a-uuid"), {"memory_id"}, id="memory-id-not-a-uuid"),
    pytest.param(history(memory_id=UUID[:-1]), {"memory_id"}, id="memory-id-truncated-uuid"),
    pytest.param(history(memory_id="' OR 1=1 --"), {"memory_id"}, id="memory-id-sql"),
    pytest.param(history(memory_id=""), {"memory_id"}, id="memory-id-empty"),
    pytest.param(history(page_size=501), {"page_size"}, id="page-size-501"),
    pytest.param(history(page_size=-1), {"page_size"}, id="page-size-negative"),
    pytest.param(history(page_token="A" * 1025), {"page_token"}, id="page-token-over-1024-bytes"),
    pytest.param(history(subject="a b", memory_id="nope", page_size=-3), {"subject", "memory_id", "page_size"},
                 id="several-violations"),
]


@pytest.mark.parametrize("build, fields", HISTORY_CASES)
def test_get_history_refuses_bad_input(agent: Agent, build: Build, fields: set[str]) -> None:
    error = refused(agent, "GetHistory", build(unique("subject")))
    assert error.reason == "INVALID_REQUEST"
    assert set(error.violations) == fields
    assert all(error.violations.values())


def test_get_history_refuses_a_garbage_page_token(agent: Agent) -> None:
    subject = unique("subject")
    memory_id = agent.write(subject, fact()).results[0].memory_id
    error = refused(agent, "GetHistory", svc.GetHistoryRequest(subject=subject, memory_id=memory_id,
                                                               page_token="garbage"))
    assert set(error.violations) == {"page_token"}


# --- Erase ----------------------------------------------------------------------------------

def erase(subject: str | None = None, mode: int = svc.ERASE_MODE_PURGE, **selector: Any) -> Build:
    return lambda s: svc.EraseRequest(subject=s if subject is None else subject, mode=mode, **selector)


def erase_with_empty_ids(s: str) -> svc.EraseRequest:
    request = svc.EraseRequest(subject=s, mode=svc.ERASE_MODE_PURGE)
    request.ids.SetInParent()
    return request


ERASE_CASES = [
    pytest.param(erase(subject="", all_of_subject=True), {"subject"}, id="subject-empty"),
    pytest.param(erase(subject="a" * 129, all_of_subject=True), {"subject"}, id="subject-over-128-bytes"),
    pytest.param(erase(), {"selector"}, id="no-selector"),
    pytest.param(erase(mode=svc.ERASE_MODE_UNSPECIFIED, all_of_subject=True), {"mode"}, id="no-mode"),
    pytest.param(erase(mode=99, all_of_subject=True), {"mode"}, id="mode-unknown"),
    pytest.param(erase(ids=svc.MemoryIds(ids=[UUID, "not-a-uuid"])), {"ids.ids[1]"}, id="ids-with-a-non-uuid"),
    pytest.param(erase(ids=svc.MemoryIds(ids=[""])), {"ids.ids[0]"}, id="ids-with-an-empty-id"),
    pytest.param(erase_with_empty_ids, {"ids.ids"}, id="ids-empty"),
    pytest.param(erase(ids=svc.MemoryIds(ids=[UUID] * 1001)), {"ids.ids"}, id="ids-over-1000"),
    pytest.param(erase(key=""), {"key"}, id="key-empty"),
    pytest.param(erase(key="home city"), {"key"}, id="key-with-space"),
    pytest.param(erase(key="*"), {"key"}, id="key-wildcard"),
    pytest.param(erase(key="home_%"), {"key"}, id="key-with-percent"),
    pytest.param(erase(source_turn_id=""), {"source_turn_id"}, id="source-turn-id-empty"),
    pytest.param(erase(category=pb.CATEGORY_UNSPECIFIED), {"category"}, id="category-unspecified"),
    pytest.param(erase(category=99), {"category"}, id="category-unknown"),
    pytest.param(erase(all_of_subject=False), {"all_of_subject"}, id="all-of-subject-false"),
    pytest.param(erase(all_of_subject=True, reason="r" * 513), {"reason"}, id="reason-over-512-bytes"),
    pytest.param(erase(subject="", mode=svc.ERASE_MODE_UNSPECIFIED), {"subject", "mode", "selector"},
                 id="several-violations"),
    pytest.param(erase(mode=99, ids=svc.MemoryIds(ids=["x", UUID, "y"])), {"mode", "ids.ids[0]", "ids.ids[2]"},
                 id="several-violations-with-ids"),
]


@pytest.mark.parametrize("build, fields", ERASE_CASES)
def test_erase_refuses_bad_input_and_erases_nothing(agent: Agent, build: Build, fields: set[str]) -> None:
    subject = unique("subject")
    agent.write(subject, fact(key="home_city"), event())
    before = sorted((m.id, m.version, m.status) for m in everything(agent, subject))
    error = refused(agent, "Erase", build(subject))
    assert error.reason == "INVALID_REQUEST"
    assert set(error.violations) == fields
    assert all(error.violations.values())
    after = sorted((m.id, m.version, m.status) for m in everything(agent, subject))
    assert after == before
    assert len(after) == 2


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited field on the wire (numbers and lengths under 128)."""
    assert number < 16 and len(payload) < 128
    return bytes([(number << 3) | 2, len(payload)]) + payload


def _deep_struct_bytes(depth: int) -> bytes:
    """A Struct nested ``depth`` levels ({"a": {"a": ...}}) as raw wire bytes, deeper than the
    Python runtime lets a client build."""
    struct = b""
    for _ in range(depth):
        value = bytes([(5 << 3) | 2]) + varint(len(struct)) + struct  # Value.struct_value
        entry = _field(1, b"a") + bytes([(2 << 3) | 2]) + varint(len(value)) + value  # FieldsEntry
        struct = bytes([(1 << 3) | 2]) + varint(len(entry)) + entry  # Struct.fields
    return struct


UNDECODABLE = [
    pytest.param("MemoryService/Write", _field(1, b"\xff\xfeuser"), id="write-subject-not-utf8"),
    pytest.param("MemoryService/Recall", _field(2, b"\xc3\x28"), id="recall-query-not-utf8"),
    pytest.param("MemoryService/MemoryView", bytes([(5 << 3) | 2, 100]) + b"ab", id="length-past-the-end"),
    pytest.param("MemoryService/Erase", b"\xff\xff\xff", id="not-protobuf-at-all"),
    pytest.param("MemoryService/Write", (lambda d: bytes([(2 << 3) | 2]) + varint(len(d)) + d)(
        bytes([(6 << 3) | 2]) + varint(len(s := _deep_struct_bytes(120))) + s), id="struct-past-parser-depth"),
    pytest.param("ViewAdminService/PutView", _field(1, _field(1, b"\x80agent")), id="put-view-agent-not-utf8"),
]


@pytest.mark.parametrize("method, payload", UNDECODABLE)
def test_undecodable_bytes_are_invalid_argument_not_unknown(agent: Agent, connect: Callable[..., Agent],
                                                           method: str, payload: bytes) -> None:
    """Found by tests/fuzz: a request that does not parse came back UNKNOWN ("Unexpected
    DecodeError") from gRPC's own deserialization step; it is the client's bad input."""
    subject = unique("subject")
    agent.write(subject, fact())
    before = everything(agent, subject)
    caller = connect(agent="ops", roles=("admin",), view=None) if method.startswith("ViewAdmin") else agent
    rpc = agent.channel.unary_unary(f"/memoryd.v1.{method}")
    with pytest.raises(grpc.RpcError) as raised:
        rpc(payload, metadata=caller.metadata, timeout=30)
    error = failure(raised.value)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT, error.message
    assert error.reason == "INVALID_REQUEST"
    assert "not a valid memoryd.v1." in error.message
    assert everything(agent, subject) == before


def test_undecodable_bytes_are_still_unauthenticated_without_a_token(agent: Agent) -> None:
    rpc = agent.channel.unary_unary("/memoryd.v1.MemoryService/Write")
    with pytest.raises(grpc.RpcError) as raised:
        rpc(b"\xff\xff\xff", timeout=30)
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]


def test_a_field_that_breaks_two_rules_is_named_once(agent: Agent) -> None:
    # Too long and blank: two rules, one field. A client keys the violations by field (the
    # Python client's MemorydError.violations is a dict), so the server describes a field once,
    # by the rule it broke first.
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    try:
        agent.call("Write", bad_write(fact(text=" " * 9000))(unique("subject")))
    except grpc.RpcError as error:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
    else:
        raise AssertionError("Write accepted a blank text of 9,000 bytes")
    assert status is not None
    fields = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            fields += [v.field for v in bad.field_violations]
    assert fields == ["items[0].text"]

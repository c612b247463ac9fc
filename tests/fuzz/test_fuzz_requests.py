"""Fuzzing the gRPC surface: random, huge, malformed and undecodable requests to every
memoryd.v1 method against the suite's real server.

The properties, for every request:
- the status is OK or a client error (INVALID_ARGUMENT, PERMISSION_DENIED, NOT_FOUND,
  FAILED_PRECONDITION, RESOURCE_EXHAUSTED, UNAUTHENTICATED) — never INTERNAL, UNKNOWN or
  UNAVAILABLE — and the server process stays alive;
- a rejected request changes nothing: the tenant's rows in every tenant table are the same
  before and after (read with the owner DSN).

Runs are reproducible (``derandomize``, no example database). ``MEMORYD_FUZZ_EXAMPLES`` raises
the number of examples per test for a longer local run (the default keeps the file near three
minutes on the 2-core CI machine, most of it the odd-character case of every request type).
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.domain import Category, Scope, SourceKind, Stability
from memoryd.server.usecases._archive import seal
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import view_admin_service_pb2 as admin
from tests.support import (ALL_FIELDS, Agent, ServerProcess, draft, failure, full_view, put_view, token_for, unique,
                           varint, wait_until)

EXAMPLES = int(os.environ.get("MEMORYD_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # a call's latency is not a property; CI machines are slow and shared
    derandomize=True,  # the same examples on every run: CI is reproducible
    database=None,
    # Huge strings and Structs are the point: generating them is slow and large on purpose.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CLIENT_ERRORS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAUTHENTICATED,
}
MEMORY_METHODS = [m.name for m in svc.DESCRIPTOR.services_by_name["MemoryService"].methods]
ADMIN_METHODS = [m.name for m in admin.DESCRIPTOR.services_by_name["ViewAdminService"].methods]
# Server-streaming methods (Watch): a stream that is still open when its short deadline runs out
# was accepted; it never ends by itself.
STREAMING = {m.name for m in svc.DESCRIPTOR.services_by_name["MemoryService"].methods if m.server_streaming}
STREAM_SECONDS = 3
REQUESTS = {
    **{m.name: m.input_type for m in svc.DESCRIPTOR.services_by_name["MemoryService"].methods},
    **{m.name: m.input_type for m in admin.DESCRIPTOR.services_by_name["ViewAdminService"].methods},
}
ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]
SUBJECT = "user-fuzz"


# ---------------------------------------------------------------------------------------------
# The world: one tenant with seeded memories, real page tokens and real archives.


@dataclass
class World:
    server: ServerProcess
    channel: grpc.Channel
    conn: psycopg.Connection[Any]  # the owner's, autocommit: snapshots and the audit check
    tenant: str
    agent: Agent
    admin: Agent
    ids: list[str] = field(default_factory=list)
    page_tokens: list[str] = field(default_factory=list)
    archives: list[tuple[bytes, str]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    last_error: grpc.RpcError | None = None  # how the last refused call failed

    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example
        return f"World(tenant={self.tenant!r})"

    def snapshot(self) -> dict[str, Any]:
        """Every row of the tenant, table by table: (count, digest of the rows' text), read in one
        statement (one snapshot of the database) on the world's own connection. Left out: the
        outbox (the index and lifecycle workers change it in the background), the tenant's index
        routes (only the index worker writes one, the first time it indexes the tenant into a
        collection: in the background, after the world's own writes) and the audit log (written
        asynchronously; refused requests are checked in it by request id when the module ends).
        The kept BM25 counts are compared by what they count — the sums per group — since the
        lifecycle sweeper folds their rows in the background; and a memory without its recall
        count and last recall time, which the access recorder writes about a second after an
        earlier Recall answered (``memoryd.server.usecases._access``) — a refused request records no read,
        which the audit log shows when the module ends."""
        parts = []
        for table in self.tables:
            if table in ("outbox", "index_routes", "audit_log"):
                continue
            rows = (f"(SELECT subject, scope, session_id, category, sum(docs), sum(length) FROM {table} "
                    f"WHERE tenant_id = %(tenant)s GROUP BY 1, 2, 3, 4 HAVING sum(docs) <> 0 OR sum(length) <> 0)"
                    if table == "keyword_stats" else
                    f"(SELECT to_jsonb(m) - 'access_count' - 'last_access_at' FROM {table} m "
                    f"WHERE tenant_id = %(tenant)s)" if table == "memories" else
                    f"(SELECT * FROM {table} WHERE tenant_id = %(tenant)s)")
            parts.append(f"SELECT '{table}', count(*), coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') "
                         f"FROM {rows} t")
        return {table: (count, digest) for table, count, digest
                in self.conn.execute(" UNION ALL ".join(parts), {"tenant": self.tenant}).fetchall()}

    def send(self, method: str, request: Message | bytes, caller: Agent | None = None) -> grpc.StatusCode:
        """Send ``request`` (a message, or raw wire bytes); check the properties; return the code."""
        caller = caller or (self.admin if method in ADMIN_METHODS else self.agent)
        service = "ViewAdminService" if method in ADMIN_METHODS else "MemoryService"
        payload = request if isinstance(request, bytes) else request.SerializeToString()
        # A generic call with identity serializers: the exact bytes go on the wire.
        path = f"/memoryd.v1.{service}/{method}"
        request_id = unique("fuzz").replace("-", "")
        before = self.snapshot()
        metadata = (*caller.metadata, ("x-request-id", request_id))
        try:
            if method in STREAMING:
                for _ in self.channel.unary_stream(path)(payload, metadata=metadata, timeout=STREAM_SECONDS):
                    pass
            else:
                self.channel.unary_unary(path)(payload, metadata=metadata, timeout=60)
            code = grpc.StatusCode.OK
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
            self.last_error = error
        if method in STREAMING and code == grpc.StatusCode.DEADLINE_EXCEEDED:
            code = grpc.StatusCode.OK  # the stream was open
        elif code != grpc.StatusCode.OK:
            error = self.last_error
            assert code in CLIENT_ERRORS, f"{method} answered {code}: {error.details()}"  # type: ignore[attr-defined]
            after = self.snapshot()
            changed = {t for t in before if before[t] != after[t]}
            assert not changed, (f"{method} was refused ({code}: {error.details()}) but changed "  # type: ignore[attr-defined]
                                 f"{sorted(changed)}")
            self.refused.append(request_id)
        assert self.server.process is not None and self.server.process.poll() is None, "the server died"
        return code


@pytest.fixture(scope="module")
def world(server: ServerProcess, channel: grpc.Channel, key_file: Path, postgres: Any) -> Iterator[World]:
    tenant = unique("fuzz")
    put_view(channel, key_file, tenant, full_view("fuzzer"))
    agent = Agent(channel, token_for(key_file, tenant, "fuzzer"))
    ops = Agent(channel, token_for(key_file, tenant, "ops", roles=("admin",)))
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'tenant_id' "
            "AND table_schema = 'public' ORDER BY table_name").fetchall()]
        w = World(server, channel, conn, tenant, agent, ops, tables=tables)
        written = agent.write(SUBJECT, draft("fact", "lives in Lisbon", key="home_city"),
                              draft("preference", "likes green tea", key="drink"),
                              draft("event", "went to the dentist"), draft("goal", "run a marathon", key="goal"))
        agent.write(SUBJECT, draft("fact", "lives in Porto", key="home_city"))  # a second version
        w.ids = [r.memory_id for r in written.results]
        agent.erase(SUBJECT, mode=svc.ERASE_MODE_FORGET, key="goal")  # a forgotten one
        token = ""
        while True:
            page = agent.list(SUBJECT, page_size=1, page_token=token, statuses=ALL_STATUSES)
            token = page.next_page_token
            if not token:
                break
            w.page_tokens.append(token)
        history = agent.history(SUBJECT, w.ids[0], page_size=1)
        if history.next_page_token:
            w.page_tokens.append(history.next_page_token)
        for passphrase in ("", "correct horse battery staple"):
            exported = agent.call("ExportMemories", svc.ExportMemoriesRequest(subject=SUBJECT, passphrase=passphrase))
            w.archives.append((exported.archive, passphrase))
        assert w.page_tokens and all(a for a, _ in w.archives)
        seen = w.snapshot()  # it reads the world: its memories (the forgotten one too) and their versions
        assert seen["memories"][0] == 4 and seen["memory_versions"][0] >= 5 and seen["agent_views"][0] >= 1
        yield w
        # Read audit events are written in batches off the request path: once a read made after
        # every refused request is in the log, all recorded before it have been written too. Then
        # no refused request may have left one.
        marker = unique("req")
        agent.memory.MemoryView(svc.MemoryViewRequest(subject=SUBJECT), timeout=30,
                                metadata=(*agent.metadata, ("x-request-id", marker)))
        wait_until(lambda: conn.execute("SELECT 1 FROM audit_log WHERE tenant_id = %s AND request_id = %s",
                                        (tenant, marker)).fetchone(), timeout=30, what="the last read is audited")
        audited = conn.execute("SELECT action, request_id FROM audit_log WHERE tenant_id = %s AND request_id = ANY(%s)",
                               (tenant, w.refused)).fetchall()
        assert not audited, f"refused requests left audit records: {audited}"


# ---------------------------------------------------------------------------------------------
# Strategies.

texts = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=40),
    st.sampled_from(["", " ", "\x00", "home_city", "*", "a" * 1000, "\u202e\u0301", "user-fuzz", "../../etc"]),
    st.builds(lambda c, n: c * n, st.characters(codec="utf-8"), st.sampled_from([9_000, 300_000])),
)
subjects = st.one_of(st.just(SUBJECT), st.just(SUBJECT), texts)
int32s = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)]))
floats = st.one_of(st.floats(width=32), st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1.0, -0.0, 1e30]))
enums = st.one_of(st.integers(0, 8), st.integers(-(2**31), 2**31 - 1))
timestamps = st.builds(
    lambda s, n: timestamp_pb2.Timestamp(seconds=s, nanos=n),
    st.one_of(st.integers(-(2**40), 2**40), st.integers(-62135596800, 253402300799)),
    st.one_of(st.just(0), st.integers(-(2**31), 2**31 - 1)),
)
json_leaves = st.one_of(st.none(), st.booleans(), st.floats(), st.text(st.characters(codec="utf-8"), max_size=20),
                        st.just("x" * 300_000))
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=8), inner, max_size=4)),
    max_leaves=20,
)


def _deep(depth: int, as_list: bool) -> Any:
    value: Any = 1
    for level in range(depth):
        value = [value] if as_list else {f"l{level}": value}
    return value


def _struct(value: Any) -> struct_pb2.Struct:
    data = struct_pb2.Struct()
    data.update(value if isinstance(value, dict) else {"v": value})
    return data


structs = st.one_of(
    st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=10), json_values, max_size=5).map(_struct),
    st.builds(lambda d, as_list: _struct({"deep": _deep(d, as_list)}), st.integers(1, 30), st.booleans()),
    st.integers(1, 5000).map(lambda n: _struct({f"k{i}": i for i in range(n)})),
)


def _set_enum(message: Message, name: str, value: int) -> Message:
    """Set an enum field to any number, known or not (proto3 keeps unknown values)."""
    setattr(message, name, value) if value in (message.DESCRIPTOR.fields_by_name[name].enum_type.values_by_number) \
        else _raw_enum(message, name, value)
    return message


def _raw_enum(message: Message, name: str, value: int) -> None:
    number = message.DESCRIPTOR.fields_by_name[name].number
    message.MergeFromString(varint((number << 3) | 0) + varint(value & 0xFFFFFFFFFFFFFFFF))


@st.composite
def drafts(draw: st.DrawFn) -> pb.MemoryDraft:
    d = pb.MemoryDraft(
        session_id=draw(st.one_of(st.just(""), texts)),
        key=draw(st.one_of(st.just(""), st.just("home_city"), texts)),
        text=draw(st.one_of(st.just("likes oolong tea"), texts)),
        pinned=draw(st.booleans()),
        tags=draw(st.lists(texts, max_size=4)),
        source_turn_id=draw(st.one_of(st.just(""), texts)),
    )
    for name in ("scope", "category", "stability", "source_kind"):
        _set_enum(d, name, draw(enums))
    if draw(st.booleans()):
        d.data.CopyFrom(draw(structs))
    if draw(st.booleans()):
        d.importance = draw(floats)
    if draw(st.booleans()):
        d.confidence = draw(floats)
    if draw(st.booleans()):
        d.valid_from.CopyFrom(draw(timestamps))
    if draw(st.booleans()):
        d.valid_until.CopyFrom(draw(timestamps))
    return d


# Turn texts stay small: a long accepted turn is chunked and embedded (seconds on CPU), which
# is load, not fuzzing; the huge strings go to the fields where limits refuse them.
small_texts = st.text(st.characters(codec="utf-8"), max_size=40)
turns = st.builds(lambda i, s, t: pb.Turn(turn_id=i, speaker=s, text=t), small_texts, small_texts, small_texts)
# A Recall's context: turns with a time (any, or none), so some pass and are searched with.
timed_turns = st.builds(lambda i, s, t, w: pb.Turn(turn_id=i, speaker=s, text=t, time=w), small_texts, small_texts,
                        small_texts, st.one_of(st.none(), timestamps))


@st.composite
def memory_filters(draw: st.DrawFn) -> pb.MemoryFilter:
    f = pb.MemoryFilter(keys=draw(st.lists(texts, max_size=4)), tags=draw(st.lists(texts, max_size=3)),
                        session_id=draw(st.one_of(st.just(""), texts)), include_org=draw(st.booleans()))
    for value in draw(st.lists(enums, max_size=4)):
        f.MergeFromString(varint((1 << 3) | 0) + varint(value & 0xFFFFFFFFFFFFFFFF))
    if draw(st.booleans()):
        f.updated_after.CopyFrom(draw(timestamps))
    if draw(st.booleans()):
        f.updated_before.CopyFrom(draw(timestamps))
    return f


def page_tokens(world: World) -> st.SearchStrategy[str]:
    def mutate(token: str, position: int, char: str) -> str:
        position %= max(len(token), 1)
        return token[:position] + char + token[position + 1:]

    return st.one_of(
        st.just(""),
        st.sampled_from(world.page_tokens),
        st.builds(mutate, st.sampled_from(world.page_tokens), st.integers(0, 10_000), st.characters(codec="utf-8")),
        st.binary(max_size=200).map(lambda b: base64.urlsafe_b64encode(b).decode()),
        st.binary(max_size=200).map(lambda b: base64.b64encode(b).decode()),
        texts,
    )


# ---------------------------------------------------------------------------------------------
# The properties, one test per method (or family).


@FUZZ
@given(data=st.data())
def test_write(world: World, data: st.DataObject) -> None:
    request = svc.WriteRequest(
        subject=data.draw(subjects),
        items=data.draw(st.lists(drafts(), max_size=4)),
        turns=data.draw(st.lists(turns, max_size=3)),
        idempotency_key=data.draw(st.one_of(st.just(""), texts)),
    )
    _set_enum(request, "consistency", data.draw(enums))
    _set_enum(request, "turn_mode", data.draw(enums))
    world.send("Write", request)


@FUZZ
@given(data=st.data())
def test_recall(world: World, data: st.DataObject) -> None:
    request = svc.RecallRequest(
        subject=data.draw(subjects), query=data.draw(texts), keys=data.draw(st.lists(texts, max_size=4)),
        top_k=data.draw(int32s), token_budget=data.draw(int32s), render_block=data.draw(st.booleans()),
        context=data.draw(st.lists(timed_turns, max_size=3)))
    if data.draw(st.booleans()):
        request.filter.CopyFrom(data.draw(memory_filters()))
    for name in ("similarity", "recency", "importance"):
        if data.draw(st.booleans()):
            setattr(request.weights, name, data.draw(floats))
    world.send("Recall", request)


@FUZZ
@given(data=st.data())
def test_memory_view_and_history(world: World, data: st.DataObject) -> None:
    tokens = page_tokens(world)
    listing = svc.MemoryViewRequest(subject=data.draw(subjects), page_size=data.draw(int32s),
                                    page_token=data.draw(tokens))
    if data.draw(st.booleans()):
        listing.filter.CopyFrom(data.draw(memory_filters()))
    for value in data.draw(st.lists(enums, max_size=4)):
        listing.MergeFromString(varint((3 << 3) | 0) + varint(value & 0xFFFFFFFFFFFFFFFF))
    world.send("MemoryView", listing)
    history = svc.GetHistoryRequest(subject=data.draw(subjects),
                                    memory_id=data.draw(st.one_of(st.sampled_from(world.ids), texts)),
                                    page_size=data.draw(int32s), page_token=data.draw(tokens))
    world.send("GetHistory", history)


@FUZZ
@given(data=st.data())
def test_jobs_and_conflicts(world: World, data: st.DataObject) -> None:
    ids = st.one_of(st.sampled_from(world.ids), st.uuids().map(str), texts)
    world.send("GetExtractionJob", svc.GetExtractionJobRequest(subject=data.draw(subjects), job_id=data.draw(ids)))
    resolve = svc.ResolveConflictRequest(subject=data.draw(subjects), memory_id=data.draw(ids),
                                         pending_id=data.draw(ids))
    _set_enum(resolve, "resolution", data.draw(enums))
    world.send("ResolveConflict", resolve)


@FUZZ
@given(data=st.data())
def test_export_and_import(world: World, data: st.DataObject) -> None:
    world.send("ExportMemories", svc.ExportMemoriesRequest(subject=data.draw(subjects),
                                                          passphrase=data.draw(st.one_of(st.just(""), texts))))

    def mutate(archive: bytes, position: int, byte: int) -> bytes:
        position %= len(archive)
        return archive[:position] + bytes([byte]) + archive[position + 1:]

    real = st.sampled_from(world.archives)
    archive, passphrase = data.draw(st.one_of(
        real,
        st.builds(lambda a, n: (a[0][:n % len(a[0])], a[1]), real, st.integers(0, 10**6)),
        st.builds(lambda a, p, b: (mutate(a[0], p, b), a[1]), real, st.integers(0, 10**6), st.integers(0, 255)),
        st.tuples(st.binary(max_size=500), texts),
        st.tuples(st.sampled_from([b"\xff\xfe\xfd", b"{\"memories\": [\"\xc3\x28\"]}", b"PK\x03\x04", b""]),
                  st.just("")),
    ))
    if data.draw(st.booleans()):
        passphrase = data.draw(texts)
    world.send("ImportMemories", svc.ImportMemoriesRequest(
        subject=data.draw(st.one_of(st.just("user-fuzz-import"), subjects)), archive=archive, passphrase=passphrase))


# Structured archives: valid framing (JSON, plain or sealed) around any JSON value in any field,
# spelled as JSON may spell it (numbers of any size, NaN, lone surrogate escapes, names given
# twice), so the archive's own reader is fuzzed, not only the JSON parser.


class Spelled(str):
    """JSON text put into an archive as it is: what json.dumps cannot write, or will not."""


class Pairs(list[tuple[str, Any]]):
    """A JSON object as its name/value pairs, so a name can be given twice."""


def spell(value: Any) -> str:
    if isinstance(value, Spelled):
        return str(value)
    if isinstance(value, dict):
        value = Pairs(value.items())
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(name)}:{spell(v)}" for name, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(spell(v) for v in value) + "]"
    return json.dumps(value)  # NaN and Infinity as Python spells them; a lone surrogate as its escape


archive_leaves = st.one_of(  # each kind of trouble as likely as the ordinary values
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(st.characters(codec="utf-8"), max_size=20)),
    # Numbers json.dumps will not write: beyond a double from 309 digits, beyond int() from 4301.
    st.builds(lambda sign, n: Spelled(sign + "1" * n), st.sampled_from(["", "-"]), st.integers(300, 5000)),
    st.sampled_from(["1e400", "-1e400", "1E+99999", "NaN", "Infinity", "-Infinity", "4.9e-324", str(2**64), "-0",
                     "0." + "0" * 400 + "1", "[" * 900 + "]" * 900, "[" * 1200 + "]" * 1200]).map(Spelled),
    # A lone surrogate, which json.dumps spells as an escape.
    st.builds(lambda c, t: t[:3] + chr(c) + t[3:], st.integers(0xD800, 0xDFFF), st.text(max_size=6)),
    st.sampled_from(["", "\x00", "x" * 9000, "fact", "session", "0000-01-01T00:00:00Z", "10000-01-01T00:00:00Z",
                     "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+01:00", "2025-13-40T25:61:00Z",
                     "2025-03-01T12:00:00", "253402300800", "\udbff\udc00"]),  # the last a pair: one character
)
archive_names = st.one_of(st.text(st.characters(codec="utf-8"), max_size=8),
                          st.sampled_from(["", "format", "importance", "k\ud800", "\udc00"]))
archive_values = st.recursive(
    archive_leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(archive_names, inner, max_size=4)),
    max_leaves=12,
)
plain_values = st.recursive(  # what a Write's data may hold
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False),
              st.text(st.characters(codec="utf-8"), max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
stamps = st.one_of(
    st.datetimes(max_value=datetime(2099, 12, 31), timezones=st.just(UTC)).map(lambda t: t.isoformat()),
    st.sampled_from(["0001-01-01T00:00:00+00:00", "1970-01-01T00:00:00Z", "2025-03-01T12:00:00.123456-12:00"]),
)
unit = st.one_of(st.floats(0, 1), st.sampled_from([0, 1, 5e-324, 1.0 - 1e-16]))
labels = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=12)


ARCHIVED_FIELDS = ["category", "key", "text", "data", "importance", "confidence", "stability", "pinned", "tags",
                   "valid_from", "valid_until", "scope", "session_id", "provenance", "created_at", "updated_at",
                   "version"]


@st.composite
def valid_entries(draw: st.DrawFn) -> dict[str, Any]:
    """A memory as an archive holds it, every field a valid value (many at their limits)."""
    category = draw(st.sampled_from([c.value for c in Category]))
    scope = draw(st.sampled_from([s.value for s in Scope]))
    return {
        "category": category,
        "key": "" if category in ("event", "decision") else draw(st.sampled_from(["home_city", "drink", "k" * 128])),
        "text": draw(labels),
        "data": draw(st.dictionaries(st.text(max_size=8), plain_values, max_size=4)),
        "importance": draw(unit), "confidence": draw(unit),
        "stability": draw(st.sampled_from([s.value for s in Stability])),
        "pinned": draw(st.booleans()),
        "tags": draw(st.lists(labels, max_size=4)),
        "valid_from": draw(stamps),
        "valid_until": draw(st.sampled_from(["9999-12-31T23:59:59.999999Z", "2100-01-01T00:00:00+14:00"])),
        "scope": scope, "session_id": "s-1" if scope == "session" else "",
        "provenance": {"agent": draw(st.text(max_size=8)),
                       "source_kind": draw(st.sampled_from([k.value for k in SourceKind])),
                       "source_turn_id": draw(st.sampled_from(["", "turn-1"]))},
        "created_at": draw(stamps), "updated_at": draw(stamps),
        "version": draw(st.integers(1, 2**63 - 1)),
    }


@st.composite
def archive_objects(draw: st.DrawFn, valid: dict[str, Any], wrong: int, required: frozenset[str],
                    wild: str = "") -> Pairs:
    """``valid`` with each field kept, left out (unless ``required``), or (``wrong`` in 100, and
    always the one named ``wild``) any value; sometimes with a name the format does not have,
    or one given twice."""
    pairs = Pairs()
    for name, value in valid.items():
        roll = draw(st.integers(0, 99))
        if name == wild:
            pairs.append((name, draw(st.one_of(archive_leaves, archive_values))))
        elif roll >= 100 - wrong:
            pairs.append((name, draw(archive_values)))
        elif name in required or roll >= 10:
            pairs.append((name, value))
    if draw(st.integers(0, 99)) < wrong:
        name = draw(st.one_of(st.sampled_from(list(valid)), archive_names))
        pairs.insert(draw(st.integers(0, len(pairs))), (name, draw(archive_values)))
    return pairs


@st.composite
def archives(draw: st.DrawFn) -> Pairs:
    """An archive with one field of its first memory or of itself (``wild``) any value, and
    (``wrong`` in 100) any others: valid, at the limits, if ``wild`` is empty and ``wrong`` 0."""
    wrong = draw(st.sampled_from([0, 0, 5, 20]))
    wild = draw(st.sampled_from([*ARCHIVED_FIELDS, "exported_at", "subject", "version", ""]))
    entries = [draw(archive_objects(draw(valid_entries()), wrong, frozenset({"category", "text"}),
                                    wild if i == 0 else "")) for i in range(draw(st.integers(0, 3)))]
    document = {"format": "memoryd-export", "version": 1, "exported_at": draw(stamps),
                "subject": draw(st.one_of(st.just(SUBJECT), st.text(max_size=8))), "memories": entries}
    return draw(archive_objects(document, wrong, frozenset({"format", "version", "memories"}),
                                wild if wild in document else ""))


@FUZZ
@given(data=st.data())
def test_import_of_structured_archives(world: World, data: st.DataObject) -> None:
    archive = spell(data.draw(archives())).encode()
    passphrase = ""
    if data.draw(st.integers(0, 2)) == 0:  # a third sealed; then sometimes a header field is any value
        passphrase = "correct horse battery staple"
        envelope = Pairs(json.loads(seal(archive, passphrase)).items())
        if data.draw(st.booleans()):
            i = data.draw(st.integers(0, len(envelope) - 1))
            envelope[i] = (envelope[i][0], data.draw(archive_values))
        archive = spell(envelope).encode()
    code = world.send("ImportMemories", svc.ImportMemoriesRequest(subject="user-fuzz-import", archive=archive,
                                                                  passphrase=passphrase))
    if code is not grpc.StatusCode.OK:  # whatever is wrong is the archive's, and it says where
        assert world.last_error is not None
        refused = failure(world.last_error)
        assert code is grpc.StatusCode.INVALID_ARGUMENT and refused.reason == "ARCHIVE_INVALID", refused
        assert refused.violations and all(f.startswith("archive") or f == "passphrase" for f in refused.violations), \
            refused


@FUZZ
@given(data=st.data())
def test_put_view(world: World, data: st.DataObject) -> None:
    def rule() -> pb.ViewRule:
        r = pb.ViewRule(key_patterns=data.draw(st.lists(texts, max_size=3)))
        return _set_enum(r, "category", data.draw(enums))  # type: ignore[return-value]

    view = pb.View(
        agent=data.draw(texts.filter(lambda a: a not in ("fuzzer", "ops"))),
        read_rules=[rule() for _ in range(data.draw(st.integers(0, 3)))],
        write_rules=[rule() for _ in range(data.draw(st.integers(0, 3)))],
        may_erase=data.draw(st.booleans()),
        visible_fields=data.draw(st.lists(st.one_of(st.sampled_from(ALL_FIELDS), texts), max_size=5)),
        description=data.draw(texts), version=data.draw(st.integers(-(2**63), 2**63 - 1)))
    for value in data.draw(st.lists(enums, max_size=3)):
        view.MergeFromString(varint((8 << 3) | 0) + varint(value & 0xFFFFFFFFFFFFFFFF))
    world.send("PutView", admin.PutViewRequest(view=view, expected_version=data.draw(
        st.integers(-(2**63), 2**63 - 1))))
    world.send("GetView", admin.GetViewRequest(agent=data.draw(texts)))
    world.send("ListViews", admin.ListViewsRequest(page_size=data.draw(int32s), page_token=data.draw(texts)))
    # A non-admin may not touch views at all.
    world.send("DeleteView", admin.DeleteViewRequest(agent=data.draw(texts)), caller=world.agent)


@FUZZ
@given(method=st.sampled_from(MEMORY_METHODS + ADMIN_METHODS), payload=st.one_of(
    st.binary(max_size=300),
    # A valid tag for a string field followed by bytes that are not UTF-8.
    st.builds(lambda n, b: varint((n << 3) | 2) + varint(len(b)) + b, st.integers(1, 8),
              st.binary(min_size=1, max_size=40).map(lambda b: b"\xff" + b)),
    # A length that runs past the end.
    st.builds(lambda n: varint((n << 3) | 2) + varint(1000) + b"ab", st.integers(1, 8)),
))
def test_undecodable_bytes(world: World, method: str, payload: bytes) -> None:
    world.send(method, payload)


@FUZZ
@given(data=st.data())
def test_erase(world: World, data: st.DataObject) -> None:
    request = svc.EraseRequest(subject=data.draw(st.one_of(st.just("user-fuzz-erase"), texts)),
                               reason=data.draw(texts))
    selector = data.draw(st.sampled_from(["ids", "key", "source_turn_id", "category", "all_of_subject", "none"]))
    if selector == "ids":
        request.ids.ids.extend(data.draw(st.lists(st.one_of(st.sampled_from(world.ids), st.uuids().map(str), texts),
                                                  max_size=5)))
    elif selector in ("key", "source_turn_id"):
        setattr(request, selector, data.draw(texts))
    elif selector == "category":
        _set_enum(request, "category", data.draw(enums))
    elif selector == "all_of_subject":
        request.all_of_subject = data.draw(st.booleans())
    _set_enum(request, "mode", data.draw(enums))
    world.send("Erase", request)


@FUZZ
@given(method=st.sampled_from(MEMORY_METHODS), token=st.one_of(st.text(st.characters(codec="utf-8"), max_size=200), st.sampled_from(
    ["", "Bearer", "Bearer ", "Bearer a.b.c", "bearer x", "Basic Zm9vOmJhcg=="])))
def test_bad_tokens(world: World, method: str, token: str) -> None:
    payload = GetMessageClass(REQUESTS[method])(subject=SUBJECT).SerializeToString() \
        if "subject" in REQUESTS[method].fields_by_name else b""
    path = f"/memoryd.v1.MemoryService/{method}"
    metadata = (("authorization", token),) if token.isascii() and token.isprintable() else ()
    before = world.snapshot()
    with pytest.raises(grpc.RpcError) as raised:
        if method in STREAMING:
            list(world.channel.unary_stream(path)(payload, metadata=metadata, timeout=60))
        else:
            world.channel.unary_unary(path)(payload, metadata=metadata, timeout=60)
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED, (method, raised.value.details())  # type: ignore[attr-defined]
    assert world.snapshot() == before


# ---------------------------------------------------------------------------------------------
# Explicit cases (class 8): a control character or line break in every string field of every
# request. Each once risked INTERNAL (a tag reached the vector index's expression compiler).

CONTROL_CHARACTERS = {"soh": "\x01", "tab": "\t", "lf": "\n", "cr": "\r", "vt": "\x0b", "esc": "\x1b",
                      "del": "\x7f", "nel": "\x85", "c1": "\x9f", "line-separator": "\u2028",
                      "paragraph-separator": "\u2029", "zero-width-space": "\u200b", "bom": "\ufeff"}


def _baselines(world: World) -> dict[str, Message]:
    """A valid request per method, every string field filled, so each one is exercised."""
    recall_filter = pb.MemoryFilter(keys=["home_city"], tags=["vip"], session_id="s-1", include_org=True)
    session_draft = draft("fact", "likes oolong tea", key="drink", tags=["vip"], scope=pb.SCOPE_SESSION,
                          session_id="s-1", source_turn_id="t-1")
    view = pb.View(agent="ctl-agent", read_rules=[pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=["home_*"])],
                   write_rules=[pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=["home_*"])],
                   visible_fields=["key", "text"], description="a view")
    archive, passphrase = world.archives[1]
    return {
        "Write": svc.WriteRequest(subject="user-fuzz-ctl", items=[session_draft], idempotency_key="idem-ctl"),
        "WriteTurns": svc.WriteRequest(subject="user-fuzz-ctl", turns=[pb.Turn(turn_id="t-1", speaker="user",
                                                                               text="hello")]),
        "Recall": svc.RecallRequest(subject=SUBJECT, query="tea", keys=["home_city"], filter=recall_filter),
        "RecallContext": svc.RecallRequest(subject=SUBJECT, context=[
            pb.Turn(turn_id="t-1", speaker="user", text="the tea", time=timestamp_pb2.Timestamp(seconds=1_714_550_400)),
            pb.Turn(turn_id="t-2", speaker="assistant", text="oolong?",
                    time=timestamp_pb2.Timestamp(seconds=1_714_550_460))]),
        "MemoryView": svc.MemoryViewRequest(subject=SUBJECT, filter=recall_filter, page_token=world.page_tokens[0]),
        "GetHistory": svc.GetHistoryRequest(subject=SUBJECT, memory_id=world.ids[0],
                                            page_token=world.page_tokens[-1]),
        "GetExtractionJob": svc.GetExtractionJobRequest(subject=SUBJECT, job_id=world.ids[0]),
        "ResolveConflict": svc.ResolveConflictRequest(subject=SUBJECT, memory_id=world.ids[0],
                                                      pending_id=world.ids[1],
                                                      resolution=svc.CONFLICT_RESOLUTION_KEEP_CURRENT),
        "ExportMemories": svc.ExportMemoriesRequest(subject=SUBJECT, passphrase=passphrase),
        "ImportMemories": svc.ImportMemoriesRequest(subject="user-fuzz-ctl", archive=archive, passphrase=passphrase),
        "EraseKey": svc.EraseRequest(subject="user-fuzz-ctl", key="drink", mode=svc.ERASE_MODE_FORGET,
                                     reason="a reason"),
        "EraseTurn": svc.EraseRequest(subject="user-fuzz-ctl", source_turn_id="t-9", mode=svc.ERASE_MODE_FORGET),
        "EraseIds": svc.EraseRequest(subject="user-fuzz-ctl", ids=svc.MemoryIds(ids=[world.ids[0]]),
                                     mode=svc.ERASE_MODE_FORGET),
        "PutView": admin.PutViewRequest(view=view),
        "GetView": admin.GetViewRequest(agent="ctl-agent"),
        "ListViews": admin.ListViewsRequest(page_token="x"),
        "DeleteView": admin.DeleteViewRequest(agent="ctl-agent-gone"),
    }


def _string_fields(message: Message, path: str = "") -> Iterator[tuple[str, Message, str, int]]:
    """(path, owner, name, index or -1) of every set string field, nested messages included."""
    for descriptor, value in message.ListFields():
        where = f"{path}{descriptor.name}"
        repeated = not isinstance(value, (str, Message))  # a repeated field is a container
        if descriptor.type == descriptor.TYPE_STRING:
            for i in range(len(value)) if repeated else [-1]:
                yield (f"{where}[{i}]" if repeated else where), message, descriptor.name, i
        elif descriptor.type == descriptor.TYPE_MESSAGE and descriptor.message_type.full_name.startswith("memoryd."):
            for i, child in enumerate(value) if repeated else [(-1, value)]:
                yield from _string_fields(child, f"{where}[{i}]." if repeated else f"{where}.")


@pytest.mark.parametrize("case", ["Write", "WriteTurns", "Recall", "RecallContext", "MemoryView", "GetHistory",
                                  "GetExtractionJob", "ResolveConflict", "ExportMemories", "ImportMemories", "EraseKey",
                                  "EraseTurn", "EraseIds", "PutView", "GetView", "ListViews", "DeleteView"])
def test_a_control_character_in_any_string_field_is_never_internal(world: World, case: str) -> None:
    baseline = _baselines(world)[case]
    method = {"WriteTurns": "Write", "RecallContext": "Recall", "EraseKey": "Erase", "EraseTurn": "Erase",
              "EraseIds": "Erase"}.get(case, case)
    fields = [path for path, *_ in _string_fields(baseline)]
    assert fields, "the baseline fills its string fields"
    sent = 0
    for path in fields:
        for char in CONTROL_CHARACTERS.values():
            request = type(baseline)()
            request.CopyFrom(baseline)
            _, owner, name, index = next(f for f in _string_fields(request) if f[0] == path)
            old = getattr(owner, name)[index] if index >= 0 else getattr(owner, name)
            new = old[:1] + char + old[1:]  # inside the value: a stripped end would not hide it
            if index >= 0:
                getattr(owner, name)[index] = new
            else:
                setattr(owner, name, new)
            world.send(method, request)  # OK or a client error, never INTERNAL; refused changes nothing
            sent += 1
    assert sent == len(fields) * len(CONTROL_CHARACTERS)

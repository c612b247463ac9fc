"""Watch (issue 43): the changes the caller's view reads, each presented as a read presents
it, in commit order, resumable from a sealed cursor.

Each test runs a server of its own (``watch_rig``) on a fresh database, with a heartbeat short
enough that a stream's first heartbeat says it has started.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import psycopg
import pytest
from grpc_status import rpc_status
from google.rpc import error_details_pb2

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import draft, full_view, rule
from .watch_rig import Rig, Stream, config_for, running, watch

KIND = svc.MemoryChangeKind


def reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason
    return ""


def violations(error: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    fields = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            fields += [v.field for v in bad.field_violations]
    return fields


async def test_every_kind_of_change_is_delivered_as_a_read_shows_it(rig: Rig):
    stream = Stream(rig, watch(), rig.meta())
    await stream.started()
    written = await rig.write("alice", draft("fact", "lives in Lyon", key="city"))
    memory_id = written.results[0].memory_id
    await rig.write("alice", draft("fact", "lives in Paris", key="city"))
    await rig.erase(svc.EraseRequest(subject="alice", key="city", mode=svc.ERASE_MODE_FORGET))
    other = (await rig.write("alice", draft("event", "flew to Rome"))).results[0].memory_id
    # Its creation is read before the purge: read after it, the creation is gone with its
    # content (the next test), and only the erasure is told.
    got = [m.change for m in await stream.changes(4)]
    await rig.erase(svc.EraseRequest(subject="alice", ids=svc.MemoryIds(ids=[other]), mode=svc.ERASE_MODE_PURGE))
    got += [m.change for m in await stream.changes(1)]
    assert [c.kind for c in got] == [KIND.MEMORY_CHANGE_KIND_CREATED, KIND.MEMORY_CHANGE_KIND_CHANGED,
                                     KIND.MEMORY_CHANGE_KIND_FORGOTTEN, KIND.MEMORY_CHANGE_KIND_CREATED,
                                     KIND.MEMORY_CHANGE_KIND_ERASED]
    assert [c.memory.text for c in got[:2]] == ["lives in Lyon", "lives in Paris"]
    assert [c.memory.version for c in got[:3]] == [1, 2, 3]
    assert got[0].memory.id == memory_id and got[0].memory.status == pb.MEMORY_STATUS_ACTIVE
    assert got[2].memory.status == pb.MEMORY_STATUS_FORGOTTEN
    # What a read of the memory shows of it, field for field.
    listed = await rig.memory.MemoryView(svc.MemoryViewRequest(subject="alice", statuses=[pb.MEMORY_STATUS_FORGOTTEN]),
                                         metadata=rig.meta())
    assert [m.text for m in listed.memories] == ["lives in Paris"]
    for name in ("id", "subject", "key", "text", "category", "version", "status"):
        assert getattr(got[2].memory, name) == getattr(listed.memories[0], name), name
    erased = got[4].memory
    assert (erased.id, erased.subject, erased.category, erased.text) == (other, "alice", pb.CATEGORY_EVENT, "")
    stream.close()


async def test_a_memory_purged_before_a_stream_reads_it_is_told_only_as_erased(rig: Rig):
    stream = Stream(rig, watch(), rig.meta())
    cursor = await stream.started()
    stream.close()
    purged = (await rig.write("alice", draft("event", "flew to Rome"))).results[0].memory_id
    await rig.erase(svc.EraseRequest(subject="alice", ids=svc.MemoryIds(ids=[purged]), mode=svc.ERASE_MODE_PURGE))
    kept = (await rig.write("alice", draft("event", "flew to Oslo"))).results[0].memory_id
    resumed = Stream(rig, watch(cursor=cursor), rig.meta())
    got = [m.change for m in await resumed.changes(2)]
    assert [(c.kind, c.memory.id, c.memory.text) for c in got] == [
        (KIND.MEMORY_CHANGE_KIND_ERASED, purged, ""), (KIND.MEMORY_CHANGE_KIND_CREATED, kept, "flew to Oslo")]
    resumed.close()


async def test_the_field_mask_applies_and_a_hidden_field_change_sends_nothing(rig: Rig):
    await rig.put_view(full_view("masked", visible_fields=["id", "key", "text", "category"]))
    stream = Stream(rig, watch(), rig.meta("masked"))
    await stream.started()
    await rig.write("alice", draft("fact", "lives in Lyon", key="city", importance=0.2))
    await rig.write("alice", draft("fact", "lives in Lyon", key="city", importance=0.9))  # importance is hidden
    await rig.write("alice", draft("fact", "lives in Paris", key="city", importance=0.9))
    got = await stream.quiet_until_heartbeat()
    assert [(m.change.kind, m.change.memory.text) for m in got] == [
        (KIND.MEMORY_CHANGE_KIND_CREATED, "lives in Lyon"), (KIND.MEMORY_CHANGE_KIND_CHANGED, "lives in Paris")]
    shown = got[0].change.memory
    assert shown.version == 0 and shown.importance == 0 and not shown.HasField("updated_at")
    assert shown.key == "city" and shown.id
    stream.close()


async def test_nothing_is_sent_for_what_the_view_cannot_read(rig: Rig):
    await rig.put_view(full_view("billing", read_rules=[rule("fact", "billing_*")]))
    stream = Stream(rig, watch(), rig.meta("billing"))
    await stream.started()
    await rig.write("alice", draft("fact", "Paris", key="city"), draft("preference", "tea", key="drink"))
    await rig.write("alice", draft("fact", "visa", key="billing_card"))
    await rig.write("bob", draft("fact", "amex", key="billing_card"))
    got = await stream.quiet_until_heartbeat()
    assert [(m.change.memory.subject, m.change.memory.key) for m in got] == [("alice", "billing_card")]
    stream.close()


async def test_a_resumed_stream_delivers_every_later_change_once_and_nothing_before(rig: Rig):
    stream = Stream(rig, watch(), rig.meta())
    await stream.started()
    for text in ("one", "two", "three"):
        await rig.write("alice", draft("event", text))
    got = await stream.changes(3)
    stream.close()
    for text in ("four", "five"):
        await rig.write("alice", draft("event", text))
    resumed = Stream(rig, watch(cursor=got[1].cursor), rig.meta())
    again = await resumed.quiet_until_heartbeat()
    assert [m.change.memory.text for m in again] == ["three", "four", "five"]
    resumed.close()


async def test_a_cursor_is_bound_to_the_caller_and_the_request(rig: Rig):
    await rig.put_view(full_view("agent-2"))
    stream = Stream(rig, watch(), rig.meta())
    cursor = await stream.started()
    stream.close()
    for request, meta in ((watch("bob", cursor=cursor), rig.meta()), (watch(cursor=cursor), rig.meta("agent-2")),
                          (watch(cursor=cursor, include_org=True), rig.meta()),
                          (watch(cursor=cursor, categories=[pb.CATEGORY_FACT]), rig.meta()),
                          (watch(cursor="not-a-cursor"), rig.meta())):
        refused = Stream(rig, request, meta)
        error = await refused.error()
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert violations(error) == ["cursor"]


@pytest.mark.parametrize(("request_", "fields"), [
    (svc.WatchRequest(), ["subject"]),
    (svc.WatchRequest(subject="alice", all_subjects=True), ["subject"]),
    (svc.WatchRequest(subject="a b"), ["subject"]),
    (svc.WatchRequest(subject="alice", categories=[99]), ["categories[0]"]),
    (svc.WatchRequest(subject="alice", cursor="x" * 2000), ["cursor"]),
], ids=["no-subject", "subject-and-all", "bad-subject", "unknown-category", "huge-cursor"])
async def test_bad_input_is_refused_with_field_violations(rig: Rig, request_: svc.WatchRequest, fields: list[str]):
    error = await Stream(rig, request_, rig.meta()).error()
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(error) == fields


async def test_every_subject_only_for_a_credential_bound_to_none(rig: Rig):
    error = await Stream(rig, watch("", all_subjects=True), rig.meta(subject="alice")).error()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and reason(error) == "SUBJECT_NOT_ALLOWED"
    error = await Stream(rig, watch("bob"), rig.meta(subject="alice")).error()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    stream = Stream(rig, watch("", all_subjects=True), rig.meta())
    await stream.started()
    await rig.write("alice", draft("event", "a"))
    await rig.write("bob", draft("event", "b"))
    assert [m.change.memory.subject for m in await stream.changes(2)] == ["alice", "bob"]
    stream.close()


async def test_a_heartbeat_with_a_cursor_arrives_on_an_idle_stream(rig: Rig):
    stream = Stream(rig, watch(), rig.meta())
    message = await stream.next()
    assert message.HasField("heartbeat") and message.heartbeat.server_time.seconds > 0 and message.cursor
    stream.close()


async def test_a_stream_runs_through_the_interceptor_chain_and_is_audited_once(rig: Rig, private_database: str):
    stream = Stream(rig, watch(), (*rig.meta(), ("x-request-id", "watch-req-1")))
    await stream.started()
    await rig.write("alice", draft("event", "seen"))
    await stream.changes(1)
    await stream.quiet_until_heartbeat()
    stream.close()
    refused = Stream(rig, watch("a b"), (*rig.meta(), ("x-request-id", "watch-req-2")))
    error = await refused.error()
    assert ("x-request-id", "watch-req-2") in tuple(error.trailing_metadata() or ())

    def audited() -> list[tuple[str, list[str]]]:
        with psycopg.connect(private_database) as conn:
            return [(r[0], r[1]) for r in conn.execute(
                "SELECT action, memory_ids::text[] FROM audit_log WHERE tenant_id = %s AND agent = 'agent-1'",
                (rig.tenant,)).fetchall()]

    for _ in range(300):  # the reads are recorded in batches, about once a second
        if audited():
            break
        await asyncio.sleep(0.1)
    assert audited() == [("read.watch", [])]


async def test_a_subjects_erasure_leaves_one_event_and_nothing_of_the_subject(rig: Rig):
    stream = Stream(rig, watch(), rig.meta())
    before = await stream.started()
    await rig.write("alice", draft("fact", "Lyon", key="city"), draft("event", "flew"))
    await stream.changes(2)
    await rig.erase(svc.EraseRequest(subject="alice", all_of_subject=True, mode=svc.ERASE_MODE_PURGE))
    got = await stream.quiet_until_heartbeat()
    assert [(m.change.kind, m.change.memory.subject, m.change.memory.id) for m in got] == [
        (KIND.MEMORY_CHANGE_KIND_SUBJECT_ERASED, "alice", "")]
    stream.close()
    # Resumed from before the erasure: nothing of the subject is left to send but its erasure.
    replay = Stream(rig, watch(cursor=before), rig.meta())
    assert [m.change.kind for m in await replay.quiet_until_heartbeat()] == [KIND.MEMORY_CHANGE_KIND_SUBJECT_ERASED]
    replay.close()


async def test_streams_over_the_cap_are_refused(private_database: str, key_file: Path, tmp_path: Path):
    async with running(config_for(private_database, tmp_path, key_file, max_streams_per_tenant=2), key_file) as rig:
        await rig.put_view(full_view("agent-1"))
        open_ = [Stream(rig, watch(), rig.meta()) for _ in range(2)]
        for stream in open_:
            await stream.started()
        error = await Stream(rig, watch(), rig.meta()).error()
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and reason(error) == "TOO_MANY_STREAMS"
        open_[0].close()
        await asyncio.sleep(0)  # the closed stream's slot is given back when its call ends
        later = Stream(rig, watch(), rig.meta())
        for _ in range(50):
            try:
                await later.started()
                break
            except grpc.aio.AioRpcError:
                later = Stream(rig, watch(), rig.meta())
                await asyncio.sleep(0.1)
        else:
            pytest.fail("no stream once one had closed")
        for stream in (*open_, later):
            stream.close()


async def test_a_session_summary_arrives_with_the_expiry_a_read_shows(rig: Rig):
    # EndSession sets the summary's expiry in the transaction that wrote it: the version the
    # stream presents must carry it, as MemoryView does, not the version as first recorded.
    stream = Stream(rig, watch(), rig.meta())
    await stream.started()
    await rig.memory.Write(svc.WriteRequest(subject="alice", session_id="chat-1",
                                            items=[draft("preference", "window seats on long flights", key="seat")]),
                           metadata=rig.meta("writer"))
    ended = await rig.memory.EndSession(svc.EndSessionRequest(subject="alice", session_id="chat-1"),
                                        metadata=rig.meta("writer"))
    got = [m.change for m in await stream.changes(2)]
    summary = next(c.memory for c in got if c.memory.key == "session.summary")
    assert ended.snapshot.summary.expires_at.seconds > 0
    assert summary.expires_at == ended.snapshot.summary.expires_at
    stream.close()

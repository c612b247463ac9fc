"""An open Watch follows its caller's credential and view (issue 43): a revoked or expired
token ends it as a new call would be refused, a deleted view ends it, a narrowed view narrows
what it sends — within the view cache time (0.2 s in these servers)."""

from __future__ import annotations


import grpc

from memoryd.storage import Postgres, PostgresRevocations, PostgresSettings

from ..support import draft, full_view, rule
from .test_watch import reason
from .watch_rig import Rig, Stream, watch


async def test_a_revoked_token_ends_the_stream_as_a_new_call_is_refused(rig: Rig, private_database: str):
    stream = Stream(rig, watch(), rig.meta(token_id="watcher-token"))
    await stream.started()
    await rig.write("alice", draft("event", "before"))
    assert [m.change.memory.text for m in await stream.changes(1)] == ["before"]
    db = Postgres(PostgresSettings(private_database))
    await db.open()
    try:
        await PostgresRevocations(db).revoke(rig.tenant, "watcher-token", None, revoked_by="ops")
    finally:
        await db.close()
    error = await stream.error()
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED and reason(error) == "TOKEN_INVALID"
    refused = await Stream(rig, watch(), rig.meta(token_id="watcher-token")).error()
    assert (refused.code(), reason(refused)) == (error.code(), reason(error))


async def test_an_expired_token_ends_the_stream(rig: Rig):
    stream = Stream(rig, watch(), rig.meta(ttl_seconds=2))
    await stream.started()
    error = await stream.error()
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_deleted_view_ends_the_stream(rig: Rig):
    stream = Stream(rig, watch(), rig.meta())
    await stream.started()
    await rig.delete_view("agent-1")
    error = await stream.error()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and reason(error) == "VIEW_MISSING"


async def test_a_narrowed_view_narrows_the_stream(rig: Rig):
    stream = Stream(rig, watch(), rig.meta())
    await stream.started()
    await rig.write("alice", draft("fact", "Lyon", key="city"), draft("preference", "tea", key="drink"))
    assert len(await stream.changes(2)) == 2
    await rig.put_view(full_view("agent-1", read_rules=[rule("preference")], visible_fields=["key", "text"]))
    await stream.quiet_until_heartbeat(beats=3)  # past the view cache time
    await rig.write("alice", draft("fact", "Paris", key="city"), draft("preference", "coffee", key="drink"))
    got = await stream.quiet_until_heartbeat()
    assert [(m.change.memory.key, m.change.memory.text, m.change.memory.id) for m in got] == [
        ("drink", "coffee", "")]
    stream.close()

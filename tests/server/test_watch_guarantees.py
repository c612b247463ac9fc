"""What Watch promises across time (issue 43): exactly once and in commit order under
concurrent writers, across a server restart, to a reader that stopped reading for a while, and
a clear error for a cursor older than the change log keeps."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
from memoryd.domain import TenantPolicy

from memoryd.server import Memoryd, Scoring
from memoryd.storage import LifecycleSweeper, Postgres, PostgresSettings

from ..support import draft, full_view
from .test_watch import reason
from .watch_rig import Rig, Stream, config_for, running, watch


async def test_concurrent_writers_each_change_once_in_commit_order(rig: Rig, private_database: str):
    writers, each = 8, 12
    stream = Stream(rig, watch(), rig.meta())
    before = await stream.started()

    async def writer(n: int) -> None:
        for i in range(each):  # one writer's writes commit one after the other
            await rig.write("alice", draft("event", f"w{n}-{i:02d}"))

    await asyncio.gather(*(writer(n) for n in range(writers)))
    got_changes = await stream.changes(writers * each)
    got = [m.change.memory.text for m in got_changes]
    assert sorted(got) == sorted(f"w{n}-{i:02d}" for n in range(writers) for i in range(each))  # none lost, no twice
    by_writer: dict[str, list[str]] = defaultdict(list)
    for text in got:
        by_writer[text.split("-")[0]].append(text)
    assert all(texts == sorted(texts) for texts in by_writer.values())
    # The order delivered is the log's order, which is the commit order.
    db = Postgres(PostgresSettings(private_database))
    await db.open()
    try:
        async with db.tenant_tx(rig.tenant) as conn:
            cur = await conn.execute("SELECT memory_id::text AS id FROM memory_changes WHERE tenant_id = %s "
                                     "ORDER BY seq", (rig.tenant,))
            logged = [r["id"] for r in await cur.fetchall()]
    finally:
        await db.close()
    assert [m.change.memory.id for m in got_changes] == logged
    assert not await stream.quiet_until_heartbeat()
    stream.close()
    # Read again from before the writes: the same changes, in the same order.
    replay = Stream(rig, watch(cursor=before), rig.meta())
    assert [m.change.memory.id for m in await replay.changes(writers * each)] == logged
    replay.close()


async def test_a_slow_reader_later_receives_everything_in_order(rig: Rig):
    call = rig.memory.Watch(watch(), metadata=rig.meta())
    assert (await call.read()).HasField("heartbeat")  # started; now nobody reads for a while
    texts = [f"note {i:03d} " + "x" * 2000 for i in range(300)]
    for i in range(0, len(texts), 50):
        await rig.write("alice", *(draft("event", t) for t in texts[i:i + 50]))
    got = []
    while len(got) < len(texts):
        message = await asyncio.wait_for(call.read(), 30)
        if message.HasField("change"):
            got.append(message.change.memory.text)
    assert got == texts
    call.cancel()


async def test_a_stream_resumes_on_a_restarted_server_exactly_after_its_cursor(private_database: str,
                                                                                key_file: Path, tmp_path: Path):
    config = config_for(private_database, tmp_path, key_file)
    async with running(config, key_file) as rig:
        tenant = rig.tenant
        await rig.put_view(full_view("agent-1"))
        stream = Stream(rig, watch(), rig.meta())
        await stream.started()
        for text in ("one", "two"):
            await rig.write("alice", draft("event", text))
        last = (await stream.changes(2))[-1].cursor
        stream.close()
        await rig.write("alice", draft("event", "three"))
    async with running(config, key_file) as again:
        again.tenant = tenant
        await again.write("alice", draft("event", "four"))
        resumed = Stream(again, watch(cursor=last), again.meta())
        assert [m.change.memory.text for m in await resumed.quiet_until_heartbeat()] == ["three", "four"]
        resumed.close()


async def test_a_cursor_older_than_the_log_keeps_is_refused_with_what_to_do(rig: Rig, private_database: str):
    stream = Stream(rig, watch(), rig.meta())
    old = await stream.started()
    await rig.write("alice", draft("event", "pruned"))
    await stream.changes(1)
    stream.close()
    db = Postgres(PostgresSettings(private_database))
    await db.open()
    try:
        sweeper = LifecycleSweeper(db, None, lambda _: TenantPolicy(), Scoring().half_life_days,
                                   change_retention=timedelta(0))
        await sweeper.sweep_tenant(rig.tenant, datetime.now(UTC) + timedelta(seconds=1))
    finally:
        await db.close()
    error = await Stream(rig, watch(cursor=old), rig.meta()).error()
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION and reason(error) == "CURSOR_EXPIRED"
    assert "MemoryView" in (error.details() or "") and "without a cursor" in (error.details() or "")
    fresh = Stream(rig, watch(), rig.meta())  # a new stream starts after the pruned log
    await fresh.started()
    await rig.write("alice", draft("event", "after"))
    assert [m.change.memory.text for m in await fresh.changes(1)] == ["after"]
    fresh.close()


async def test_open_streams_end_unavailable_when_the_server_stops(private_database: str, key_file: Path,
                                                                  tmp_path: Path):
    app = Memoryd(config_for(private_database, tmp_path, key_file))
    started = await app.start()
    stopped = False
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            rig = Rig(app, channel, key_file)
            await rig.put_view(full_view("agent-1"))
            stream = Stream(rig, watch(), rig.meta())
            await stream.started()
            stopping = asyncio.ensure_future(app.stop())
            error = await stream.error()
            await stopping
            stopped = True
    finally:
        if not stopped:
            await app.stop()
    assert error.code() == grpc.StatusCode.UNAVAILABLE

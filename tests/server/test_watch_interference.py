"""Non-interference, extended to Watch (issue 43): two worlds that differ only in what a
watcher cannot read — memories outside its rules, other subjects, and changes to fields its
view hides — send it the same stream, message for message.

Both worlds get the same visible writes in the same order; the second also gets, between
them, memories under keys and categories the watcher's view does not read (created, changed,
forgotten and purged), another subject's memories, and a new version of a visible memory that
changes only fields the view hides (importance, and with it the version, update time). The
streams must be equal once each world's ids are replaced by their order of appearance and the
cursors (sealed with a random nonce) are left out; resuming from the same place in each gives
the same rest (a memory purged since is not read again: only its erasure is told).
"""

from __future__ import annotations



from memoryd.v1 import memory_service_pb2 as svc

from ..support import draft, full_view, rule, unique
from .watch_rig import Rig, Stream, stripped, watch

# The watcher reads billing_* facts and events, and not their importance, versions or times.
PROBE = full_view("probe", read_rules=[rule("fact", "billing_*"), rule("event")],
                  visible_fields=["id", "key", "text", "category", "subject", "scope", "session_id", "status", "data",
                                  "tags", "confidence", "stability"])


async def _world(rig: Rig, tenant: str, hidden: bool) -> list[svc.WatchResponse]:
    await rig.put_view(full_view("writer"), tenant)
    await rig.put_view(PROBE, tenant)
    stream = Stream(rig, watch(), rig.meta("probe", tenant))
    await stream.started()

    async def write(*items, subject: str = "alice"):
        return await rig.write(subject, *items, tenant=tenant)

    async def erase(**kwargs):
        return await rig.erase(svc.EraseRequest(subject="alice", **kwargs), tenant=tenant)

    await write(draft("fact", "visa", key="billing_card", importance=0.5))
    if hidden:
        city = (await write(draft("fact", "Lyon", key="city"), draft("preference", "tea", key="drink"))).results[0]
        await write(draft("fact", "amex", key="billing_card"), subject="bob")
    await write(draft("event", "paid the invoice"))
    if hidden:
        # The same value with another importance: a new version, in fields the view hides only.
        await write(draft("fact", "visa", key="billing_card", importance=0.9))
        await write(draft("fact", "Paris", key="city"))
        await erase(key="drink", mode=svc.ERASE_MODE_FORGET)
        await erase(ids=svc.MemoryIds(ids=[city.memory_id]), mode=svc.ERASE_MODE_PURGE)
    await write(draft("fact", "mastercard", key="billing_card", importance=0.5))
    await erase(key="billing_card", mode=svc.ERASE_MODE_FORGET)
    event = (await write(draft("event", "called support"))).results[0].memory_id
    # The stream reads the event's creation before the purge (read after it, the creation is
    # gone with its content): in both worlds alike, not as the scheduler happens to order them.
    got = await stream.quiet_until_heartbeat()
    await erase(ids=svc.MemoryIds(ids=[event]), mode=svc.ERASE_MODE_PURGE)
    got += await stream.quiet_until_heartbeat()
    stream.close()
    return got


def _comparable(messages: list[svc.WatchResponse]) -> list[str]:
    """The messages without cursors, each world's ids replaced by their order of appearance."""
    ids: dict[str, str] = {}
    out = []
    for message in messages:
        shown = stripped(message)
        if shown.change.memory.id:
            shown.change.memory.id = ids.setdefault(shown.change.memory.id, f"id-{len(ids)}")
        out.append(str(shown))
    return out


async def test_two_worlds_differing_only_in_what_the_watcher_cannot_read_stream_alike(rig: Rig):
    plain, busy = unique("plain"), unique("busy")
    first = await _world(rig, plain, hidden=False)
    second = await _world(rig, busy, hidden=True)
    assert _comparable(first) == _comparable(second)
    assert [m.change.memory.text for m in first] == ["visa", "paid the invoice", "mastercard", "mastercard",
                                                     "called support", ""]
    # Resumed after the second message, each world gives the same rest.
    rests = []
    for tenant, stream in ((plain, first), (busy, second)):
        resumed = Stream(rig, watch(cursor=stream[1].cursor), rig.meta("probe", tenant))
        rests.append(_comparable(await resumed.quiet_until_heartbeat()))
        resumed.close()
    assert rests[0] == rests[1]
    # Read again after the purge, the purged memory's creation is gone with its content: only
    # its erasure is told.
    assert [m.change.memory.text for m in first[2:]][:-2] == ["mastercard", "mastercard"]
    assert len(rests[0]) == len(first[2:]) - 1 and "MEMORY_CHANGE_KIND_ERASED" in rests[0][-1]

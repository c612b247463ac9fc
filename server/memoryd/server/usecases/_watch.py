"""Watch: the changes the caller's view reads, in commit order, each presented as a read
presents it, from a sealed cursor.

Each stream pulls: it reads the change log (``StoreSession.changes_after``) from its own
position, a page at a time, only when woken — by a notification for its tenant (the process's
one LISTEN connection, ``WatchHub.wake``), by the hub's poll (``Watch.poll_seconds``: delivery
never rests on NOTIFY alone) or to send a heartbeat — reads what streams woken with it share
(``WatchHub.shared``), and hands gRPC one message at a time, so a
reader that does not read holds at most a page in the server and falls behind in the log
instead (flow control blocks the write).

What is sent: a created, changed or forgotten memory's version read through the read filter
the guard decided (``Guard.watch_filter``), presented with the view's field mask; a change
whose presentation equals the version before's is a change to hidden fields and sends nothing.
A purged memory's change shows what identifies it, if the view read it (``Guard.sees_erased``).
Rows the view cannot read only move the cursor, which every message (a heartbeat too) carries.

On every wake-up the caller is resolved again as the interceptor chain resolves it (``renew``):
a revoked token or a deleted view ends the stream, a narrowed view narrows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from itertools import groupby

from memoryd.domain import ChangeKind, FieldViolation, InvalidArgument, LoggedChange, ReadFilter, Unavailable
from memoryd.v1 import memory_service_pb2 as svc

from .. import present
from ..guard import Guard
from ..validation import WatchCommand
from ._services import CallContext
from ._streams import WatchHub

# The most changes a stream reads (and holds) at once.
PAGE = 100


def _binding(ctx: CallContext, cmd: WatchCommand) -> dict[str, object]:
    """What a cursor is bound to: the caller and the request."""
    return {"t": ctx.tenant, "a": ctx.guard.agent, "s": cmd.subject, "all": cmd.all_subjects,
            "c": sorted(c.value for c in cmd.categories), "o": cmd.include_org, "w": "watch"}


async def watch(ctx: CallContext, cmd: WatchCommand, renew: Callable[[], Awaitable[Guard]],
                opened: Callable[[], Awaitable[None]]) -> AsyncIterator[svc.WatchResponse]:
    hub = ctx.services.watch
    if hub is None:
        raise Unavailable("this server streams no changes")
    guard = ctx.guard
    flt = guard.watch_filter(cmd.subject, cmd.all_subjects, cmd.categories, cmd.include_org)
    pages, binding = ctx.services.page_tokens, _binding(ctx, cmd)
    if cmd.cursor:
        sealed = pages.decode(cmd.cursor, binding, field="cursor")
        if not isinstance(sealed.get("q"), str) or not sealed["q"].isdigit():
            raise InvalidArgument(FieldViolation("cursor", "is invalid or was not issued for this request"))
        position = int(sealed["q"])
    else:
        position = await ctx.session.change_head()
    subjects = None if cmd.all_subjects else [cmd.subject, *([""] if cmd.include_org else [])]
    settings = hub.settings

    def cursor() -> str:
        # Fixed width: the token's length says nothing of how far the log has come.
        return pages.encode(binding, {"q": f"{position:020d}"})

    with hub.stream(ctx.tenant) as wakeup:
        ctx.record_read(cmd.subject, "read.watch", [])
        # The start is fixed: say so now (response headers), not with the first change or the
        # first heartbeat, so a client knows every later commit will reach it.
        await opened()
        last_sent = time.monotonic()
        while True:
            wakeup.clear()
            woken = hub.wakes
            changes = await hub.shared((ctx.tenant, woken, position, cmd.all_subjects or tuple(subjects or ())),
                                       partial(ctx.session.changes_after, position, subjects, PAGE))
            for change, event in await _shown(ctx, hub, woken, guard, flt, changes):
                position = change.seq
                if event is not None:
                    yield present.changed(cursor(), event)
                    last_sent = time.monotonic()
            if len(changes) < PAGE:
                # Woken by a notification or the hub's poll; at the latest, for the heartbeat.
                wait = max(0.0, settings.heartbeat_seconds - (time.monotonic() - last_sent))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), timeout=wait)
            if hub.closing:
                raise Unavailable("the server is shutting down: Watch again with the last cursor")
            # The caller as a new call would be: revoked, view deleted or narrowed.
            guard = await renew()
            flt = guard.watch_filter(cmd.subject, cmd.all_subjects, cmd.categories, cmd.include_org)
            if time.monotonic() - last_sent >= settings.heartbeat_seconds:
                yield present.heartbeat(cursor(), datetime.now(UTC))
                last_sent = time.monotonic()


async def _shown(ctx: CallContext, hub: WatchHub, woken: int, guard: Guard, flt: ReadFilter,
                 changes: list[LoggedChange]) -> list[tuple[LoggedChange, svc.MemoryChange | None]]:
    """Each change with what the caller is sent of it (None: nothing)."""
    versions = {}
    read = [c for c in changes if c.kind in (ChangeKind.CREATED, ChangeKind.CHANGED, ChangeKind.FORGOTTEN)]
    # One read per subject: the filter is the subject's (with the organisation's, if asked).
    for subject, group in groupby(sorted(read, key=lambda c: c.subject), key=lambda c: c.subject):
        wanted = []
        for c in group:
            wanted.append((c.memory_id, c.version))
            if c.kind is ChangeKind.CHANGED:
                wanted.append((c.memory_id, c.version - 1))
        subject_flt = flt if subject == flt.subject or not subject else _for_subject(flt, subject)
        versions.update(await hub.shared((ctx.tenant, woken, subject_flt, tuple(wanted)),
                                         partial(ctx.session.change_versions, subject_flt, wanted)))
    shown: list[tuple[LoggedChange, svc.MemoryChange | None]] = []
    for c in changes:
        event = None
        if c.kind is ChangeKind.SUBJECT_ERASED:
            event = present.erased(guard, c) if guard.sees_subject_erased() else None
        elif c.kind is ChangeKind.ERASED:
            event = present.erased(guard, c) if guard.sees_erased(flt, c) else None
        elif (memory := versions.get((c.memory_id, c.version))) is not None:
            event = present.change(guard, c.kind, memory)
            before = versions.get((c.memory_id, c.version - 1)) if c.kind is ChangeKind.CHANGED else None
            if before is not None and present.change(guard, c.kind, before) == event:
                event = None  # only hidden fields changed
        shown.append((c, event))
    return shown


def _for_subject(flt: ReadFilter, subject: str) -> ReadFilter:
    """The watch filter (of every subject) narrowed to one subject's memories."""
    return replace(flt, subject=subject, labels=None)

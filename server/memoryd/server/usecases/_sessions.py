"""EndSession, ResumeSession and the idle timeout: a session's snapshot, made of memories.

Ending a session writes its summary (a SCOPE_SESSION CONTEXT memory under
``SESSION_SUMMARY_KEY``, source kind INFERENCE: memoryd wrote it, from the model or from the
memories' words — never a claim the user made) through the ending caller's view, from what
that view reads of the session alone; the snapshot then lives the tenant's
``session_snapshot_ttl_hours``. Resuming returns the latest ended, unexpired snapshot the
caller's view reads a memory of, each list capped at ``SNAPSHOT_CAP``. Both answers are built
through the guard's snapshot filter and the presenter, as a read is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memoryd.domain import (SESSION_SUMMARY_KEY, AuditTag, Category, Draft, NotFound, PermissionDenied, Scope,
                            SessionSnapshot, SourceKind)
from memoryd.storage import StoreSession
from memoryd.v1 import memory_service_pb2 as svc

from .._auth import Principal
from ..guard import Guard, guard_for
from ..ingest import SummaryInput, summary_of
from ..validation import SessionCommand
from ._services import CallContext, Services
from .. import present

SNAPSHOT_CAP = 100  # memories per list of a snapshot (explicit, inferred)
NO_SNAPSHOT = "no session snapshot of this subject to resume"


async def end_session(ctx: CallContext, cmd: SessionCommand) -> svc.EndSessionResponse:
    """End the session and answer with its snapshot as ResumeSession would show it to the
    caller (the session alone when the caller reads nothing of it)."""
    await _end(ctx, cmd.subject, cmd.session_id)
    snapshot = await ctx.session.session_snapshot(ctx.guard.snapshot_filter(cmd.subject), cmd.session_id,
                                                  datetime.now(UTC), cap=SNAPSHOT_CAP)
    if snapshot is not None:
        ctx.record_read(cmd.subject, "read.session", [m.id for m in snapshot.memories])
    return svc.EndSessionResponse(snapshot=present.snapshot(ctx.guard, cmd.session_id, snapshot))


async def resume_session(ctx: CallContext, cmd: SessionCommand) -> svc.ResumeSessionResponse:
    """The latest snapshot (or ``cmd.session_id``'s) the caller's view reads a memory of;
    NOT_FOUND alike whether none is stored, all expired, or the view reads none."""
    flt = ctx.guard.snapshot_filter(cmd.subject)
    snapshot = await ctx.session.session_snapshot(flt, cmd.session_id, datetime.now(UTC), cap=SNAPSHOT_CAP)
    if snapshot is None:
        raise NotFound(NO_SNAPSHOT)
    ctx.record_read(cmd.subject, "read.session", [m.id for m in snapshot.memories])
    return svc.ResumeSessionResponse(snapshot=present.snapshot(ctx.guard, snapshot.session_id, snapshot))


async def _end(ctx: CallContext, subject: str, session_id: str, idle_since: datetime | None = None) -> bool:
    """Summarise what the caller reads of the session, then end it with that summary (none
    if it reads nothing). Whether it ended (an idle one written in since does not)."""
    guard = ctx.guard
    flt = guard.snapshot_filter(subject)  # before anything is read: its answer is a snapshot
    item = guard.admit_summary(summary_draft(session_id, "-"))
    policy = ctx.services.policy_for(ctx.tenant)
    now = datetime.now(UTC)
    before = await ctx.session.session_snapshot(flt, session_id, now, ended=False, cap=SNAPSHOT_CAP)
    text = await summary_of(ctx.services.summarizer, summary_input(guard, before), policy.pii)
    return await ctx.session.end_session(subject, session_id, replace(item.draft, text=text) if text else None,
                                         blind=item.blind, expires_at=snapshot_expiry(ctx.services, ctx.tenant, now),
                                         tag=ctx.tag, idle_since=idle_since)


def summary_draft(session_id: str, text: str) -> Draft:
    return Draft(category=Category.CONTEXT, text=text, scope=Scope.SESSION, session_id=session_id,
                 key=SESSION_SUMMARY_KEY, source_kind=SourceKind.INFERENCE)


def summary_input(guard: Guard, snapshot: SessionSnapshot | None) -> SummaryInput:
    """What the caller's view shows of the session's memories, for its summary: their texts
    (none where it hides ``text``), the others by importance only where it shows that."""
    if snapshot is None or not guard.shows("text"):
        return SummaryInput()
    others = list(snapshot.inferred)  # newest first
    if guard.shows("importance"):
        others.sort(key=lambda m: -m.importance)  # stable: the newest first among equals
    return SummaryInput(tuple(m.text for m in snapshot.explicit if m.text.strip()),
                        tuple(m.text for m in others if m.text.strip()))


def snapshot_expiry(services: Services, tenant: str, now: datetime) -> datetime:
    return now + timedelta(hours=services.policy_for(tenant).session_snapshot_ttl_hours)


async def end_idle_sessions(services: Services, tenant: str, session_of: Callable[[str, str], StoreSession],
                            now: datetime) -> int:
    """End ``tenant``'s sessions idle longer than its policy's timeout as of ``now``, each as
    EndSession by the session's last writer would, with that agent's current view; an agent
    with no view, or one that may not write the summary, leaves none (the session still ends).
    Sessions whose snapshot expired are forgotten first. How many ended."""
    await session_of(tenant, "").drop_expired_sessions(now)
    timeout = services.policy_for(tenant).session_idle_timeout_minutes
    if timeout <= 0:
        return 0
    ended = 0
    for idle in await session_of(tenant, "").claim_idle_sessions(timeout * 60, now):
        session = session_of(tenant, idle.agent)
        view = await services.views.view_for(tenant, idle.agent)
        try:
            guard = guard_for(Principal(tenant, idle.agent, frozenset({"agent"})), view)
            done = await _end(CallContext(guard, session, services, AuditTag(view_version=guard.view.version)),
                              idle.subject, idle.session_id, idle.last_active_at)
        except PermissionDenied:
            done = await session.end_session(idle.subject, idle.session_id, None, blind=True,
                                             expires_at=snapshot_expiry(services, tenant, datetime.now(UTC)),
                                             idle_since=idle.last_active_at)
        ended += done
    return ended

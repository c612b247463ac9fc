"""Erase and ResolveConflict: change what the guard lets the caller reach."""

from __future__ import annotations

from datetime import UTC, datetime

from memoryd.domain import NotFound
from memoryd.v1 import memory_service_pb2 as svc

from ._services import CallContext
from ..validation import EraseCommand, ResolveConflictCommand
from .. import present


async def erase(ctx: CallContext, cmd: EraseCommand) -> svc.EraseResponse:
    flt = ctx.guard.erase_filter(cmd.subject, cmd.selector, organisation=cmd.organisation)
    # Rows, index writes in flight, vectors, verify, receipt: all storage's (``StoreSession.erase``).
    receipt = await ctx.session.erase(cmd.subject, flt, cmd.selector, cmd.mode, reason=cmd.reason, tag=ctx.tag)
    if ctx.services.metrics is not None:
        ctx.services.metrics.erased_memories(receipt.mode.value, receipt.counts.memories)
    return svc.EraseResponse(receipt=present.receipt(ctx.guard, receipt))


async def resolve_conflict(ctx: CallContext, cmd: ResolveConflictCommand) -> svc.ResolveConflictResponse:
    """Settle a memory's pending values. The memory must be one this view reads (else
    NOT_FOUND, like any unknown id) and may change (else PERMISSION_DENIED)."""
    guard, session = ctx.guard, ctx.session
    flt = guard.by_id_filter(cmd.subject)
    # The memory's category and key never change, so deciding on them before the change's own
    # transaction (which re-reads and locks the row) cannot be raced.
    found = await session.fetch(flt, [cmd.memory_id], datetime.now(UTC))
    if not found or not found[0].key:
        raise NotFound("no such keyed memory for this subject")
    guard.check_change(found[0])
    memory = await session.resolve_conflict(cmd.subject, flt, cmd.memory_id, cmd.resolution, cmd.pending_id, ctx.tag)
    return svc.ResolveConflictResponse(memory=present.memory_for(guard, memory))

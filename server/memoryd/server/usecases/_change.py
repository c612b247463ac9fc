"""Erase and ResolveConflict: change what the guard lets the caller reach."""

from __future__ import annotations

from memoryd.domain import EraseMode, Memory, Unavailable
from memoryd.v1 import memory_service_pb2 as svc

from .._services import CallContext
from .._validate import EraseCommand
from .._validate_conflicts import ResolveConflictCommand
from ..guard import present


async def erase(ctx: CallContext, cmd: EraseCommand) -> svc.EraseResponse:
    flt = ctx.guard.erase_filter(cmd.subject, cmd.selector)
    tenant, store, indexes = ctx.tenant, ctx.services.store, ctx.services.indexes

    async def clear_vectors(ids: list[str]) -> tuple[int, bool]:
        if cmd.mode is not EraseMode.PURGE or indexes is None:
            return 0, True  # forgotten memories leave the index through the outbox
        deleted = left = 0
        try:
            for target in indexes.targets():  # every model's collection, not just the active one
                index = target.index
                deleted += await index.delete(tenant, ids)
                left += await index.count(tenant, ids=ids)
                if cmd.selector.all_of_subject:
                    deleted += await index.delete_subject(tenant, cmd.subject)
                    left += await index.count(tenant, subject=cmd.subject)
            return deleted, left == 0
        except Unavailable:
            # The index is down: the outbox deletes the vectors when it is back, and the
            # receipt says the erase is not verified yet. Recall never serves them meanwhile.
            await store.enqueue_vector_deletes(tenant, cmd.subject, ids)
            return 0, False

    receipt = await store.erase(tenant, ctx.guard.agent, cmd.subject, flt, cmd.selector, cmd.mode,
                                reason=cmd.reason, tag=ctx.tag, after_commit=clear_vectors)
    if ctx.services.metrics is not None:
        ctx.services.metrics.erased_memories(receipt.mode.value, receipt.counts.memories)
    return svc.EraseResponse(receipt=present.receipt(receipt))


async def resolve_conflict(ctx: CallContext, cmd: ResolveConflictCommand) -> svc.ResolveConflictResponse:
    """Settle a memory's pending values. The memory must be one this view reads (else
    NOT_FOUND, like any unknown id) and may change (else PERMISSION_DENIED)."""
    guard = ctx.guard
    flt = guard.any_session_filter(cmd.subject)

    def check(m: Memory) -> None:
        guard.check_change(m)

    memory = await ctx.services.store.resolve_conflict(ctx.tenant, guard.agent, cmd.subject, flt, cmd.memory_id,
                                                       cmd.resolution, cmd.pending_id, check, ctx.tag)
    if ctx.services.worker is not None:
        ctx.services.worker.wakeup.set()
    return svc.ResolveConflictResponse(memory=present.memory_for(guard, memory))

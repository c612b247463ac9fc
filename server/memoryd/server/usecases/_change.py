"""Erase and ResolveConflict: change what the guard lets the caller reach."""

from __future__ import annotations

from datetime import UTC, datetime

from memoryd.domain import NotFound
from memoryd.storage import VectorErasure, erase_vectors
from memoryd.v1 import memory_service_pb2 as svc

from ._services import CallContext
from ..validation import EraseCommand, ResolveConflictCommand
from .. import present


async def erase(ctx: CallContext, cmd: EraseCommand) -> svc.EraseResponse:
    flt = ctx.guard.erase_filter(cmd.subject, cmd.selector, organisation=cmd.organisation)
    tenant, store, indexes = ctx.tenant, ctx.store, ctx.services.indexes

    async def clear_vectors(ids: list[str], counted: frozenset[str]) -> VectorErasure:
        # Deleted, compacted out of the index's files and checked; left to the outbox (and the
        # receipt not verified) while the index is down.
        return await erase_vectors(indexes, tenant, cmd.subject, ids, mode=cmd.mode,
                                   whole_subject=cmd.selector.all_of_subject, defer=store.enqueue_vector_deletes,
                                   counted=counted)

    receipt = await store.erase(cmd.subject, flt, cmd.selector, cmd.mode, reason=cmd.reason, tag=ctx.tag,
                                after_commit=clear_vectors)
    if ctx.services.metrics is not None:
        ctx.services.metrics.erased_memories(receipt.mode.value, receipt.counts.memories)
    return svc.EraseResponse(receipt=present.receipt(ctx.guard, receipt))


async def resolve_conflict(ctx: CallContext, cmd: ResolveConflictCommand) -> svc.ResolveConflictResponse:
    """Settle a memory's pending values. The memory must be one this view reads (else
    NOT_FOUND, like any unknown id) and may change (else PERMISSION_DENIED)."""
    guard, store = ctx.guard, ctx.store
    flt = guard.by_id_filter(cmd.subject)
    # The memory's category and key never change, so deciding on them before the change's own
    # transaction (which re-reads and locks the row) cannot be raced.
    found = await store.fetch(flt, [cmd.memory_id], datetime.now(UTC))
    if not found or not found[0].key:
        raise NotFound("no such keyed memory for this subject")
    guard.check_change(found[0])
    memory = await store.resolve_conflict(cmd.subject, flt, cmd.memory_id, cmd.resolution, cmd.pending_id, ctx.tag)
    if ctx.services.worker is not None:
        ctx.services.worker.wakeup.set()
    return svc.ResolveConflictResponse(memory=present.memory_for(guard, memory))

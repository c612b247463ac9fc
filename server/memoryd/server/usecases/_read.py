"""Recall, MemoryView, GetHistory, ExportMemories and GetExtractionJob: read what the guard's
filter admits, rank with what the view shows, answer through the guard."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from google.protobuf.message import Message

from memoryd.domain import (FieldViolation, InvalidArgument, Listing, Page, ReadFilter, ScoreWeights,
                            off_loop_if, sliced)
from memoryd.v1 import memory_service_pb2 as svc

from ._services import CallContext
from ._transfer import ExportCommand, export_archive
from ..validation import HistoryCommand, JobCommand, ListCommand, RecallCommand
from .. import present


async def recall(ctx: CallContext, cmd: RecallCommand) -> svc.RecallResponse:
    guard = ctx.guard
    flt = await _read_filter(ctx, cmd.filter, cmd.keys)
    if cmd.query.strip() or cmd.context:  # a context is free text too: searched by words and meaning
        guard.check_query()
    recalled = await ctx.services.recaller.recall(
        ctx.session, flt, query=cmd.query, keys=cmd.keys, top_k=cmd.top_k, token_budget=cmd.token_budget,
        weights=_weights(ctx, cmd), now=datetime.now(UTC), mask=guard.score_mask(),
        min_relevance=ctx.services.policy_for(ctx.tenant).min_relevance if cmd.min_relevance is None
        else cmd.min_relevance, neighbours=cmd.neighbours, tie=lambda m: present.tie_key(guard, m),
        context=cmd.context,
    )
    ctx.record_read(cmd.subject, "read.recall", [m.id for m, _ in recalled.ranked], count_access=True)
    if ctx.services.metrics is not None:
        ctx.services.metrics.recalled(len(recalled.ranked), bool(recalled.degraded_reason))
    response = svc.RecallResponse(degraded=bool(recalled.degraded_reason), degraded_reason=recalled.degraded_reason)
    await _present(response.memories, recalled.ranked, lambda ranked: present.scored(guard, *ranked))
    if cmd.render_block and recalled.ranked:  # nothing recalled: nothing to put in a prompt
        response.block = present.block(guard, [m for m, _ in recalled.ranked])
    return response


M = TypeVar("M", bound=Message)
T = TypeVar("T")


async def _present(into: RepeatedCompositeFieldContainer[M], items: Sequence[T], one: Callable[[T], M]) -> None:
    """Each item presented (``one``) and copied into the response's ``into``, in slices
    (``sliced``): 500 memories with 4 KiB of data take ~55 ms to present and ~20 ms to copy."""
    await sliced(items, lambda item: into.append(one(item)))


async def _read_filter(ctx: CallContext, flt: ReadFilter, keys: tuple[str, ...] | list[str] = ()) -> ReadFilter:
    """The guard's read filter, decided on a worker thread when it matches keys against the
    view's globs: 100 keys against 2,048 globs can take ~2 s (``memoryd.domain.Glob``)."""
    heavy = bool(keys or flt.keys) and ctx.guard.view.has_globs
    return await off_loop_if(heavy, ctx.guard.read_filter, flt, keys)


def _weights(ctx: CallContext, cmd: RecallCommand) -> ScoreWeights:
    s, w = ctx.services.scoring, cmd.weights
    return ScoreWeights(
        s.similarity if w.similarity is None else w.similarity,
        s.recency if w.recency is None else w.recency,
        s.importance if w.importance is None else w.importance,
        s.pinned_boost,
    )


def _binding(ctx: CallContext, subject: str, what: object) -> dict[str, str]:
    """What a page token is bound to: the caller, the subject and the request."""
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()
    return {"t": ctx.tenant, "a": ctx.guard.agent, "s": subject, "f": digest}


async def memory_view(ctx: CallContext, cmd: ListCommand) -> svc.MemoryViewResponse:
    guard, pages = ctx.guard, ctx.services.page_tokens
    flt = await _read_filter(ctx, cmd.filter)
    binding = _binding(ctx, cmd.subject, ["list", cmd.filter])
    # A view that hides updated_at gets the listing in id order: newest-first would tell it.
    by_id = not guard.shows("updated_at")
    page = Page(size=cmd.page_size, by_id=by_id)
    if cmd.page_token:
        position = pages.decode(cmd.page_token, binding)
        if not by_id and "u" not in position:  # issued in id order, before the view changed
            raise InvalidArgument(FieldViolation("page_token", "is invalid or was not issued for this request"))
        after = None if by_id else datetime.fromisoformat(str(position["u"]))
        page = Page(after, str(position["i"]), cmd.page_size, by_id)
    listing: Listing = await ctx.session.list(flt, page)
    ctx.record_read(cmd.subject, "read.view", [m.id for m in listing.memories])
    response = svc.MemoryViewResponse(view=present.view(guard.view))
    await _present(response.memories, listing.memories, lambda m: present.memory_for(guard, m))
    if listing.has_more and listing.memories:
        last = listing.memories[-1]
        position = {"i": last.id} if by_id else {"u": last.updated_at.isoformat(), "i": last.id}
        response.next_page_token = pages.encode(binding, position)
    return response


async def history(ctx: CallContext, cmd: HistoryCommand) -> svc.GetHistoryResponse:
    guard, pages = ctx.guard, ctx.services.page_tokens
    flt = guard.history_filter(cmd.subject)
    binding = _binding(ctx, cmd.subject, ["history", cmd.memory_id])
    after = int(pages.decode(cmd.page_token, binding)["v"]) if cmd.page_token else 0
    versions, more = await ctx.session.history(flt, cmd.memory_id, after, cmd.page_size)
    ctx.record_read(cmd.subject, "read.history", [cmd.memory_id])
    response = svc.GetHistoryResponse()
    await _present(response.versions, versions, lambda v: present.version(guard, v))
    if more and versions:
        response.next_page_token = pages.encode(binding, {"v": versions[-1].memory.version})
    return response


async def export(ctx: CallContext, cmd: ExportCommand) -> svc.ExportMemoriesResponse:
    flt = ctx.guard.read_filter(ReadFilter(subject=cmd.subject, any_session=True))
    data, ids = await export_archive(ctx.guard.view, cmd, lambda page: ctx.session.list(flt, page))
    ctx.record_read(cmd.subject, "read.export", ids)
    return svc.ExportMemoriesResponse(archive=data, memories=len(ids))


async def extraction_job(ctx: CallContext, cmd: JobCommand) -> svc.GetExtractionJobResponse:
    """A job is seen only by the agent that queued it; any other id is NOT_FOUND alike."""
    ctx.guard.check_subject(cmd.subject)
    job = await ctx.session.extraction_job(cmd.subject, cmd.job_id)
    return svc.GetExtractionJobResponse(job=present.extraction_job(ctx.guard, job))

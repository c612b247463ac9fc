"""Write and ImportMemories: admit the items through the guard, write them in one
transaction, answer through the guard."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from memoryd.domain import Draft, FailedPrecondition, Outcome, off_loop_if
from memoryd.v1 import memory_service_pb2 as svc

from ..ingest import chunk_drafts
from ..screen import PII, screened
from ._services import CallContext
from ._transfer import ImportCommand, import_drafts
from ..validation import WriteCommand
from .. import present

MAX_INDEX_WAIT_SECONDS = 30.0


async def write(ctx: CallContext, cmd: WriteCommand) -> svc.WriteResponse:
    ctx.guard.check_subject(cmd.subject)
    if cmd.has_turns and not cmd.chunk:
        return await _queue_extraction(ctx, cmd)
    dropped: Counter[str] = Counter()
    if cmd.has_turns:
        drafts, dropped = screen_chunks(chunk_drafts(cmd.turns), ctx.services.policy_for(ctx.tenant).pii)
        if not drafts:
            return svc.WriteResponse(indexed=True, dropped=present.dropped_counts(dropped))
    else:
        drafts = cmd.drafts
    # Off the loop when the view has globs: 100 keys against 2,048 globs can take ~2 s.
    items = await off_loop_if(ctx.guard.view.has_globs, ctx.guard.admit, drafts)
    written = await ctx.session.write_with_index_state(cmd.subject, [i.draft for i in items],
                                                       blind=[i.blind for i in items],
                                                       idempotency_key=cmd.idempotency_key,
                                                       request_hash=cmd.request_hash, tag=ctx.tag,
                                                       session_id=cmd.session_id)
    results = written.results
    answers = [present.answer(ctx.guard, item, result) for item, result in zip(items, results, strict=True)]
    if cmd.wait_indexed:  # everything written, so a reader finds it; how long it takes is timing
        memory_ids = sorted({r.memory_id for r in results if r.memory_id})
        budget = min(MAX_INDEX_WAIT_SECONDS, (ctx.time_remaining or MAX_INDEX_WAIT_SECONDS) - 0.5)
        await ctx.session.wait_indexed(memory_ids, max(budget, 0.0))
    # `indexed` speaks only of items whose answer says what happened: whether an ACCEPTED
    # item left index work depends on what it met (replaced, or held pending).
    shown = sorted({r.memory_id for r, a in zip(results, answers, strict=True)
                    if r.memory_id and a.outcome is not Outcome.ACCEPTED})
    if cmd.wait_indexed:
        pending, dead = await ctx.session.pending_index_work(shown)
        indexed = not pending and not dead
    else:  # as the write's own transaction saw it: no second transaction on the ack's path
        indexed = written.unindexed.isdisjoint(shown)
    return svc.WriteResponse(results=present.write_results(answers), indexed=indexed,
                             dropped=present.dropped_counts(dropped))


def screen_chunks(drafts: list[Draft], mode: str) -> tuple[list[Draft], Counter[str]]:
    """The chunks as the tenant policy's ``pii`` has them (``_pii.screened``): the ones to
    write, numbers redacted where it says so, and how many were left out."""
    kept: list[Draft] = []
    dropped: Counter[str] = Counter()
    for draft in drafts:
        text = screened(draft.text, mode)
        if text is None:
            dropped[PII] += 1
        else:
            kept.append(draft if text == draft.text else replace(draft, text=text))
    return kept, dropped


async def _queue_extraction(ctx: CallContext, cmd: WriteCommand) -> svc.WriteResponse:
    """Queue the turns for the extraction worker; the reply names the job at once."""
    services = ctx.services
    if not services.extraction_enabled:
        raise FailedPrecondition("turns need an extraction model, and none is configured",
                                 reason="EXTRACTION_NOT_CONFIGURED")
    ctx.guard.may_queue_extraction()
    job_id = await ctx.session.queue_extraction(cmd.subject, cmd.turns, idempotency_key=cmd.idempotency_key,
                                              request_hash=cmd.request_hash, tag=ctx.tag, session_id=cmd.session_id)
    if services.extraction is not None:
        services.extraction.wakeup.set()
    return svc.WriteResponse(extraction_job_id=job_id)


async def import_archive(ctx: CallContext, cmd: ImportCommand) -> svc.ImportMemoriesResponse:
    """An archive's memories, written as this caller would write them (its view's write
    rules and trust; the archive's claimed provenance never asserts more than the view)."""
    ctx.guard.check_subject(cmd.subject)  # before the passphrase's key derivation
    drafts = [ctx.guard.within_trust(d) for d in await import_drafts(cmd)]
    if not drafts:
        return svc.ImportMemoriesResponse()
    written = await write(ctx, WriteCommand(cmd.subject, drafts, "", b"", False, False))
    return svc.ImportMemoriesResponse(results=written.results)


__all__ = ["import_archive", "write"]

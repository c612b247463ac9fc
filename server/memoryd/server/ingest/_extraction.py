"""The extraction worker: turns → model → parse → filter → normalise → dedup → write.

An in-process task of the server (started by ``_app``), like the outbox worker. Jobs are
claimed with ``FOR UPDATE SKIP LOCKED`` under a lease, so any number of replicas share them.
A job runs entirely off the caller's latency path:

1. open its sealed turns; read the queuing agent's view again, now;
2. find the subject's time zone: its ``timezone`` memory if that view may read it (the key
   in its category, and the field ``text``), else the tenant policy's;
3. ask the model (``_extraction_llm``); an outage (down, overloaded, too slow) makes the
   job wait for the model, up to a horizon (``_model_outage``); another 5xx is retried with
   backoff up to ``extraction_max_attempts``; a refusal or an unparsable answer fails the
   job at once;
4. drop what the filters say (``_extraction_filters``) and what the view may not write,
   and items no turn of the job supports (``_provenance``: the item's numbers and names
   must be in the turns; the turns that hold them are its sources, whatever the model
   claimed), items whose turns, found or claimed, are instruction-like (``_injected``),
   keyed items without a usable key, and repeats of a sentence (``_once``); count each drop
   by reason;
5. normalise each kept item's text against its source turn's time in the subject's zone;
6. find near-duplicate episodic items by meaning (cosine ≥ the policy's merge_similarity,
   0.95 by default, against the subject's active memories in the active index, filter
   first — the view's read rules for the category, so nothing is merged into a memory the
   agent may not read; and against earlier items of the same job);
7. write everything with the tenant's policy, and finish the job, in one transaction
   (``ExtractionJobs.finish``).

Non-interference: the job acts with the queuing agent's view, so what that agent may not
read changes nothing it can see — neither the memories it can read nor GetExtractionJob's
answer. Hence the zone and the dedup above; a job's ``results`` answer each item as a Write by
that agent would (``memoryd.server.guard``: an item it may not read gets the blind answer,
the same whatever is stored), and its ``error`` says what happened in generic words (details
go to the log) — of the model server's error, its status and a reason of memoryd's, never
its words, which may repeat the turns (``_chat_errors``).

Whichever way a job ends, its turns are deleted; while it waits for its model they stay
sealed in its row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, tzinfo
from typing import Any

from memoryd.domain import (
    DataKeyUnavailable,
    Draft,
    Embedder,
    MemorydError,
    ReadFilter,
    SourceKind,
    TenantPolicy,
    View,
    different_dates,
    normalise,
    off_loop_if,
)
from memoryd.storage import (
    Claim,
    ClaimedJob,
    ExtractionJobs,
    MilvusIndex,
    ModelBreaker,
    ModelSlots,
    PlannedItem,
    backoff,
    counters,
    embedding_text,
    idle,
)

from ..screen import INSTRUCTION_LIKE, NO_KEY, ExtractedItem, draft_without_pii, filter_items, pii_screened
from ._chat_errors import ExtractionParseError, ExtractionRefused, ExtractionUnavailable
from ._extraction_llm import ChatExtractor, as_read
from ..screen import InjectedTurns
from ..screen import meaning_judge
from ._model_outage import Asked, gave_up, outage_delay
from ._once import once_each
from ..screen import PII, PLAIN, PiiScreen
from ..screen import UNSUPPORTED, source_turns
from ..views import ViewRegistry
from ..guard import WriteItem, write_item
from ._items import (
    clean_key,
    clean_tags,
    cosine,
    read_rules_of,
    said_screen,
    timezone_categories,
    zone_name,
    zone_of,
)


_log = logging.getLogger("memoryd.server.extraction")

TOO_LONG = "too_long"

Dense = Callable[[], tuple[MilvusIndex, Embedder] | None]

async def _screen_of(job: ClaimedJob) -> PiiScreen:
    """``said_screen`` of a job's turns, made off the event loop."""
    return await asyncio.to_thread(said_screen, job.turns)


class ExtractionWorker:
    def __init__(self, jobs: ExtractionJobs, extractor: ChatExtractor, views: ViewRegistry,
                 policy_for: Callable[[str], TenantPolicy], dense: Dense, *, max_attempts: int = 4,
                 lease_seconds: float = 120.0, base_backoff: float = 0.5, max_backoff: float = 60.0,
                 max_text_bytes: int = 8 * 1024, on_written: Callable[[], None] | None = None,
                 parallel: int = 2, slots: ModelSlots | None = None, timeout_seconds: float = 60.0,
                 breaker: ModelBreaker | None = None, retry_horizon: float = 3600.0,
                 outage_backoff: float = 300.0, hold_seconds: float = 0.0,
                 injection_meaning: Callable[[Sequence[str]], list[bool]] | None = None) -> None:
        self._jobs = jobs
        self._extractor = extractor
        self._views = views
        self._policy_for = policy_for
        self._dense = dense
        self._max_attempts = max_attempts
        self._lease = lease_seconds
        self._base = base_backoff
        self._cap = max_backoff
        self._max_text_bytes = max_text_bytes
        self._on_written = on_written
        self._parallel = max(1, parallel)
        self._slots = slots
        self._timeout = timeout_seconds
        self._breaker = breaker
        if breaker is not None:  # a queued job read while the model is out says it waits
            jobs.breaker = breaker
        self._horizon = retry_horizon
        self._outage_cap = outage_backoff
        self._hold = max(hold_seconds, timeout_seconds)
        self._injection_meaning = injection_meaning  # the second judge of instructions, if on
        self.wakeup = asyncio.Event()

    def close(self) -> None:
        self._extractor.close()

    @property
    def breaker(self) -> ModelBreaker | None:
        """The model endpoint's breaker (for job states and metrics)."""
        return self._breaker

    @property
    def model_at(self) -> str:
        """The model endpoint's host and port (never its path, query or credentials)."""
        return self._extractor.where

    async def run(self, stop: asyncio.Event, idle_seconds: float = 0.5) -> None:
        """Run jobs until ``stop``, ``parallel`` at a time (a job mostly waits for the model),
        each only with a model slot free (``slots``); a job still running then is given back
        to the queue."""
        await asyncio.gather(*(self._run_jobs(stop, idle_seconds) for _ in range(self._parallel)))

    async def _run_jobs(self, stop: asyncio.Event, idle_seconds: float) -> None:
        while not stop.is_set():
            try:
                claim = await self._jobs.claim(self._lease, self._slots, self._breaker)
            except MemorydError as exc:
                _log.warning("extraction worker: %s", exc.message)
                claim = None
            if claim is None:
                self.wakeup.clear()
                await idle(stop, self.wakeup, idle_seconds)
                continue
            job = asyncio.ensure_future(self.run_job(claim.tenant, claim.job_id))
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait([job, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            # How long the model may still be busy with this job's request: one cut off by a
            # stop may run on the model's server a while yet.
            asked = Asked(rest=self._timeout)
            if job.done():
                asked = job.result() if not job.cancelled() and job.exception() is None else Asked()
            else:
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await job
                with contextlib.suppress(MemorydError):
                    await self._jobs.release(claim.tenant, claim.job_id)
            await self._settle(claim, asked, stop)

    async def _settle(self, claim: Claim, asked: Asked, stop: asyncio.Event) -> None:
        """Tell the breaker how the model met the job, and give the slot back — once the
        model can have finished the request: one the job stopped waiting for holds the slot
        until it ends (or ``hold_seconds`` pass), so the model never has more requests than
        slots, however long it takes."""
        if self._breaker is not None:
            with contextlib.suppress(MemorydError):
                if await self._jobs.model_said(self._breaker, claim, asked.outage):
                    _log.warning("extraction model at %s: out %s; no job is sent to it for a while",
                                 self._extractor.where, "again" if claim.trial else "repeatedly")
        if self._slots is None or claim.slot is None:
            return
        if asked.pending is not None and not asked.pending.done():
            with contextlib.suppress(MemorydError):  # past the lease: held, even if this process dies
                await self._jobs.hold_slot(self._slots, claim.slot, self._hold)
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait([asked.pending, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not asked.pending.done():
                return  # stopping: the slot stays held until the request's bound
        with contextlib.suppress(MemorydError):
            await self._jobs.give_back(self._slots, claim.slot, asked.rest)

    async def run_job(self, tenant: str, job_id: str) -> Asked:
        """Run one claimed job; how it met its model (``Asked``)."""
        try:
            job = await self._jobs.open(tenant, job_id)
        except DataKeyUnavailable as exc:
            await self._jobs.fail(tenant, job_id, PLAIN.redacted(exc.message))
            return Asked()
        if job is None:
            return Asked()  # erased since it was claimed
        try:
            return await self._run(job)
        except asyncio.CancelledError:
            raise
        except MemorydError as exc:  # a store outage: try again later, within the attempts
            await self._retry_or_fail(job, exc.message)
        except Exception as exc:
            # An exception's words may quote what the job held: its numbers are redacted.
            _log.error("extraction job %s of tenant %s failed unexpectedly: %s", job.id, tenant,
                       (await _screen_of(job)).redacted("".join(traceback.format_exception(exc))))
            await self._jobs.fail(tenant, job.id, "internal error")
        return Asked()

    async def _retry_or_fail(self, job: ClaimedJob, reason: str, at_least: float = 0.0,
                             screen: PiiScreen | None = None) -> None:
        reason = (screen or await _screen_of(job)).redacted(reason)  # kept on the job and logged
        attempts = job.attempts - job.outages  # waits for the model use up none
        if attempts >= self._max_attempts:
            _log.error("extraction job %s failed: %s; gave up after %d attempts", job.id, reason, attempts)
            await self._jobs.fail(job.tenant, job.id, f"{reason} (gave up after {attempts} attempts)")
        else:
            delay = max(backoff(attempts, self._base, self._cap), at_least)
            _log.warning("extraction job %s: %s; attempt %d, next in %.1fs", job.id, reason, attempts, delay)
            await self._jobs.retry_later(job, reason, delay)

    async def _wait_for_model(self, job: ClaimedJob, exc: ExtractionUnavailable, at_least: float,
                              screen: PiiScreen) -> None:
        """The model is out: wait for it (``_model_outage``), or fail past the horizon."""
        waited = (datetime.now(UTC) - job.waiting_since).total_seconds() if job.waiting_since else 0.0
        if waited >= self._horizon:
            _log.error("extraction job %s failed: the model was out for %.0fs", job.id, waited)
            await self._jobs.fail(job.tenant, job.id, gave_up(screen.redacted(exc.message), self._horizon))
            return
        delay = outage_delay(job.outages, self._base, self._outage_cap, retry_after=exc.retry_after,
                             remaining=self._horizon - waited, at_least=at_least)
        _log.warning("extraction job %s: waits for the model, next try in %.1fs", job.id, delay)
        await self._jobs.wait_for_model(job, screen.redacted(exc.message), delay)

    async def _zone(self, job: ClaimedJob, view: View | None, policy: TenantPolicy) -> tzinfo:
        # The subject's own zone only where the agent could read it itself: otherwise a
        # memory it may not read would shape the dates of the memories it can.
        categories = timezone_categories(view)
        found = await self._jobs.session(job).subject_timezones(job.subject, categories) if categories else []
        own = zone_name(found, view.visible_fields) if view is not None else ""
        return zone_of(own) or zone_of(policy.timezone) or UTC

    async def _run(self, job: ClaimedJob) -> Asked:
        if job.attempts - job.outages > self._max_attempts:  # claimed again after workers died on it
            await self._jobs.fail(job.tenant, job.id, f"gave up after {job.attempts - job.outages - 1} attempts")
            return Asked()
        policy = self._policy_for(job.tenant)
        view = await self._views.view_for(job.tenant, job.agent)
        zone = await self._zone(job, view, policy)
        # For everything the job keeps or logs; off the loop, as the drafts below: finding the
        # numbers of 64 KiB of turns takes ~70 ms, judging them for instructions ~200 ms.
        screen = await asyncio.to_thread(said_screen, job.turns, zone)
        try:
            items, invalid = await self._extractor.extract(job.turns, datetime.now(UTC), zone)
        except ExtractionUnavailable as exc:
            _log.warning("extraction job %s: %s", job.id, screen.redacted(exc.detail))
            # A timed-out request may still be running on the model's server: the job's next
            # request waits at least as long again, so requests do not pile up there (a
            # request still open, ``pending``, holds the slot itself).
            rest = self._timeout if exc.timed_out and exc.pending is None else 0.0
            if exc.outage:
                await self._wait_for_model(job, exc, rest, screen)
            else:
                await self._retry_or_fail(job, exc.message, at_least=rest, screen=screen)
            # A timeout tells of this request (a long transcript on a slow model), not that the
            # model is out: the job waits, but it never opens the breaker that holds back every
            # tenant's jobs — the slots already bound what a hung model is sent.
            return Asked(outage=None if exc.timed_out else exc.outage, pending=exc.pending, rest=rest)
        except ExtractionRefused as exc:
            _log.warning("extraction job %s: %s", job.id, screen.redacted(exc.detail))
            await self._jobs.fail(job.tenant, job.id, screen.redacted(exc.message))
            return Asked(outage=False)
        except ExtractionParseError as exc:
            _log.warning("extraction job %s: parse failure: %s", job.id, screen.redacted(exc.detail))
            await self._jobs.fail(job.tenant, job.id, screen.redacted(exc.message),
                                  counts={counters.EXTRACTION_PARSE_FAILURES: 1})
            return Asked(outage=False)
        # Off the loop: the turns are judged for instructions, the items' numbers and names
        # traced to them, and each key matched against the view's globs (up to 2,048).
        drafts, dropped, screened = await asyncio.to_thread(self.drafts, job, items, view, policy, zone, screen)
        dropped.update(invalid)  # items that broke the schema, dropped alone
        plans = await self._dedup(job, drafts, view, policy.merge_similarity)
        results = await self._jobs.finish(job, plans, dropped, view_version=view.version if view else None,
                                          counts={f"extraction.pii.{field}": n for field, n in screened.items()})
        if results and self._on_written is not None:
            self._on_written()
        return Asked(outage=False)

    def drafts(self, job: ClaimedJob, items: list[ExtractedItem], view: View | None, policy: TenantPolicy,
               zone: tzinfo, screen: PiiScreen | None = None) -> tuple[list[Draft], Counter[str], Counter[str]]:
        """The drafts to write of the model's items, the drops by reason, and what the PII
        screen (``said_screen``) took out of the drafts kept, by field."""
        screen = screen if screen is not None else said_screen(job.turns, zone)
        screened: Counter[str] = Counter()
        may_write = view.may_write if view is not None else (lambda category, key: False)
        turns = {t.turn_id: t for t in job.turns}
        # The turns as the model read them, to check its claimed sources against.
        seen = [(t.turn_id, t.speaker, as_read(t, zone)) for t in job.turns]
        injected = InjectedTurns(seen, known=(job.subject,), meaning=self._injection_meaning)
        dropped: Counter[str] = Counter()
        drafts = []
        for raw in items:
            if injected.taint(raw):  # whatever the model made of the turn's words (_injected)
                dropped[INSTRUCTION_LIKE] += 1
                continue
            candidate = replace(raw, key=clean_key(raw.key, raw.category))
            kept, filtered = filter_items([candidate], policy, may_write, screen)
            if filtered:
                dropped.update(filtered)
                continue
            [item] = kept  # its entities screened (``without_pii``) before they become tags
            if not item.category.episodic and not item.key:  # never stored keyless: see clean_key
                dropped[NO_KEY] += 1
                continue
            # Every memory must lead back to the turn that said it, or Erase by turn misses
            # it; read from what the model wrote, before any number in it was redacted.
            sources = source_turns(raw.text, raw.entities, raw.source_turn_ids, seen, known=(job.subject,))
            if not sources:
                dropped[UNSUPPORTED] += 1
                continue
            # Relative dates are read against the source turn's time in the subject's zone.
            normalised = normalise(item.text, at=turns[sources[0]].time.astimezone(zone), entities=item.entities)
            text, tags = normalised.text, (*normalised.tags, *item.tags)
            if len(text.encode()) > self._max_text_bytes:
                dropped[TOO_LONG] += 1
                continue
            draft, fields = draft_without_pii(
                Draft(category=item.category, text=text, key=item.key, importance=item.importance,
                      confidence=item.confidence, stability=item.stability, tags=clean_tags(tags),
                      source_kind=SourceKind.INFERENCE, source_turn_ids=sources), policy.pii, screen)
            if draft is None:
                dropped[PII] += 1
                continue
            screened.update(pii_screened(candidate, item) + fields)
            drafts.append(draft)
        drafts, repeats = once_each(drafts)  # one sentence, one memory, whatever keys it came with
        dropped.update(repeats)
        return drafts, dropped, screened

    async def _dedup(self, job: ClaimedJob, drafts: list[Draft], view: View | None,
                     threshold: float) -> list[PlannedItem]:
        """Plans for the drafts: episodic ones that say what a memory the view may read (or an
        earlier item of this job) already says are merged into it. Items the view may not
        read (or may not compare: ``WriteItem.blind``) are never merged by meaning; nor is
        anything merged into a stored memory where the view hides ``text`` (the merge would
        tell what the hidden text says). Without an index, nothing is merged."""
        items = await off_loop_if(view is not None and view.has_globs,  # as in _run
                                  lambda: [write_item(view, d) if view is not None else None for d in drafts])
        plans = [_plan(d, item) for d, item in zip(drafts, items)]
        blind = [item is None or item.blind for item in items]
        episodic = [i for i, d in enumerate(drafts) if d.category.episodic and not blind[i]]
        dense = self._dense()
        if not episodic or dense is None:
            return plans
        index, embedder = dense
        sees_text = view is not None and "text" in view.visible_fields
        now = datetime.now(UTC)
        try:
            vectors = await embedder.embed_passages([embedding_text("", drafts[i].text) for i in episodic])
            for n, i in enumerate(episodic):
                category = drafts[i].category
                # Items dated differently tell of different occasions, however alike.
                earlier = [(m, cosine(vectors[n], vectors[k])) for k, m in enumerate(episodic[:n])
                           if drafts[m].category is category and not different_dates(drafts[m].text, drafts[i].text)]
                best = max(earlier, key=lambda pair: pair[1], default=None)
                if best is not None and best[1] >= threshold:
                    plans[i] = replace(plans[i], same_as=best[0])
                    continue
                if not sees_text:
                    continue
                # Filter first: what the view reads of this subject's active memories of the
                # category, then search; ``finish`` checks the hit against the same filter.
                flt = await self._jobs.session(job).labelled(ReadFilter(
                    subject=job.subject, categories=(category,), rules=read_rules_of(view, category)))
                hits = await index.partition(job.tenant).search(flt, vectors[n], 1, now)
                if hits and hits[0][1] >= threshold:
                    plans[i] = replace(plans[i], merge_into=hits[0][0], merge_filter=flt)
        except MemorydError as exc:
            _log.warning("extraction job %s: no dedup by meaning (%s)", job.id, exc.message)
            return [_plan(d, item) for d, item in zip(drafts, items)]
        return plans


def _plan(draft: Draft, item: WriteItem | None) -> PlannedItem:
    """A draft as the queuing agent's Write would write it (``memoryd.server.guard``)."""
    return PlannedItem(draft, blind=item is None or item.blind, readable=item is not None and item.readable)


def extraction_worker(config: Any, jobs: ExtractionJobs, views: ViewRegistry, dense: Dense,
                      on_written: Callable[[], None] | None = None) -> ExtractionWorker:
    """The worker the server runs when an extraction model is configured: as many jobs at
    once as the deployment's ``extraction_concurrency``, each only with a slot of the endpoint."""
    extractor = ChatExtractor(config.extraction_url, config.extraction_model, config.extraction_api_key,
                              config.extraction_timeout_seconds, output=config.extraction_output,
                              max_tokens=config.extraction_max_tokens, threads=config.extraction_concurrency,
                              hold=config.extraction_abandoned_request_seconds)
    slots = ModelSlots(extractor.endpoint, config.extraction_concurrency)
    cool_down = config.extraction_breaker_max_open_seconds
    return ExtractionWorker(jobs, extractor, views, config.policy_for, dense,
                            max_attempts=config.extraction_max_attempts,
                            lease_seconds=config.extraction_timeout_seconds + 60.0,
                            max_text_bytes=config.limits.max_text_bytes, on_written=on_written,
                            parallel=config.extraction_concurrency,
                            slots=slots, timeout_seconds=config.extraction_timeout_seconds,
                            breaker=ModelBreaker(slots.endpoint, config.extraction_breaker_failures,
                                                 base=min(5.0, cool_down), cap=cool_down),
                            retry_horizon=config.extraction_retry_horizon_seconds,
                            outage_backoff=config.extraction_retry_max_backoff_seconds,
                            hold_seconds=config.extraction_abandoned_request_seconds,
                            injection_meaning=meaning_judge().flags if config.extraction_injection_meaning else None)

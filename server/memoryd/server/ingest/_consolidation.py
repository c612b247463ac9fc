"""Consolidation: a subject's episodic fragments about one topic become one profile memory.

An optional, operator-run pass (``memoryd consolidate``), never on a request's path. For one
(tenant, subject):

1. read the active, unpinned events and decisions (``Consolidations.fragments``; content that
   cannot be opened is left out) and embed them with the active embedder, as the extraction
   worker's dedup does;
2. group them by topic (``memoryd.domain.topic_groups``): complete linkage — a fragment joins
   a group only if its cosine with EVERY member is at least the threshold. Merging unrelated
   fragments loses information; missing a merge loses nothing, so the strict rule is the safe
   one;
3. for each group of at least ``MIN_GROUP`` fragments, ask the extraction model for one
   profile memory (``_consolidation_llm``); drop it for the extraction filters' reasons
   (instruction-like text, the asking agent's view, low confidence, sensitive unless the
   tenant allows it) and normalise its text;
4. write it and forget the fragments in one transaction (``Consolidations.apply``).

A parse failure or an outage of the model writes nothing for that group; the others go on.
Everything a pass does not write is counted (``consolidation.skipped``,
``consolidation.parse_failures``, ``consolidation.unavailable``,
``consolidation.dropped.<reason>``) — except in a dry run, which changes nothing at all.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from memoryd.domain import (DEFAULT_SIMILARITY, MEMORY_FIELDS, Draft, Embedder, SourceKind, TenantPolicy, View,
                            WriteResult, normalise, topic_groups)
from memoryd.storage import Consolidations, Fragment, StoreSession, embedding_text

from .._config import Config
from ._consolidation_llm import ChatConsolidator
from ._extraction import TOO_LONG
from ._items import TIMEZONE_CATEGORIES, clean_key, clean_tags, zone_name, zone_of
from ..screen import NO_KEY, ExtractedItem, filter_items
from ._chat_errors import ExtractionParseError, ExtractionRefused, ExtractionUnavailable

_log = logging.getLogger("memoryd.server.consolidation")

MIN_GROUP = 3
TAG = "consolidated"


@dataclass
class GroupOutcome:
    """One group of fragments and what the pass did (or, in a dry run, would do) with it."""

    fragments: list[Fragment]
    status: str = ""  # written | pending | would_write | skipped | dropped | parse_failure | unavailable | changed
    detail: str = ""
    draft: Draft | None = None
    result: WriteResult | None = None


@dataclass
class ConsolidationReport:
    fragments: int = 0  # episodic fragments read
    groups: list[GroupOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for g in self.groups if g.status == status)


class Consolidator:
    def __init__(self, consolidations: Consolidations, model: ChatConsolidator, embedder: Embedder,
                 policy_for: Callable[[str], TenantPolicy], *, threshold: float = DEFAULT_SIMILARITY,
                 max_text_bytes: int = 8 * 1024) -> None:
        self._store = consolidations
        self._model = model
        self._embedder = embedder
        self._policy_for = policy_for
        self._threshold = threshold
        self._max_text_bytes = max_text_bytes

    def close(self) -> None:
        self._model.close()

    async def run(self, tenant: str, subject: str, *, view: View | None = None, dry_run: bool = False,
                  now: datetime | None = None) -> ConsolidationReport:
        """One pass for (tenant, subject). ``view``: the asking agent's, if an agent asked (it
        may only produce what that view may write). A store or embedder outage raises."""
        now = now or datetime.now(UTC)
        policy = self._policy_for(tenant)
        session = self._store.session(tenant)
        fragments = await self._store.fragments(session, subject, now)
        report = ConsolidationReport(len(fragments))
        if len(fragments) < MIN_GROUP:
            return report
        vectors = await self._embedder.embed_passages([embedding_text("", f.text) for f in fragments])
        groups = [[fragments[i] for i in g] for g in topic_groups(vectors, self._threshold) if len(g) >= MIN_GROUP]
        if not groups:
            return report
        # The subject's time zone, read as extraction reads it.
        found = await session.subject_timezones(subject, TIMEZONE_CATEGORIES)
        zone = zone_of(zone_name(found, MEMORY_FIELDS)) or zone_of(policy.timezone) or UTC
        for members in groups:
            outcome = await self._group(session, subject, members, policy, view, zone, now, dry_run)
            report.groups.append(outcome)
        return report

    async def _group(self, session: StoreSession, subject: str, members: list[Fragment], policy: TenantPolicy,
                     view: View | None, zone: tzinfo, now: datetime, dry_run: bool) -> GroupOutcome:
        outcome = GroupOutcome(members)
        counts: Counter[str] = Counter()
        try:
            item = await self._model.consolidate([(f.time, f.text) for f in members], now, zone)
        except (ExtractionUnavailable, ExtractionRefused) as exc:
            outcome.status, outcome.detail = "unavailable", exc.message
            counts["consolidation.unavailable"] += 1
        except ExtractionParseError as exc:
            outcome.status, outcome.detail = "parse_failure", exc.message
            counts["consolidation.parse_failures"] += 1
        else:
            if item is None:
                outcome.status, outcome.detail = "skipped", "the model found no lasting profile memory"
                counts["consolidation.skipped"] += 1
            else:
                draft, reason = self.draft(item, policy, view, zone, now)
                if draft is None:
                    outcome.status, outcome.detail = "dropped", reason
                    counts["consolidation.skipped"] += 1
                    counts[f"consolidation.dropped.{reason}"] += 1
                else:
                    outcome.draft = draft
                    outcome.status = "would_write"
        if dry_run:
            return outcome
        if outcome.draft is not None:
            done = await self._store.apply(session, subject, outcome.draft, [f.id for f in members])
            if done is None:
                outcome.status, outcome.detail = "changed", "a fragment changed meanwhile; left for the next pass"
                counts["consolidation.skipped"] += 1
            else:
                outcome.result = done.result
                outcome.status = "written" if done.forgotten else "pending"
        if counts:
            await self._store.count(session, counts)
        return outcome

    def draft(self, item: ExtractedItem, policy: TenantPolicy, view: View | None, zone: tzinfo,
              now: datetime) -> tuple[Draft | None, str]:
        """The profile memory to write of the model's item, or None and why it is dropped."""
        item = ExtractedItem(category=item.category, text=item.text, key=clean_key(item.key, item.category),
                             importance=item.importance, confidence=item.confidence)
        if not item.key:
            return None, NO_KEY
        may_write = view.may_write if view is not None else (lambda category, key: True)
        kept, dropped = filter_items([item], policy, may_write)
        if not kept:
            return None, next(iter(dropped))
        normalised = normalise(item.text, at=now.astimezone(zone))
        if len(normalised.text.encode()) > self._max_text_bytes:
            return None, TOO_LONG
        return Draft(category=item.category, text=normalised.text, key=item.key, importance=item.importance,
                     confidence=item.confidence, tags=clean_tags((TAG,), normalised.tags),
                     source_kind=SourceKind.INFERENCE), ""


def consolidator(config: Config, consolidations: Consolidations, embedder: Embedder, *,
                 threshold: float = DEFAULT_SIMILARITY) -> Consolidator:
    """A consolidator on the configured extraction model (``config.extraction_configured``)."""
    model = ChatConsolidator(config.extraction_url, config.extraction_model, config.extraction_api_key,
                             config.extraction_timeout_seconds, output=config.extraction_output,
                             max_tokens=config.extraction_max_tokens)
    return Consolidator(consolidations, model, embedder, config.policy_for, threshold=threshold,
                        max_text_bytes=config.limits.max_text_bytes)

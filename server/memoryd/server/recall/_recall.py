"""Recall: keyed point lookups and hybrid free-text search, scored, deduplicated and cut.

Free text — a query, or a conversation (``context`` turns, or a dialogue sent as the query),
which ``_conversation`` turns into bounded texts to embed (its meaning and its focus, searched
as the sum of their unit vectors), one to read for words and one for names — runs two
channels in parallel, both filtered by the caller's view-narrowed filter before they search:
dense (the embedding against the tenant's partition, limit top_k × 3) and keyword (BM25 over
keyed term hashes in Postgres). The candidates are re-read from Postgres (an id without an
active row is dropped, so a stale vector is never served) — the keyword hits' rows while the
query is still being embedded, the dense channel's other hits after its search — their
similarity is a convex combination of both channels' normalised scores (see
``similarities``), and they are scored as

    w_sim · similarity + w_rec · 0.5^(age / half_life[category]) + w_imp · importance (+ pinned)

(age since the last change or recall, whichever is later: recalling reinforces a memory)

then the turns written next to the best matching turns (episodic memories with a source turn
id, ``Recaller._with_neighbours``) are ranked as a share of them, a memory tagged with an
entity the query names (``entity:ana`` for "What does Ana like?", ``Recaller._named``) gets
ENTITY_LIFT added to its similarity — the dense channel was asked the query without that
name, which the tag already matches — and everything is de-duplicated with MMR (λ = 0.7) and
cut to top_k and the token budget. Each candidate
also gets an absolute ``relevance`` (``_relevance``: its cosine over the query's baseline for
the memory's script, mixed with the keyword channel's share of the query's term weight; for
a conversation, its margin over its closeness to small talk);
candidates below the request's minimum relevance are dropped before the cut, so a query
nothing answers gets nothing. If the dense channel is down the answer comes from the keyword
channel alone and says so (degraded).

Only what the caller may read shapes the answer: both channels search the view-narrowed
filter, ranks are numbered among the candidates the exact re-read kept, and the guard's
``ScoreMask`` replaces every stored input the view hides (importance, pinned, the recency
inputs, last access, text) by a constant before scoring; entity tags are looked up among
what the filter lets through, and not at all when the view hides tags. Equals — the same
score, the same raw channel score — are ordered by the guard's ``tie`` (what the caller
receives of each memory), never by a hidden field such as the update time.

Each stage is a child span of the RPC's span: ``memoryd.entities`` (the entity tags the query
names, looked up while it is embedded: ``_entity_guess``), ``memoryd.embed`` (its attribute
``memoryd.guessed`` says whether the text embedded first was the right one), ``memoryd.vector_search``,
``memoryd.keyword_search``, ``memoryd.row_fetch`` (twice: the keyword hits, then the dense
channel's other hits), ``memoryd.vector_fetch`` (vectors of the keyword-only candidates),
``memoryd.neighbours`` (when a turn matched), ``memoryd.rerank``
(MMR, lazily: only as far as top_k and the budget need); they carry counts,
never the query or any memory's content.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from opentelemetry import trace

from memoryd.domain import (
    Embedder,
    KeywordHit,
    Memory,
    MemorydError,
    ReadFilter,
    ScoreMask,
    ScoreParts,
    ScoreWeights,
    Turn,
    Unavailable,
    cjk_share,
    fit_budget,
    lifted,
    named_spans,
    recency_at,
    score,
    without_names,
)

from .._config import Scoring
from ._conversation import Search, search_for
from ._entity_guess import EntityGuesses
from ._relevance import REFERENCE, Baseline, QueryBaseline, relevance
from ._ranking import Candidate, DENSE_WEIGHT, Tie, once_per_memory, by_id, diverse, fuse, renumber, similarities, tie_sorted, unit_sum

_log = logging.getLogger("memoryd.server.recall")

# A conversation's keyword text is long (``_conversation``): its best BM25 match is less telling
# than a question's, so the dense channel weighs more (MADial-Bench, bench/RESULTS.md, issue 40).
CONVERSATION_DENSE_WEIGHT = 0.7
# Neighbouring turns (``_with_neighbours``): the turns written just before and after the
# NEIGHBOUR_ANCHORS best matching turns are ranked as a share of them, NEIGHBOUR_SHARE for
# the nearest on each side, times NEIGHBOUR_DECAY for each step further. Named entities
# (``_named``): a memory tagged with an entity the query names gets ENTITY_LIFT added to its
# similarity in the score, and ENTITY_RELEVANCE to its relevance (its cosine is to the query
# without the name, so the name's share of the question is given back explicitly). Measured
# on LoCoMo (bench/RESULTS.md, "Multi-hop and open-domain").
ENTITY_LIFT = 0.3
ENTITY_RELEVANCE = 0.1
NEIGHBOUR_ANCHORS = 3
NEIGHBOURS_BEFORE = 1
NEIGHBOURS_AFTER = 2
NEIGHBOUR_SHARE = 0.8
NEIGHBOUR_DECAY = 0.9


class RecallStore(Protocol):
    """The caller's tenant-bound store session (``memoryd.storage.StoreSession``)."""

    @property
    def tenant(self) -> str: ...

    async def labelled(self, flt: ReadFilter) -> ReadFilter: ...

    async def recall_keys(self, flt: ReadFilter, keys: list[str], now: datetime) -> list[Memory]: ...

    async def fetch(self, flt: ReadFilter, ids: list[str], now: datetime) -> list[Memory]: ...

    async def keyword_search(self, flt: ReadFilter, query: str, limit: int, now: datetime) -> list[KeywordHit]: ...

    async def neighbours(self, flt: ReadFilter, anchors: list[str], before: int, after: int,
                         now: datetime) -> list[tuple[Memory, str, int]]: ...

    async def named_entities(self, flt: ReadFilter, tags: list[str], now: datetime) -> set[str]: ...


class DensePartition(Protocol):
    """One tenant's vectors (``memoryd.storage.IndexPartition``)."""

    async def search(self, flt: ReadFilter, vector: list[float], limit: int,
                     now: datetime) -> list[tuple[str, float, list[float]]]: ...

    async def vectors(self, ids: list[str]) -> dict[str, list[float]]: ...


class DenseIndex(Protocol):
    def partition(self, tenant: str) -> DensePartition: ...


@dataclass
class Recalled:
    ranked: list[tuple[Memory, ScoreParts]] = field(default_factory=list)
    degraded_reason: str = ""


class Recaller:
    """Runs recall for one tenant's view-narrowed filter, through the caller's session."""

    def __init__(self, scoring: Scoring, dense: Callable[[], tuple[DenseIndex, Embedder] | None] = lambda: None, *,
                 tracer: trace.Tracer | None = None) -> None:
        self._tracer = tracer or trace.NoOpTracer()
        self._scoring = scoring
        self._dense_channel = dense  # the active model's index and embedder, if any
        self._baseline: tuple[Embedder, Baseline] | None = None
        self._baseline_lock = asyncio.Lock()
        self._guesses = EntityGuesses()

    def _score(self, m: Memory, similarity: float, weights: ScoreWeights, now: datetime, mask: ScoreMask,
               candidate: Candidate | None = None) -> ScoreParts:
        """The score from what ``mask`` lets count: a hidden input is a constant (importance
        0, not pinned, recency 1, no access reinforcement)."""
        pinned = m.pinned and mask.pinned
        recency = 1.0
        if mask.recency:
            # Counted from the last change or recall, whichever is later (access reinforcement).
            recency = recency_at(now, m.updated_at, m.last_access_at if mask.access else None,
                                 self._scoring.half_life_days.get(m.category), pinned)
        importance = m.importance if mask.importance else 0.0
        if candidate is None:  # a keyed lookup: an exact match
            return score(weights, similarity, recency, importance, pinned)
        return score(weights, similarity, recency, importance, pinned, keyword_rank=candidate.keyword_rank,
                     dense_rank=candidate.dense_rank,
                     relevance=candidate.relevance,
                     cosine=candidate.cosine,
                     keyword_relevance=candidate.keyword_relevance)

    async def recall(self, session: RecallStore, flt: ReadFilter, *, query: str, keys: list[str], top_k: int,
                     token_budget: int, weights: ScoreWeights, now: datetime,
                     mask: ScoreMask = ScoreMask(), min_relevance: float = 0.0,
                     neighbours: bool = True, tie: Tie = by_id, context: Sequence[Turn] = ()) -> Recalled:
        """``context`` is the conversation the request comes from, most recent turn last
        (``_conversation``): it changes what is searched for, never what may be returned.
        ``tie`` orders memories of equal score (and equal raw scores within a channel): the
        guard's, so only what the caller receives of a memory decides. It is asked once per
        memory: the channels' ranks, the anchors and the final order all use it."""
        tie = once_per_memory(tie)

        def order(items: Iterable[tuple[Memory, ScoreParts, Any]]) -> list[tuple[Memory, ScoreParts, Any]]:
            return tie_sorted(items, lambda item: -item[1].score,
                              lambda item: (tie(item[0]), item[1].dense_rank, item[1].keyword_rank,
                                            -item[1].relevance))

        result = Recalled()
        scored: dict[str, tuple[Memory, ScoreParts, list[float] | None]] = {}
        flt = await session.labelled(flt)  # once, for every channel below
        if keys:
            with self._tracer.start_as_current_span("memoryd.row_fetch", attributes={"memoryd.keys": len(keys)}):
                keyed = await session.recall_keys(flt, keys, now)
            for m in keyed:
                # A keyed lookup is an exact match: similarity 1.
                scored[m.id] = (m, self._score(m, 1.0, weights, now, mask), None)
        search = search_for(query, context)
        if search.meaning.strip():
            found, named = await self._free_text(session, flt, search, top_k, weights, now, result, mask, tie)
            if neighbours and mask.turns:
                await self._with_neighbours(session, flt, found, weights, now, mask, min_relevance, order)
            for memory_id, (m, parts, vector) in found.items():
                tags = sorted(named.intersection(m.tags))
                if tags:
                    found[memory_id] = (m, lifted(parts, weights, ENTITY_LIFT, ENTITY_RELEVANCE, tags[0]), vector)
            for memory_id, item in found.items():
                if memory_id not in scored and item[1].relevance >= min_relevance:
                    scored[memory_id] = item
        with self._tracer.start_as_current_span("memoryd.rerank",
                                                attributes={"memoryd.candidates": len(scored)}) as span:
            ranked = order(scored.values())
            result.ranked = fit_budget(diverse(ranked, by_text=mask.text), top_k, token_budget,
                                       lambda pair: pair[0].text if mask.text else "")
            span.set_attribute("memoryd.returned", len(result.ranked))
        return result

    async def _with_neighbours(self, session: RecallStore, flt: ReadFilter,
                               found: dict[str, tuple[Memory, ScoreParts, list[float] | None]],
                               weights: ScoreWeights, now: datetime, mask: ScoreMask, min_relevance: float,
                               order: Callable[[Iterable[tuple[Memory, ScoreParts, Any]]],
                                               list[tuple[Memory, ScoreParts, Any]]]) -> None:
        """Rank the turns written next to the NEIGHBOUR_ANCHORS best-scoring turns in ``found``
        that reach ``min_relevance`` as a share of them. A turn is an episodic memory with
        a source turn id (a conversation's record); its neighbours are the turn before it and
        the two after, in its subject, scope and session, among what the filter lets through
        (``RecallStore.neighbours``). A dialogue's answer usually follows the turn that
        matches the question and shares few of its words (bench/RESULTS.md, "Multi-hop
        and open-domain"). A neighbour keeps its own similarity and relevance where they are
        higher, and takes the highest share of its anchors otherwise; its cosine, keyword
        relevance and ranks stay its own (unset or 0 if it was no candidate). Only for a
        caller whose view shows what this reads (``ScoreMask.turns``)."""
        turns = [item for item in found.values()
                 if item[1].relevance >= min_relevance and item[0].category.episodic and item[0].source_turn_id]
        if not turns:
            return
        # The best first; equal scores in recall's order.
        anchors = {m.id: parts for m, parts, _ in order(turns)[:NEIGHBOUR_ANCHORS]}
        with self._tracer.start_as_current_span("memoryd.neighbours") as span:
            near = await session.neighbours(flt, list(anchors), NEIGHBOURS_BEFORE, NEIGHBOURS_AFTER, now)
            span.set_attribute("memoryd.neighbours", len(near))
        best: dict[str, tuple[Memory, float, str]] = {}  # neighbour id → (row, share of its anchor, anchor)
        for m, anchor, place in near:
            share = NEIGHBOUR_SHARE * NEIGHBOUR_DECAY ** (abs(place) - 1)
            held = best.get(m.id)
            if held is None or share * anchors[anchor].similarity > held[1] * anchors[held[2]].similarity:
                best[m.id] = (m, share, anchor)
        for m, share, anchor in best.values():
            lifted_by = anchors[anchor]
            similarity = share * lifted_by.similarity
            own = found.get(m.id)
            if own is not None and own[1].similarity >= similarity:
                continue
            rescored = self._score(m, similarity, weights, now, mask)
            # A memory that was no candidate has no raw signal of its own: relevance 0, no ranks.
            parts = own[1] if own is not None else replace(rescored, relevance=0.0)
            found[m.id] = (m, replace(parts, score=rescored.score, similarity=similarity,
                                      relevance=max(parts.relevance, share * lifted_by.relevance),
                                      neighbour_of=anchor), own[2] if own is not None else None)

    async def _named(self, session: RecallStore, flt: ReadFilter, spans: dict[str, list[tuple[int, int]]],
                     now: datetime) -> dict[str, list[tuple[int, int]]]:
        """Those of ``spans``' tags (``named_spans`` of the query: none when the view hides
        tags) that a memory the caller may read carries, each with the query's spans that name it."""
        if not spans:
            return {}
        with self._tracer.start_as_current_span("memoryd.entities") as span:
            found = await session.named_entities(flt, list(spans), now)
            span.set_attribute("memoryd.entities", len(found))
        return {tag: spans[tag] for tag in found}

    async def _then_dense(self, channel: tuple[DenseIndex, Embedder] | None,
                          named_task: asyncio.Future[dict[str, list[tuple[int, int]]]], session: RecallStore,
                          flt: ReadFilter, search: Search, proposed: dict[str, list[tuple[int, int]]], limit: int,
                          now: datetime) -> tuple[dict[str, list[tuple[int, int]]], Any]:
        """The named entities, and the dense channel's answer to the search's meaning without
        them (or its ``Unavailable``): the tag finds the entity, the meaning is left to the rest.
        The embedding starts before the entity lookup answers, on the text ``_entity_guess``
        expects it to give; if the lookup finds other names, the right text is embedded then."""
        if channel is None:
            return await named_task, None
        guessed = self._unnamed(search, proposed, self._guesses.guess(session.tenant, flt, proposed))
        # From the first embedding's start to the query vector: beside the lookup, so not a
        # ``with`` block of its own.
        span = self._tracer.start_span("memoryd.embed")
        early = asyncio.ensure_future(self._embed(channel[1], guessed))
        try:
            try:
                named = await named_task
            except BaseException:
                early.cancel()
                await asyncio.gather(early, return_exceptions=True)
                raise
            self._guesses.learn(session.tenant, flt, proposed, named)
            texts = self._unnamed(search, proposed, named)
            span.set_attribute("memoryd.guessed", texts == guessed)
            try:
                vector, baseline = await early
                if texts != guessed:
                    vector, baseline = await self._embed(channel[1], texts)
            except Unavailable as error:
                return named, error
        finally:
            span.end()
        try:
            return named, (vector, await self._search(channel[0], session.tenant, flt, vector, limit, now), baseline)
        except Unavailable as error:
            return named, error

    @staticmethod
    def _unnamed(search: Search, proposed: dict[str, list[tuple[int, int]]], names: Iterable[str]) -> list[str]:
        """The texts to embed: the search's meaning (and its focus, if another text) without the
        spans that name ``names`` (tags among ``proposed``, the names text's own spans)."""
        def unnamed(text: str) -> str:
            spans = ({tag: proposed[tag] for tag in names} if search.names == text
                     else {tag: named_spans(text).get(tag, []) for tag in names})
            return without_names(text, [span for found in spans.values() for span in found])

        return [unnamed(search.meaning)] + ([unnamed(search.focus)] if search.focus != search.meaning else [])

    async def _keyword(self, session: RecallStore, flt: ReadFilter, query: str, limit: int,
                       now: datetime) -> tuple[list[KeywordHit], list[Memory]]:
        """The keyword hits, then their rows — read while the query is still being embedded, so
        only the dense channel's other hits are left to read after its search. Started at once,
        beside the entity look-up: once the query embedded in ~17 ms (issue 41's engine), this
        path had become the longer one while it waited for that look-up (bench/RESULTS.md)."""
        with self._tracer.start_as_current_span("memoryd.keyword_search") as span:
            hits = await session.keyword_search(flt, query, limit, now)
            span.set_attribute("memoryd.hits", len(hits))
        return hits, await self._fetch_rows(session, flt, [hit.memory_id for hit in hits], now)

    async def _free_text(self, session: RecallStore, flt: ReadFilter, search: Search, top_k: int, weights: ScoreWeights,
                         now: datetime, result: Recalled, mask: ScoreMask,
                         tie: Tie) -> tuple[dict[str, tuple[Memory, ScoreParts, list[float] | None]], set[str]]:
        """The candidates of both channels, scored, and the entity tags the query names."""
        limit = top_k * 3
        # One dense channel for the whole call: a reindex switching models meanwhile must not
        # fetch the candidates' vectors from another model's collection than the search's.
        channel = self._dense_channel()
        # The entity tags the names text would give; none when the view hides tags.
        proposed = named_spans(search.names) if mask.entities else {}
        named_task = asyncio.ensure_future(self._named(session, flt, proposed, now))
        named_outcome, keyword_outcome = await asyncio.gather(
            self._then_dense(channel, named_task, session, flt, search, proposed, limit, now),
            self._keyword(session, flt, search.words, limit, now),
            return_exceptions=True,
        )
        if isinstance(keyword_outcome, BaseException):
            raise keyword_outcome  # Postgres is the source of truth: without it there is no answer
        if isinstance(named_outcome, BaseException):
            raise named_outcome
        named, dense_outcome = named_outcome
        dense: list[tuple[str, float, list[float]]] = []
        query_vector: list[float] | None = None
        baseline: QueryBaseline | None = None
        if isinstance(dense_outcome, Unavailable) or dense_outcome is None:
            result.degraded_reason = "dense channel unavailable: answered from keywords only"
        elif isinstance(dense_outcome, BaseException):
            raise dense_outcome
        else:
            query_vector, dense, baseline = dense_outcome
        keyword, keyword_rows = keyword_outcome
        candidates = fuse(dense, keyword)
        if not candidates:
            return {}, set(named)
        read = {hit.memory_id for hit in keyword}
        # The dense channel's other rows, and the vectors of keyword-only candidates (for their
        # cosine, and MMR), at the same time.
        dense_rows, fetched = await asyncio.gather(
            self._fetch_rows(session, flt, [i for i in candidates if i not in read], now),
            self._fetch_vectors(channel, session.tenant, [i for i, c in candidates.items() if c.vector is None],
                                query_vector),
        )
        rows = {m.id: m for m in keyword_rows + dense_rows}  # their order is ``tie``'s, below
        renumber(candidates, rows, tie)
        # A vector counts only for a keyword-only candidate whose row came back (its cosine, and MMR).
        kept = [(i, v) for i, v in fetched.items() if i in rows and query_vector is not None]
        if kept:
            cosines = np.array([v for _, v in kept], dtype=np.float64) @ np.asarray(query_vector, dtype=np.float64)
            for (memory_id, vector), cosine in zip(kept, cosines.tolist(), strict=True):
                candidates[memory_id].vector = vector
                candidates[memory_id].cosine = cosine
        query_share = cjk_share(search.meaning)
        chatter = baseline.chatter if baseline is not None else 0.0
        for memory_id, m in rows.items():
            c = candidates[memory_id]
            share = cjk_share(m.text)
            if c.cosine is not None and baseline is not None:
                c.margin = baseline.margin(c.cosine, share)
            c.relevance = relevance(c.margin, c.keyword_relevance, abs(query_share - share), chatter=chatter,
                                    conversation=search.conversation, query_share=query_share)
        closeness = similarities([candidates[i] for i in rows],
                                 dense_weight=CONVERSATION_DENSE_WEIGHT if search.conversation else DENSE_WEIGHT)
        out: dict[str, tuple[Memory, ScoreParts, list[float] | None]] = {}
        for memory_id, m in rows.items():
            c = candidates[memory_id]
            similarity = closeness[memory_id]
            parts = self._score(m, similarity, weights, now, mask, c)
            out[memory_id] = (m, parts, c.vector)
        return out, set(named)

    async def _fetch_rows(self, session: RecallStore, flt: ReadFilter, ids: list[str], now: datetime) -> list[Memory]:
        if not ids:
            return []
        with self._tracer.start_as_current_span("memoryd.row_fetch", attributes={"memoryd.candidates": len(ids)}):
            return await session.fetch(flt, ids, now)

    async def _fetch_vectors(self, channel: tuple[DenseIndex, Embedder] | None, tenant: str, ids: list[str],
                             query_vector: list[float] | None) -> dict[str, list[float]]:
        if not ids or query_vector is None or channel is None:
            return {}
        try:
            with self._tracer.start_as_current_span("memoryd.vector_fetch",
                                                    attributes={"memoryd.candidates": len(ids)}):
                return await channel[0].partition(tenant).vectors(ids)
        except Unavailable:
            return {}  # those candidates are scored on keywords alone; MMR falls back to text

    async def _embed(self, embedder: Embedder, texts: list[str]) -> tuple[list[float], QueryBaseline]:
        """The query vector for the sum of ``texts``' unit vectors (a conversation's meaning and
        its focus, ``_conversation``; a question's one text) and its baseline."""
        background = asyncio.ensure_future(self._background(embedder))
        try:
            # At once: the default embedder has a query thread per core.
            vectors = list(await asyncio.gather(*(embedder.embed_query(text) for text in texts)))
        except BaseException:
            background.cancel()
            await asyncio.gather(background, return_exceptions=True)
            raise
        vector = vectors[0] if len(vectors) == 1 else unit_sum(vectors)
        return vector, (await background).of_query(vector, cjk_share(texts[0]))

    async def _search(self, index: DenseIndex, tenant: str, flt: ReadFilter, vector: list[float], limit: int,
                      now: datetime) -> list[tuple[str, float, list[float]]]:
        with self._tracer.start_as_current_span("memoryd.vector_search") as span:
            hits = await index.partition(tenant).search(flt, vector, limit, now)
            span.set_attribute("memoryd.hits", len(hits))
        return hits

    async def warm_up(self) -> None:
        """Embed the active model's reference sentences now (``_background``: ~80 passages,
        seconds on one core) rather than on a replica's first free-text Recall. Never raises:
        if the model is out, the first query tries again."""
        channel = self._dense_channel()
        if channel is None:
            return
        try:
            await self._background(channel[1])
        except MemorydError as exc:
            _log.warning("the reference sentences are not embedded yet: %s", exc.message)

    async def _background(self, embedder: Embedder) -> Baseline:
        """The background vectors of ``embedder``'s model (``_relevance``): embedded on its
        first query, then kept (a reindex to another model brings another embedder)."""
        known = self._baseline
        if known is None or known[0] is not embedder:
            async with self._baseline_lock:
                known = self._baseline
                if known is None or known[0] is not embedder:
                    known = (embedder, Baseline.of(await embedder.embed_passages(list(REFERENCE))))
                    self._baseline = known
        return known[1]

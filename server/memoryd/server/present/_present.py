"""Every response message built from stored things, as the caller's guard decided.

Each function takes the caller's ``Guard`` and applies its decisions: a field is set only when
the view shows what it is derived from (``Guard.visible``, through ``_memory.memory``), a score
part only when ``Guard.score_mask`` lets its inputs shape the score, a write's answer as its
``WriteItem`` says (blind or not). Nothing here decides a permission or refuses a call; the
guard does. The architecture test (tests/domain/test_architecture.py) checks that no module
outside this package builds a Memory, ScoredMemory, WriteResult, MemoryVersion, PendingValue
or ExtractionJob message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime

from memoryd.domain import (
    Category,
    ErasureReceipt,
    ExtractionJob,
    Memory,
    MemoryVersion,
    Outcome,
    ScoreParts,
    SessionSnapshot,
    View,
    WriteResult,
    blind_answer,
)
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import token_admin_service_pb2 as tokens

from .._enums import (
    CATEGORY,
    CHANGE_KIND,
    ERASE_MODE,
    ERASE_SELECTOR,
    EXTRACTION_JOB_STATE,
    SOURCE_KIND,
    TOKEN_ROLE,
    WRITE_OUTCOME,
)
from ..guard import Guard, TokenGrant, WriteItem
from ._block import render_block
from ._memory import memory, timestamp

TRUST_HIDDEN_REASON = ("stored; whether it replaced the current value or waits as a pending value depends on trust, "
                       "which this agent's view hides")


def answer(guard: Guard, item: WriteItem, result: WriteResult) -> WriteResult:
    """What the caller is told about one written item (see ``_rules``): an unreadable item's
    answer is the same whatever was stored; a readable one's shows what the view covers."""
    return masked_result(guard, result if item.readable else blind_answer(item.draft, result))


def masked_result(guard: Guard, r: WriteResult) -> WriteResult:
    """A write result with only what the view covers: no id without ``id``, no version
    without ``version``, and without ``trust`` no word of whether the value replaced the
    current one or waits pending."""
    if r.outcome in (Outcome.UPDATED, Outcome.VERSIONED, Outcome.PENDING) and "trust" not in guard.visible:
        r = WriteResult(r.memory_id, Outcome.ACCEPTED, TRUST_HIDDEN_REASON, 0)
    return WriteResult(r.memory_id if "id" in guard.visible else "", r.outcome, r.reason,
                       r.version if "version" in guard.visible else 0)


def write_results(results: Iterable[WriteResult]) -> list[svc.WriteResult]:
    """Results already passed through ``answer`` (Write, or an extraction job's stored ones)."""
    return [svc.WriteResult(memory_id=r.memory_id, outcome=WRITE_OUTCOME.to_proto[r.outcome], reason=r.reason,
                            version=r.version) for r in results]


def dropped_counts(dropped: Mapping[str, int]) -> list[svc.DroppedCount]:
    """Counts by reason, in reason order (an extraction job's, or a Write's chunks')."""
    return [svc.DroppedCount(reason=r, count=n) for r, n in sorted(dropped.items())]


def memory_for(guard: Guard, m: Memory) -> pb.Memory:
    return memory(m, guard.visible)


def scored(guard: Guard, m: Memory, parts: ScoreParts) -> svc.ScoredMemory:
    """A recalled memory with the parts of its score that come from what the view shows.

    The score itself was computed with hidden inputs replaced by constants (``score_mask``),
    so it and the ranks tell nothing the view hides; the recency and importance parts are
    left unset when their inputs are hidden (they would only repeat those constants). The
    relevance, cosine and keyword relevance come from the query and the memory's text and key,
    which a view must show to query by text at all (``Guard.check_query``), and the keyword
    statistics of what the caller may read. ``neighbour_of`` names a memory the caller may
    read (the neighbours' anchor passed the same filter), and is left out when ids are hidden.
    ``named_entity`` is one of the memory's own tags, set only when the view shows tags (else
    no entity was looked up: ``ScoreMask.entities``).
    """
    out = svc.ScoredMemory(memory=memory(m, guard.visible), score=parts.score, similarity=parts.similarity,
                           keyword_rank=parts.keyword_rank, dense_rank=parts.dense_rank, relevance=parts.relevance,
                           keyword_relevance=parts.keyword_relevance)
    if parts.cosine is not None:
        out.cosine = parts.cosine
    if parts.neighbour_of and "id" in guard.visible:
        out.neighbour_of = parts.neighbour_of
    mask = guard.score_mask()
    if parts.named_entity and mask.entities:
        out.named_entity, out.entity_lift = parts.named_entity, parts.entity_lift
    if mask.recency:
        out.recency = parts.recency
    if mask.importance:
        out.importance = parts.importance
    return out


# What a memory's place among equals may not depend on: fields the caller's own recalls move
# (batched, so when they show is timing), and the id, which comes last.
_NOT_TIE_BREAKING = ("id", "access_count", "last_access_at")


def tie_key(guard: Guard, m: Memory) -> tuple[bytes, str]:
    """How memories the caller ranks equal are ordered: by what the caller receives of them,
    then by id if the view shows it. The order of two memories then tells nothing their
    answers do not; two that look alike to the view (the id aside) are interchangeable, so
    whichever comes first, the answer is the same."""
    shown = memory(m, guard.visible.difference(_NOT_TIE_BREAKING)).SerializeToString(deterministic=True)
    return shown, m.id if "id" in guard.visible else ""


def version(guard: Guard, v: MemoryVersion) -> svc.MemoryVersion:
    """One version. Its change kind says what the write did — forgot the memory (its status),
    replaced or versioned a value (its category's policy) — so it is set only with ``status``
    and ``category`` visible."""
    out = svc.MemoryVersion(memory=memory(v.memory, guard.visible))
    if guard.shows("status", "category"):
        out.change = CHANGE_KIND.to_proto[v.change]
    if "updated_at" in guard.visible:
        out.recorded_at.CopyFrom(timestamp(v.recorded_at))
    return out


def snapshot(guard: Guard, session_id: str, s: SessionSnapshot | None) -> svc.SessionSnapshot:
    """A session snapshot as ``guard``'s view reads it (``Guard.snapshot_filter``): each memory
    masked as a read masks it; ``None`` (nothing read) is the session alone."""
    out = svc.SessionSnapshot(session_id=session_id if s is None else s.session_id)
    if s is not None:
        if s.summary is not None:
            out.summary.CopyFrom(memory(s.summary, guard.visible))
        out.explicit.extend(memory(m, guard.visible) for m in s.explicit)
        out.inferred.extend(memory(m, guard.visible) for m in s.inferred)
    return out


def block(guard: Guard, memories: list[Memory]) -> str:
    return render_block(memories, guard.visible)


def receipt(guard: Guard, r: ErasureReceipt) -> svc.ErasureReceipt:
    """An erasure's receipt. Its counts cover only what the caller could tell exists (the
    store counts those); the number of versions is a memory's version, so it is left at 0
    unless the view shows ``version``."""
    c = r.counts
    if "version" not in guard.visible:
        c = replace(c, versions=0)
    out = svc.ErasureReceipt(
        erase_id=r.erase_id,
        mode=ERASE_MODE.to_proto[r.mode],
        counts=svc.StoreCounts(memories=c.memories, versions=c.versions, outbox=c.outbox, vectors=c.vectors,
                               jobs=c.jobs, keys=c.keys),
        verified=r.verified,
        started_at=timestamp(r.started_at),
        finished_at=timestamp(r.finished_at),
        unchecked=list(r.unchecked),
        pending=list(r.pending),
    )
    if r.organisation_mentions is not None:  # counted among what the caller reads (``Guard.erase_filter``)
        out.organisation_mentions = r.organisation_mentions
    return out


def view(v: View) -> pb.View:
    def rules(items: Iterable[tuple[Category, tuple[str, ...]]]) -> list[pb.ViewRule]:
        return [pb.ViewRule(category=CATEGORY.to_proto[c], key_patterns=list(p)) for c, p in items]

    return pb.View(
        agent=v.agent,
        read_rules=rules((r.category, r.key_patterns) for r in v.read_rules),
        write_rules=rules((r.category, r.key_patterns) for r in v.write_rules),
        may_erase=v.may_erase,
        visible_fields=sorted(v.visible_fields),
        description=v.description,
        version=v.version,
        erase_selectors=[number for name, number in ERASE_SELECTOR.to_proto.items() if name in v.erase_selectors],
        max_source_kind=SOURCE_KIND.to_proto[v.max_source_kind],
    )


def extraction_job(guard: Guard, j: ExtractionJob) -> svc.ExtractionJob:
    """A job of the caller's own; its results were stored as a blind Write's for the items
    its view could not read, and are masked like a Write's answer."""
    results = [masked_result(guard, r) for r in j.results]
    out = svc.ExtractionJob(id=j.id, subject=j.subject, state=EXTRACTION_JOB_STATE.to_proto[j.state],
                            turns=j.turn_count, attempts=j.attempts, error=j.error, results=write_results(results),
                            dropped=dropped_counts(j.dropped))
    if j.created_at is not None:
        out.created_at.CopyFrom(timestamp(j.created_at))
    if j.finished_at is not None:
        out.finished_at.CopyFrom(timestamp(j.finished_at))
    if j.next_attempt_at is not None:
        out.next_attempt_at.CopyFrom(timestamp(j.next_attempt_at))
    if j.waiting_since is not None:
        out.waiting_since.CopyFrom(timestamp(j.waiting_since))
    return out


def issued_token(grant: TokenGrant, token_id: str, token: str) -> tokens.IssueTokenResponse:
    """A minted token and what the guard let it carry."""
    return tokens.IssueTokenResponse(
        token=token, token_id=token_id, tenant=grant.tenant, agent=grant.agent,
        roles=[TOKEN_ROLE.to_proto[r] for r in sorted(grant.roles)], subject=grant.subject,
        issued_at=timestamp(datetime.fromtimestamp(grant.issued_at, UTC)),
        expires_at=timestamp(datetime.fromtimestamp(grant.expires_at, UTC)))

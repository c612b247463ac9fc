"""The MemoryService's requests about memories: Write, Recall, MemoryView, GetHistory, Erase."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from memoryd.domain import (
    Draft,
    EraseMode,
    EraseSelector,
    ReadFilter,
    Scope,
    SourceKind,
    Stability,
    Turn,
)
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from .._config import Limits
from .._enums import CATEGORY, CONSISTENCY, ERASE_MODE, MEMORY_STATUS, SCOPE, SOURCE_KIND, STABILITY
from ._checker import Checker, uuid_field
from ._turns import check_turns, turns_from


@dataclass(frozen=True)
class Weights:
    similarity: float | None = None
    recency: float | None = None
    importance: float | None = None


@dataclass(frozen=True)
class WriteCommand:
    subject: str
    drafts: list[Draft]
    idempotency_key: str
    request_hash: bytes
    has_turns: bool
    wait_indexed: bool
    turns: tuple[Turn, ...] = ()
    chunk: bool = False  # TURN_MODE_CHUNK: store the turns as chunks; else extract memories from them
    session_id: str = ""  # the session the items (or what is extracted from the turns) join


@dataclass(frozen=True)
class RecallCommand:
    subject: str
    query: str
    keys: list[str]
    filter: ReadFilter
    top_k: int
    token_budget: int
    weights: Weights
    render_block: bool
    min_relevance: float | None = None  # None: the tenant policy's
    neighbours: bool = True  # rank the turns written next to the best episodic match
    context: tuple[Turn, ...] = ()  # the conversation the request comes from, most recent turn last


@dataclass(frozen=True)
class ListCommand:
    subject: str
    filter: ReadFilter
    page_size: int
    page_token: str


@dataclass(frozen=True)
class HistoryCommand:
    subject: str
    memory_id: str
    page_size: int
    page_token: str


@dataclass(frozen=True)
class EraseCommand:
    subject: str  # '' for the organisation
    selector: EraseSelector
    mode: EraseMode
    reason: str
    organisation: bool = False  # scope SCOPE_ORG: the organisation's memories, not a subject's


def draft_from_message(check: Checker, path: str, item: pb.MemoryDraft) -> Draft | None:
    before = len(check.violations)
    category = check.enum(f"{path}.category", item.category, CATEGORY.to_domain, required=True)
    scope = check.enum(f"{path}.scope", item.scope, SCOPE.to_domain, default=Scope.SUBJECT)
    key = check.key(f"{path}.key", item.key)
    text = check.text(f"{path}.text", item.text, check.limits.max_text_bytes)
    if text and not text.strip():
        check.fail(f"{path}.text", "must not be blank")
    session_id = item.session_id  # grammars and fixed sizes are annotated rules (_schema)
    if scope is Scope.SESSION and not session_id:
        check.fail(f"{path}.session_id", "is required for SCOPE_SESSION")
    if scope is not Scope.SESSION and session_id:
        check.fail(f"{path}.session_id", "is only allowed with SCOPE_SESSION")
    if category is not None and category.episodic and key:
        check.fail(f"{path}.key", "must be empty for episodic categories (event, decision)")
    # Their range, [0, 1], is an annotated rule.
    importance = item.importance if item.HasField("importance") else 0.5
    confidence = item.confidence if item.HasField("confidence") else 1.0
    stability = check.enum(f"{path}.stability", item.stability, STABILITY.to_domain, default=Stability.STABLE)
    source_kind = check.enum(f"{path}.source_kind", item.source_kind, SOURCE_KIND.to_domain,
                             default=SourceKind.INPUT)
    # Each turn is checked by the schema; the memory answers to every one, each once.
    turns = tuple(dict.fromkeys(t for t in (item.source_turn_id, *item.source_turn_ids) if t))
    tags = check.tags(f"{path}.tags", item.tags)
    data = check.struct(f"{path}.data", item.data) if item.HasField("data") else None
    valid_from = check.timestamp(item, "valid_from", f"{path}.valid_from")
    valid_until = check.timestamp(item, "valid_until", f"{path}.valid_until")
    if valid_from and valid_until and valid_until <= valid_from:
        check.fail(f"{path}.valid_until", "must be after valid_from")
    if len(check.violations) > before:
        return None
    return Draft(category=category, text=text, scope=scope, session_id=session_id, key=key, data=data,
                 importance=importance, confidence=confidence, stability=stability, pinned=item.pinned,
                 tags=tags, valid_from=valid_from, valid_until=valid_until, source_kind=source_kind,
                 source_turn_ids=turns)


def validate_write(request: svc.WriteRequest, limits: Limits) -> WriteCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    if request.items and request.turns:
        check.fail("turns", "send either items or turns, not both")
    elif not request.items and not request.turns:
        check.fail("items", "at least one item (or turn) is required")
    if len(request.items) > limits.max_items:
        check.fail("items", f"must have at most {limits.max_items} entries")
        check.done()
    drafts = [draft_from_message(check, f"items[{i}]", item) for i, item in enumerate(request.items)]
    for i, item in enumerate(request.items):  # the request's session is the one a session item belongs to
        if request.session_id and item.session_id and item.session_id != request.session_id:
            check.fail(f"items[{i}].session_id", "must be the request's session_id when both are set")
    turns, chunk = check_turns(check, request) if not request.items else ((), False)
    key = request.idempotency_key
    wait_indexed = bool(check.enum("consistency", request.consistency, CONSISTENCY.to_domain))
    check.done()
    # The hash of the deterministic encoding tells a retry from a different request.
    digest = hashlib.sha256(request.SerializeToString(deterministic=True)).digest()
    return WriteCommand(subject, [d for d in drafts if d is not None], key, digest, bool(request.turns),
                        wait_indexed, turns, chunk, request.session_id)


def _filter(check: Checker, flt: pb.MemoryFilter, subject: str) -> ReadFilter:
    categories = tuple(check.enum(f"filter.categories[{i}]", c, CATEGORY.to_domain, required=True)
                       for i, c in enumerate(flt.categories))
    if len(flt.keys) > check.limits.max_keys:
        check.fail("filter.keys", f"must have at most {check.limits.max_keys} entries")
    keys = tuple(check.key(f"filter.keys[{i}]", k) for i, k in enumerate(flt.keys))
    tags = check.tags("filter.tags", flt.tags)
    session_id = flt.session_id
    after = check.timestamp(flt, "updated_after", "filter.updated_after")
    before = check.timestamp(flt, "updated_before", "filter.updated_before")
    return ReadFilter(subject=subject, categories=tuple(c for c in categories if c is not None), keys=keys,
                      tags=tags, session_id=session_id, updated_after=after, updated_before=before,
                      include_org=flt.include_org)


def validate_recall(request: svc.RecallRequest, limits: Limits) -> RecallCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    query = check.text("query", request.query, limits.max_query_bytes)
    if len(request.keys) > limits.max_keys:
        check.fail("keys", f"must have at most {limits.max_keys} entries")
    keys = [check.key(f"keys[{i}]", k) for i, k in enumerate(request.keys)]
    if len(request.context) > limits.max_context_turns:
        check.fail("context", f"must have at most {limits.max_context_turns} turns; send the most recent ones")
        check.done()
    context = turns_from(check, "context", request.context, "send the most recent turns")
    if not query.strip() and not request.context and not keys:
        check.fail("query", "a query, a context or at least one key is required")
    flt = _filter(check, request.filter, subject)
    top_k = request.top_k or 10
    if not 1 <= top_k <= limits.max_top_k:
        check.fail("top_k", f"must be between 1 and {limits.max_top_k}")
    if not 0 <= request.token_budget <= limits.max_token_budget:
        check.fail("token_budget", f"must be between 0 and {limits.max_token_budget}")
    w = request.weights
    weights = Weights(  # each in [0, 1]: an annotated rule
        w.similarity if w.HasField("similarity") else None,
        w.recency if w.HasField("recency") else None,
        w.importance if w.HasField("importance") else None,
    )
    given = [v for v in (weights.similarity, weights.recency, weights.importance) if v is not None]
    if given and len(given) == 3 and not any(v > 0 for v in given):
        check.fail("weights", "at least one weight must be positive")
    min_relevance = request.min_relevance if request.HasField("min_relevance") else None
    check.done()
    return RecallCommand(subject, query, list(dict.fromkeys(keys)), flt, top_k, request.token_budget, weights,
                         request.render_block, min_relevance, not request.exclude_neighbours, context)


def validate_memory_view(request: svc.MemoryViewRequest, limits: Limits) -> ListCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    flt = _filter(check, request.filter, subject)
    for i, s in enumerate(request.statuses):
        if s == pb.MEMORY_STATUS_SUPERSEDED:
            check.fail(f"statuses[{i}]", "superseded values are versions of a memory: read them with GetHistory")
    statuses = tuple(check.enum(f"statuses[{i}]", s, MEMORY_STATUS.to_domain, required=True)
                     for i, s in enumerate(request.statuses) if s != pb.MEMORY_STATUS_SUPERSEDED)
    size = check.page_size("page_size", request.page_size)
    token = request.page_token
    check.done()
    if statuses:
        flt = ReadFilter(**{**flt.__dict__, "statuses": tuple(s for s in statuses if s is not None)})
    return ListCommand(subject, flt, size, token)


def validate_history(request: svc.GetHistoryRequest, limits: Limits) -> HistoryCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    memory_id = uuid_field(check, "memory_id", request.memory_id, required=True)
    size = check.page_size("page_size", request.page_size)
    token = request.page_token
    check.done()
    return HistoryCommand(subject, memory_id, size, token)


def validate_erase(request: svc.EraseRequest, limits: Limits) -> EraseCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    organisation = check.enum("scope", request.scope, SCOPE.to_domain, default=Scope.SUBJECT) is Scope.ORG
    if organisation and subject:
        check.fail("subject", "must be empty with scope SCOPE_ORG (the organisation's memories are nobody's)")
    elif not organisation and not request.subject:
        check.fail("subject", "is required")
    mode = check.enum("mode", request.mode, ERASE_MODE.to_domain, required=True)
    reason = request.reason
    which = request.WhichOneof("selector")
    selector = EraseSelector()
    if which == "ids":
        ids = request.ids.ids
        if len(ids) > limits.max_ids:
            check.fail("ids.ids", f"must have at most {limits.max_ids} entries")
        else:
            selector = EraseSelector(ids=tuple(dict.fromkeys(uuid_field(check, f"ids.ids[{i}]", v, required=True)
                                                                   for i, v in enumerate(ids))))
    elif which == "key":
        selector = EraseSelector(key=check.key("key", request.key))
    elif which == "source_turn_id":
        selector = EraseSelector(source_turn_id=request.source_turn_id)
    elif which == "category":
        selector = EraseSelector(category=check.enum("category", request.category, CATEGORY.to_domain,
                                                     required=True))
    elif which == "all_of_subject":
        if not request.all_of_subject:
            check.fail("all_of_subject", "must be true when set")
        selector = EraseSelector(all_of_subject=True)
    check.done()
    return EraseCommand(subject, selector, mode, reason, organisation)

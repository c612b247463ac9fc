"""A stored memory as the contract's ``Memory`` message, with only the fields a view shows.

The one field mask every answer applies (``_present``'s answers, ``_block``'s prompt lines,
the tie-breaking order): a field is set only when it is among the ``visible`` fields the
caller's guard passes in.
"""

from __future__ import annotations

from datetime import datetime

from google.protobuf import timestamp_pb2

from memoryd.domain import Memory, PendingValue, SourceKind
from memoryd.v1 import memory_pb2 as pb

from .._enums import CATEGORY, MEMORY_STATUS, SCOPE, SOURCE_KIND, STABILITY


def timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def memory(m: Memory, visible: frozenset[str]) -> pb.Memory:
    """The memory with only the ``visible`` fields set."""
    out = pb.Memory()
    simple = {
        "id": m.id,
        "subject": m.subject,
        "scope": SCOPE.to_proto[m.scope],
        "session_id": m.session_id,
        "category": CATEGORY.to_proto[m.category],
        "key": m.key,
        "text": m.text,
        "importance": m.importance,
        "confidence": m.confidence,
        "stability": STABILITY.to_proto[m.stability],
        "pinned": m.pinned,
        "version": m.version,
        "status": MEMORY_STATUS.to_proto[m.status],
        "access_count": m.access_count,
        "trust": m.trust,
    }
    for name, value in simple.items():
        if name in visible:
            setattr(out, name, value)
    if "tags" in visible:
        out.tags.extend(m.tags)
    if "data" in visible and m.data is not None:
        out.data.update(m.data)
    for name in ("valid_from", "valid_until", "created_at", "updated_at", "last_access_at", "expires_at"):
        value = getattr(m, name)
        if name in visible and value is not None:
            getattr(out, name).CopyFrom(timestamp(value))
    out.content_unavailable = m.content_unavailable  # always: it says why text and data are empty
    if "provenance" in visible:
        out.provenance.CopyFrom(_provenance(m.agent, m.source_kind, m.source_turn_ids))
    if "pending" in visible:
        out.pending.extend(pending(p, visible) for p in m.pending)
    return out


def pending(p: PendingValue, visible: frozenset[str]) -> pb.PendingValue:
    """A pending value; its text, data and provenance only where the view shows the memory's."""
    out = pb.PendingValue(id=p.id)
    if "trust" in visible:
        out.trust = p.trust
    if "updated_at" in visible:
        out.written_at.CopyFrom(timestamp(p.written_at))
    if "text" in visible:
        out.text = p.text
    if "data" in visible and p.data is not None:
        out.data.update(p.data)
    if "provenance" in visible:
        out.provenance.CopyFrom(_provenance(p.agent, p.source_kind, p.source_turn_ids))
    return out


def _provenance(agent: str, kind: SourceKind, turns: tuple[str, ...]) -> pb.Provenance:
    """Who wrote a value and from what: every source turn, and the first alone for clients
    that know ``source_turn_id`` only."""
    return pb.Provenance(agent=agent, source_kind=SOURCE_KIND.to_proto[kind], source_turn_id=turns[0] if turns else "",
                         source_turn_ids=turns)

"""Row ↔ domain conversion (the WHERE clause every read shares is in ``_filters``)."""

from __future__ import annotations

from typing import Any

from memoryd.domain import (
    Category,
    Change,
    Draft,
    Memory,
    MemoryVersion,
    Scope,
    SourceKind,
    Stability,
    Status,
    TenantPolicy,
)

# text/data are NULL in rows written since encryption (0007), key/tags empty since 0012: their
# content is in text_ct/data_ct/key_ct/tags_ct and is opened with the subject's data key
# (``_envelope``) before ``memory_from_row``.
MEMORY_COLUMNS = (
    "id, subject, scope, session_id, category, key, text, data, text_ct, data_ct, key_ct, tags_ct, importance, "
    "confidence, stability, pinned, tags, valid_from, valid_until, agent, source_kind, source_turn_id, "
    "source_turn_ids, version, status, created_at, updated_at, access_count, last_access_at, expires_at, trust"
)
_DEFAULT_POLICY = TenantPolicy()


def stored_trust(row: dict[str, Any]) -> float:
    """The row's trust; rows written before trust was recorded read as the default trust of
    their source kind."""
    trust = row.get("trust")
    return float(trust) if trust is not None else _DEFAULT_POLICY.trust_of(SourceKind(row["source_kind"]))


def source_turns(row: dict[str, Any]) -> tuple[str, ...]:
    """The source turns of a memory, version or pending value row (migration 0026).

    ``source_turn_id`` is always the first of ``source_turn_ids``; a row where it is not was
    written by a server of the version before (which knows the one column only) and has that
    one turn."""
    first = row["source_turn_id"]
    turns = tuple(row.get("source_turn_ids") or ())
    if not first:
        return ()
    return turns if turns[:1] == (first,) else (first,)


def joined_turns(stored: tuple[str, ...], added: tuple[str, ...]) -> tuple[str, ...]:
    """The turns of a memory that ``added``'s turns said again or were merged into: all of
    them, each once, in this order. A privacy reviewer's reading of "erase by any turn that said
    it removes it": the memory holds what each of them said (``Erase`` removes it whole)."""
    return tuple(dict.fromkeys((*stored, *added)))


def turn_values(turns: tuple[str, ...]) -> tuple[str, list[str]]:
    """(source_turn_id, source_turn_ids) as stored (migration 0026)."""
    return (turns[0] if turns else "", list(turns))


def memory_from_row(row: dict[str, Any]) -> Memory:
    """A row opened by ``_envelope.open_row`` (its text and data in the clear) as a Memory."""
    return Memory(
        id=str(row["id"]),
        subject=row["subject"],
        scope=Scope(row["scope"]),
        session_id=row["session_id"],
        category=Category(row["category"]),
        key=row["key"],
        text=row["text"],
        data=row["data"],
        importance=float(row["importance"]),
        confidence=float(row["confidence"]),
        stability=Stability(row["stability"]),
        pinned=row["pinned"],
        tags=tuple(row["tags"]),
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        agent=row["agent"],
        source_kind=SourceKind(row["source_kind"]),
        source_turn_ids=source_turns(row),
        version=row["version"],
        status=Status(row["status"]),
        created_at=row["created_at"],
        updated_at=row.get("updated_at") or row["recorded_at"],
        access_count=row.get("access_count", 0),
        last_access_at=row.get("last_access_at"),
        content_unavailable=row.get("content_unavailable", False),
        expires_at=row.get("expires_at"),
        trust=stored_trust(row),
    )


def version_from_row(row: dict[str, Any]) -> MemoryVersion:
    fields = dict(row)
    fields["id"] = row["memory_id"]
    return MemoryVersion(memory=memory_from_row(fields), change=Change(row["change"]), recorded_at=row["recorded_at"])


def same_value(row: dict[str, Any], draft: Draft) -> bool:
    """Whether writing ``draft`` over the stored ``row`` would change nothing the caller set."""
    return (
        row["text"] == draft.text
        and row["data"] == draft.data
        and abs(float(row["importance"]) - draft.importance) < 1e-6
        and abs(float(row["confidence"]) - draft.confidence) < 1e-6
        and row["stability"] == draft.stability.value
        and row["pinned"] == draft.pinned
        and sorted(row["tags"]) == sorted(draft.tags)
        and row["valid_from"] == draft.valid_from
        and row["valid_until"] == draft.valid_until
    )

"""Source trust: pending values of keyed memories.

A write to a keyed memory whose source is trusted less than the current value's does not
replace it: the value is kept in ``pending_values`` (sealed with the owner's data key, like
memory content, under AAD (tenant, subject, pending id, 'pending_text' / 'pending_data'),
so a pending ciphertext never opens as a memory's or another pending value's). A later write
of at least the current trust settles (drops) the pending values it outranks; ResolveConflict
keeps the current value or accepts a pending one (``_session.resolve``). Everything here
runs inside the caller's transaction.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag

from memoryd.domain import DataKeyUnavailable, Draft, Memory, PendingValue, SourceKind, Stability, Status

from ..keys import DataKey
from ..postgres import TenantConn
from ._rows import joined_turns, source_turns, turn_values

if TYPE_CHECKING:
    from ._bound import Bound

TEXT_FIELD = "pending_text"
DATA_FIELD = "pending_data"
TAGS_FIELD = "pending_tags"
_COLUMNS = (
    "id, memory_id, subject, text_ct, data_ct, importance, confidence, stability, pinned, tags, tags_ct, valid_from, "
    "valid_until, agent, source_kind, source_turn_id, source_turn_ids, trust, written_at"
)


@dataclass(frozen=True)
class HeldValue:
    """A pending value opened for acceptance: the draft to write and who wrote it."""

    id: str
    draft: Draft
    agent: str
    trust: float


async def hold(conn: TenantConn, key: DataKey, memory_id: str, owner: str, draft: Draft, agent: str,
               trust: float, digest: bytes) -> str:
    """Keep ``draft`` as a pending value of ``memory_id``; the id of the pending value.

    The same text from the same kind of source is kept once (its latest write wins, and it
    answers to the turns of both).
    """
    tenant = conn.tenant
    cur = await conn.execute(
        "DELETE FROM pending_values WHERE tenant_id = %s AND memory_id = %s AND text_hash = %s "
        "AND source_kind = %s RETURNING id, source_turn_id, source_turn_ids",
        (tenant, memory_id, digest, draft.source_kind.value),
    )
    again = await cur.fetchone()
    pending_id = str(again["id"]) if again else str(uuid.uuid4())
    turns = joined_turns(source_turns(again), draft.source_turn_ids) if again else draft.source_turn_ids
    data_ct = None
    if draft.data is not None:
        data_ct = key.seal(pending_id, DATA_FIELD, json.dumps(draft.data, sort_keys=True,
                                                              separators=(",", ":")).encode())
    await conn.execute(
        "INSERT INTO pending_values (tenant_id, id, memory_id, subject, text_ct, data_ct, importance, confidence, "
        "stability, pinned, tags_ct, valid_from, valid_until, agent, source_kind, source_turn_id, source_turn_ids, "
        "trust, text_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (tenant, pending_id, memory_id, owner, key.seal(pending_id, TEXT_FIELD, draft.text.encode()), data_ct,
         draft.importance, draft.confidence, draft.stability.value, draft.pinned,
         key.seal(pending_id, TAGS_FIELD, json.dumps(sorted(set(draft.tags))).encode()) if draft.tags else None,
         draft.valid_from, draft.valid_until, agent, draft.source_kind.value,
         *turn_values(turns), trust, digest),
    )
    return pending_id


async def settle(conn: TenantConn, memory_id: str, trust: float) -> int:
    """Drop the memory's pending values trusted no more than ``trust``; how many."""
    tenant = conn.tenant
    cur = await conn.execute(
        "DELETE FROM pending_values WHERE tenant_id = %s AND memory_id = %s AND trust <= %s",
        (tenant, memory_id, trust),
    )
    return int(cur.rowcount)


async def discard(conn: TenantConn, memory_ids: list[str], pending_id: str = "") -> int:
    """Drop the pending values of ``memory_ids`` (only ``pending_id`` if given); how many."""
    tenant = conn.tenant
    if pending_id:
        cur = await conn.execute(
            "DELETE FROM pending_values WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) AND id = %s",
            (tenant, memory_ids, pending_id),
        )
    else:
        cur = await conn.execute(
            "DELETE FROM pending_values WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])", (tenant, memory_ids)
        )
    return int(cur.rowcount)


def _open(row: dict[str, Any], key: DataKey | None) -> tuple[str, dict[str, Any] | None, tuple[str, ...], bool]:
    """(text, data, tags, unavailable) of a pending value (tags as stored before 0012 sealed them)."""
    pending_id = str(row["id"])
    try:
        if key is None:
            raise InvalidTag()
        text = key.open(pending_id, TEXT_FIELD, bytes(row["text_ct"])).decode()
        data = json.loads(key.open(pending_id, DATA_FIELD, bytes(row["data_ct"]))) if row["data_ct"] else None
        tags = (tuple(json.loads(key.open(pending_id, TAGS_FIELD, bytes(row["tags_ct"]))))
                if row["tags_ct"] is not None else tuple(row["tags"]))
        return text, data, tags, False
    except (InvalidTag, UnicodeDecodeError, ValueError):
        return "", None, (), True


async def take(session: Bound, conn: Any, memory: Memory, pending_id: str) -> HeldValue | None:
    """The pending value ``pending_id`` of ``memory`` as a draft, removed from the pending
    values; None if the memory has no such pending value. Raises ``DataKeyUnavailable`` if
    its content cannot be opened (the caller's transaction then rolls back)."""
    tenant, keys = session.tenant, session.keys
    cur = await conn.execute(
        f"DELETE FROM pending_values WHERE tenant_id = %s AND memory_id = %s AND id = %s RETURNING {_COLUMNS}",
        (tenant, memory.id, pending_id),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    key = await keys.for_write(conn, row["subject"])
    text, data, tags, unavailable = _open(row, key)
    if unavailable:
        raise DataKeyUnavailable("the pending value cannot be decrypted")
    draft = Draft(category=memory.category, text=text, scope=memory.scope, session_id=memory.session_id,
                  key=memory.key, data=data, importance=float(row["importance"]),
                  confidence=float(row["confidence"]), stability=Stability(row["stability"]), pinned=row["pinned"],
                  tags=tags, valid_from=row["valid_from"], valid_until=row["valid_until"],
                  source_kind=SourceKind(row["source_kind"]), source_turn_ids=source_turns(row))
    return HeldValue(str(row["id"]), draft, row["agent"], float(row["trust"]))


async def load(session: Bound, conn: Any, memory_ids: list[str]) -> dict[str, list[PendingValue]]:
    """The pending values of ``memory_ids``, oldest first, opened (or marked unavailable)."""
    tenant, keys = session.tenant, session.keys
    if not memory_ids:
        return {}
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM pending_values WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) "
        "ORDER BY written_at, id",
        (tenant, memory_ids),
    )
    rows = await cur.fetchall()
    if not rows:
        return {}
    opened = await keys.for_read(conn, {r["subject"] for r in rows})
    out: dict[str, list[PendingValue]] = defaultdict(list)
    for row in rows:
        text, data, _, unavailable = _open(row, opened.get(row["subject"]))
        out[str(row["memory_id"])].append(PendingValue(
            id=str(row["id"]), text=text, data=data, agent=row["agent"], source_kind=SourceKind(row["source_kind"]),
            source_turn_ids=source_turns(row), trust=float(row["trust"]), written_at=row["written_at"],
            content_unavailable=unavailable,
        ))
    return out


async def with_pending(session: Bound, conn: Any, memories: list[Memory]) -> list[Memory]:
    """``memories`` with the pending values of the active ones attached."""
    pending = await load(session, conn, [m.id for m in memories if m.status is Status.ACTIVE])
    if not pending:
        return memories
    return [replace(m, pending=tuple(pending[m.id])) if m.id in pending and m.status is Status.ACTIVE else m
            for m in memories]

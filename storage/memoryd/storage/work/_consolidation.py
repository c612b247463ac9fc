"""Consolidation in Postgres: a subject's episodic fragments in, one profile memory out.

The server's consolidation pass (``memoryd.server.ingest._consolidation``) reads the fragments
here, decides what one group of them says, and hands it back to ``apply``, which in ONE
transaction:

1. locks the subject's key row, then the group's memory rows (Erase's lock order) and gives
   up on the group if any of them is no longer an active, unpinned episodic memory — the
   model summarised what it saw, not what is there now;
2. writes the profile memory through the normal conflict policies and source trust
   (``ItemWriter``, the tenant's policy), as agent "memoryd";
3. forgets the fragments exactly as Erase FORGET does (``forget_ids``: a ``forgotten``
   version each, their vectors' deletion queued) — unless the profile value was only kept
   as PENDING beside a more trusted one: then the fragments stay, as its evidence;
4. appends a ``consolidate`` audit event (the profile memory id, then the fragment ids) and
   counts ``consolidation.groups`` / ``consolidation.fragments`` (``_counters``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from memoryd.domain import AuditTag, Category, Draft, Outcome, WriteResult

from ..postgres import audit
from ..postgres import counters
from .._filters import LIVE_AT, LIVE_NOW
from ..memories import Stores, StoreSession, forget_ids
from ..memories import joined_turns, source_turns

AGENT = "memoryd"
ACTION = "consolidate"
EPISODIC = [c.value for c in Category if c.episodic]


@dataclass(frozen=True)
class Fragment:
    """An active, unpinned episodic memory of the subject, opened."""

    id: str
    category: Category
    text: str
    importance: float
    time: datetime  # when it happened (valid_from), else when it was written


@dataclass(frozen=True)
class Consolidated:
    """What ``apply`` did for one group: the profile write and the fragments it forgot."""

    result: WriteResult
    forgotten: tuple[str, ...]


class Consolidations:
    """The storage side of consolidation, on the store's app-role pool."""

    def __init__(self, store: Stores) -> None:
        self._store = store

    def session(self, tenant: str) -> StoreSession:
        """The tenant's session of the consolidation agent (``AGENT``): a pass reads, writes
        and counts through it."""
        return self._store.session(tenant, AGENT)

    async def fragments(self, session: StoreSession, subject: str, now: datetime) -> list[Fragment]:
        """The subject's live (``LIVE_AT``), unpinned events and decisions (subject scope), oldest
        first; those whose content cannot be opened are left out."""
        tenant = session.tenant
        async with session.transaction() as conn:
            cur = await conn.execute(
                "SELECT id, subject, category, text, data, text_ct, data_ct, importance, "
                "COALESCE(valid_from, created_at) AS at FROM memories WHERE tenant_id = %s AND subject = %s "
                f"AND scope = 'subject' AND {LIVE_AT} AND NOT pinned AND category = ANY(%s) "
                "ORDER BY created_at, id",
                (tenant, subject, now, now, EPISODIC),
            )
            rows = await session.keys.open_rows(conn, await cur.fetchall())
        return [Fragment(str(r["id"]), Category(r["category"]), r["text"], float(r["importance"]), r["at"])
                for r in rows if not r["content_unavailable"] and r["text"].strip()]

    async def apply(self, session: StoreSession, subject: str, draft: Draft, fragment_ids: list[str],
                    details: Mapping[str, object] | None = None) -> Consolidated | None:
        """Write ``draft`` and forget the fragments, in one transaction; None (nothing done) if
        a fragment changed since it was read."""
        tenant = session.tenant
        async with session.transaction() as conn:
            key = await session.keys.for_write(conn, subject)
            cur = await conn.execute(
                "SELECT id, source_turn_id, source_turn_ids FROM memories WHERE tenant_id = %s AND subject = %s "
                f"AND scope = 'subject' AND id = ANY(%s::uuid[]) AND {LIVE_NOW} AND NOT pinned AND category = ANY(%s) "
                "ORDER BY id FOR UPDATE",
                (tenant, subject, fragment_ids, EPISODIC),
            )
            rows = await cur.fetchall()
            if len(rows) != len(set(fragment_ids)):
                return None
            # The profile holds what the fragments' turns said: an erase by any of them removes it.
            turns = draft.source_turn_ids
            for row in rows:
                turns = joined_turns(turns, source_turns(row))
            draft = replace(draft, source_turn_ids=turns)
            writer = session.item_writer(conn, subject, first_key=key)
            result = await writer.write(draft)
            forgotten: list[str] = []
            if result.outcome is not Outcome.PENDING:
                forgotten = list(fragment_ids)
                await forget_ids(conn, subject, forgotten)
            await audit.append(conn, AGENT, subject, ACTION, [result.memory_id, *forgotten], AuditTag(),
                               {"memory": result.memory_id, "outcome": result.outcome.value,
                                "fragments": forgotten, **(details or {})})
            await counters.bump(conn, {"consolidation.groups": 1, "consolidation.fragments": len(forgotten),
                                               "consolidation.pending": int(result.outcome is Outcome.PENDING)})
            return Consolidated(result, tuple(forgotten))

    async def count(self, session: StoreSession, counts: Mapping[str, int]) -> None:
        """Count what a pass did not write (skips, parse failures, outages, drops)."""
        async with session.transaction() as conn:
            await counters.bump(conn, counts)

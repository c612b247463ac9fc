"""What a session reads: keyed reads, the keyword channel, neighbours, named entities,
listings, history and a subject's time zones — each in one transaction of the session's tenant, each naming the
tenant in its WHERE clause too, each through the filter the caller's guard decided.
"""

from __future__ import annotations

import builtins
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from psycopg import sql

from cryptography.exceptions import InvalidTag

from memoryd.domain import (Category, ChangeKind, FailedPrecondition, KeywordHit, Listing, LoggedChange, Memory,
                            MemoryVersion, NotFound, Page, ReadFilter, Scope, Status)

from .._filters import LIVE_NOW, in_states, read_conditions
from ..keys import WRAPPED_KEY_COLUMN
from ..keywords import keyword_search
from . import _trust as trust
from ._bound import Bound
from ._labels import needs_names
from ._rows import MEMORY_COLUMNS, memory_from_row, version_from_row
from ._trust import with_pending

# The episodic memories next to an anchor on one side, nearest first (``neighbours``): the
# read's WHERE clause (liveness at the caller's clock included), then the anchor's subject,
# scope, session and place in the write order (migration 0019). Bare column names resolve to
# the nearest ``memories``, as ``read_conditions`` needs.
_WRITTEN_NEXT_TO = (
    "SELECT id, seq, {direction} AS direction, {anchor} AS anchor FROM memories WHERE {where} "
    "AND category IN ('event', 'decision') AND source_turn_id <> '' "
    "AND (subject, scope, session_id) = (SELECT subject, scope, session_id FROM memories "
    "WHERE tenant_id = %s AND id = %s) "
    "AND seq {side} (SELECT seq FROM memories WHERE tenant_id = %s AND id = %s) "
    "ORDER BY seq {order} LIMIT %s"
)


# What a Watch whose cursor is older than the change log hears.
CURSOR_EXPIRED_MESSAGE = ("this cursor is older than the changes the server keeps: read the current state with "
                          "MemoryView, then Watch without a cursor")


def _opened_key(key: Any, memory_id: str, sealed: bytes) -> str | None:
    """An erased memory's key name, or None when its subject's data key cannot open it."""
    if key is None:
        return None
    try:
        return str(key.open_key(memory_id, sealed))
    except (InvalidTag, UnicodeDecodeError):
        return None


class Reading(Bound):
    """The session's reads."""

    async def labelled(self, flt: ReadFilter) -> ReadFilter:
        """``flt`` with its key and tag labels (``_labels``), for a read that also searches the
        vector index; every method here labels an unlabelled filter itself."""
        if flt.labels is not None or not needs_names(flt):
            return await self.label(None, flt)
        async with self.transaction() as conn:
            return await self.label(conn, flt)

    async def recall_keys(self, flt: ReadFilter, keys: list[str], now: datetime) -> list[Memory]:
        """Live memories with one of ``keys`` that pass the filter, in id order (the caller
        ranks them)."""
        labels = [self.hasher.label(k) for k in keys]
        return await self._active(flt, now, sql.SQL("key_label = ANY(%b)"), labels)

    async def keyword_search(self, flt: ReadFilter, query: str, limit: int,
                             now: datetime) -> list[KeywordHit]:
        """The keyword channel: BM25 over the filtered memories' term hashes."""
        async with self.transaction(pipelined=True) as conn:
            flt = await self.label(conn, flt)
            return await keyword_search(conn, flt, query, self.hasher, limit, now)

    async def fetch(self, flt: ReadFilter, ids: list[str], now: datetime) -> list[Memory]:
        """The active, unexpired rows among ``ids`` that pass the filter — how every hit of an
        index is checked against the source of truth before it is served."""
        if not ids:
            return []
        return await self._active(flt, now, sql.SQL("id = ANY(%s::uuid[])"), ids)

    async def neighbours(self, flt: ReadFilter, anchors: list[str], before: int, after: int,
                         now: datetime) -> list[tuple[Memory, str, int]]:
        """The turns written just around each of ``anchors`` (episodic memories the caller may
        read): episodic memories with a source turn, each with the anchor it is next to and its
        place relative to it (-1: the one just before, 1: just after), at most ``before`` before
        and ``after`` after each anchor, in the anchor's subject, scope and session. A memory
        next to two anchors comes once for each.
        They are counted among the active, unexpired memories that pass the filter only, so a
        memory the caller may not read neither shows up nor takes a place."""
        tenant = self.tenant
        if (before <= 0 and after <= 0) or not anchors:
            return []
        # One transaction, pipelined: the places, then the rows.
        async with self.transaction(pipelined=True) as conn:
            flt = await self.label(conn, flt)
            where, params = read_conditions(self, flt, live_at=now)
            sides = [(sql.SQL(_WRITTEN_NEXT_TO).format(where=where, side=sql.SQL(side), order=sql.SQL(order),
                                                       direction=sql.Literal(direction), anchor=sql.Literal(i)),
                      [*params, tenant, anchor, tenant, anchor, limit])
                     for i, anchor in enumerate(anchors)
                     for side, order, direction, limit in (("<", "DESC", -1, before), (">", "ASC", 1, after))
                     if limit > 0]
            query = sql.SQL(" UNION ALL ").join(sql.SQL("({})").format(part) for part, _ in sides)
            cur = await conn.execute(query, [value for _, values in sides for value in values])
            rows = await cur.fetchall()
            places: list[tuple[str, str, int]] = []
            for i, anchor in enumerate(anchors):
                for direction in (-1, 1):
                    side = sorted((row for row in rows if row["anchor"] == i and row["direction"] == direction),
                                  key=lambda row: row["seq"] * direction)
                    places.extend((str(row["id"]), anchor, direction * place)
                                  for place, row in enumerate(side, start=1))
            if not places:
                return []
            found = {m.id: m for m in await self._read_active(conn, flt, now, sql.SQL("id = ANY(%s::uuid[])"),
                                                              sorted({memory_id for memory_id, _, _ in places}))}
        return [(found[memory_id], anchor, place) for memory_id, anchor, place in places if memory_id in found]

    async def named_entities(self, flt: ReadFilter, tags: list[str], now: datetime) -> set[str]:
        """Those of ``tags`` that some active, unexpired memory passing the filter carries: how
        recall learns which entities a query names (``domain.named_spans``) among what the
        caller may read, and nothing of the rest."""
        if not tags:
            return set()
        hasher = self.hasher
        by_label = {hasher.label(tag): tag for tag in tags}
        # Pipelined: on the query's way to its embedding, so BEGIN and the tenant go with it.
        async with self.transaction(pipelined=True) as conn:
            where, params = read_conditions(self, await self.label(conn, flt), live_at=now)
            # One probe of the tag index per label (migration 0020), stopping at the first
            # memory that carries it: a tag on half a subject's memories costs no more than one
            # on a single memory.
            query = sql.SQL(
                "SELECT label FROM unnest(%b::bytea[]) AS label WHERE EXISTS "
                "(SELECT 1 FROM memories WHERE tag_labels @> ARRAY[label] AND {where})"
            ).format(where=where)
            cur = await conn.execute(query, [list(by_label), *params])
            return {by_label[bytes(row["label"])] for row in await cur.fetchall()}

    async def _active(self, flt: ReadFilter, now: datetime, which: sql.Composable,
                      values: list[Any]) -> list[Memory]:
        # Pipelined: BEGIN and the tenant go with the read, COMMIT right after it (a Recall
        # reads rows twice on its critical path; each round trip less is ~0.3 ms of Python).
        async with self.transaction(pipelined=True) as conn:
            return await self._read_active(conn, flt, now, which, values)

    async def _read_active(self, conn: Any, flt: ReadFilter, now: datetime, which: sql.Composable,
                           values: list[Any]) -> list[Memory]:
        """The live memories that pass the filter and ``which`` (its one placeholder: ``values``),
        in ``conn``'s transaction."""
        # One statement: the rows, their subject's wrapped key, and whether any has pending values.
        where, params = read_conditions(self, await self.label(conn, flt), live_at=now)
        query = sql.SQL(
            "SELECT {cols}, {wrapped}, EXISTS (SELECT 1 FROM pending_values p WHERE p.tenant_id = "
            "memories.tenant_id AND p.memory_id = memories.id) AS has_pending FROM memories "
            "WHERE {where} AND {which} ORDER BY id"
        ).format(cols=sql.SQL(MEMORY_COLUMNS), wrapped=sql.SQL(WRAPPED_KEY_COLUMN), where=where, which=which)
        cur = await conn.execute(query, [*params, values])
        rows = await cur.fetchall()
        pending = any([row.pop("has_pending") for row in rows])
        memories = [memory_from_row(row) for row in await self.keys.open_with_keys(rows)]
        return await with_pending(self, conn, memories) if pending else memories

    async def list(self, flt: ReadFilter, page: Page, now: datetime | None = None) -> Listing:
        """One page of memories, most recently updated first (keyset pagination). An active
        memory past its time to live is not listed (the sweeper soon marks it forgotten)."""
        async with self.transaction() as conn:
            flt = await self.label(conn, flt)
            where, params = read_conditions(self, flt)
            states, state_params = in_states(flt, now or datetime.now(UTC))
            clauses = [where, states]
            params += state_params
            if page.by_id and page.after_id:
                clauses.append(sql.SQL("id < %s::uuid"))
                params.append(page.after_id)
            elif page.after_updated_at is not None:
                clauses.append(sql.SQL("(updated_at, id) < (%s, %s)"))
                params += [page.after_updated_at, page.after_id]
            order = "id DESC" if page.by_id else "updated_at DESC, id DESC"
            query = sql.SQL("SELECT {cols} FROM memories WHERE {where} ORDER BY {order} LIMIT %s").format(
                cols=sql.SQL(MEMORY_COLUMNS), where=sql.SQL(" AND ").join(clauses), order=sql.SQL(order)
            )
            cur = await conn.execute(query, [*params, page.size + 1])
            rows = await self.keys.open_rows(conn, await cur.fetchall())
            memories = await with_pending(self, conn, [memory_from_row(r) for r in rows[: page.size]])
        return Listing(memories, has_more=len(rows) > page.size)

    async def history(self, flt: ReadFilter, memory_id: str, after_version: int,
                      size: int) -> tuple[builtins.list[MemoryVersion], bool]:
        """Versions of one memory the filter allows, newest first, while the memory itself is
        in one of the filter's statuses (``in_states``). NotFound if there is none."""
        async with self.transaction() as conn:
            where, params = read_conditions(self, await self.label(conn, flt))
            states, state_params = in_states(flt, datetime.now(UTC), table="m")
            query = sql.SQL(
                "SELECT * FROM memory_versions WHERE {where} AND memory_id = %s AND version < %s "
                "AND EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = memory_versions.tenant_id "
                "AND m.id = memory_versions.memory_id AND {states}) ORDER BY version DESC LIMIT %s"
            ).format(where=where, states=states)
            cur = await conn.execute(query, [*params, memory_id, after_version or 2**31 - 1, *state_params,
                                             size + 1])
            rows = await self.keys.open_rows(conn, await cur.fetchall(), id_column="memory_id")
            versions = [version_from_row(r) for r in rows[:size]]
            # The pending values belong to the current value: shown on the active version.
            pending = await trust.load(self, conn, [memory_id])
        if not rows and not after_version:
            raise NotFound("no such memory for this subject")
        if pending:
            versions = [replace(v, memory=replace(v.memory, pending=tuple(pending[memory_id])))
                        if v.memory.status is Status.ACTIVE else v for v in versions]
        return versions, len(rows) > size

    # -- the change log (migration 0029), as Watch reads it ---------------------------------

    async def change_head(self) -> int:
        """The tenant's last committed change (0: none yet): where a Watch without a cursor
        starts."""
        async with self.transaction() as conn:
            cur = await conn.execute(
                "SELECT GREATEST((SELECT max(seq) FROM memory_changes WHERE tenant_id = %s), "
                "(SELECT seq FROM memory_change_horizon WHERE tenant_id = %s), 0) AS head",
                (self.tenant, self.tenant))
            row = await cur.fetchone()
        return int(row["head"]) if row else 0

    async def changes_after(self, after: int, subjects: builtins.list[str] | None,
                            limit: int) -> builtins.list[LoggedChange]:
        """Up to ``limit`` committed changes after ``after``, in commit order, of ``subjects``
        (None: every subject's). FailedPrecondition CURSOR_EXPIRED if retention has pruned
        changes after ``after``: the caller cannot be given every change after it."""
        tenant = self.tenant
        async with self.transaction() as conn:
            cur = await conn.execute("SELECT seq FROM memory_change_horizon WHERE tenant_id = %s", (tenant,))
            horizon = await cur.fetchone()
            if horizon is not None and after < horizon["seq"]:
                raise FailedPrecondition(CURSOR_EXPIRED_MESSAGE, reason="CURSOR_EXPIRED")
            which = "" if subjects is None else "AND subject = ANY(%(subjects)s) "
            cur = await conn.execute(
                "SELECT seq, kind, memory_id, subject, scope, session_id, category, key_ct, version "
                f"FROM memory_changes WHERE tenant_id = %(tenant)s AND seq > %(after)s {which}"
                "ORDER BY seq LIMIT %(limit)s",
                {"tenant": tenant, "after": after, "subjects": subjects, "limit": limit})
            rows = await cur.fetchall()
            erased = {r["subject"] for r in rows if r["kind"] == ChangeKind.ERASED and r["key_ct"] is not None}
            keys = await self.keys.for_read(conn, erased) if erased else {}
        changes = []
        for r in rows:
            kind = ChangeKind(r["kind"])
            key: str | None = None
            if kind is ChangeKind.ERASED:
                key = "" if r["key_ct"] is None else _opened_key(keys.get(r["subject"]), str(r["memory_id"]),
                                                                   r["key_ct"])
            changes.append(LoggedChange(int(r["seq"]), kind, str(r["memory_id"] or ""), r["subject"], Scope(r["scope"]),
                                        r["session_id"], Category(r["category"]) if r["category"] else None,
                                        int(r["version"]), key))
        return changes

    async def change_versions(self, flt: ReadFilter,
                              wanted: builtins.list[tuple[str, int]]) -> dict[tuple[str, int], Memory]:
        """The versions ``wanted`` (memory id, version) that the filter reads, each as it was
        when it was recorded (its status then: forgotten or active, not superseded since)."""
        if not wanted:
            return {}
        async with self.transaction() as conn:
            where, params = read_conditions(self, await self.label(conn, flt))
            query = sql.SQL(
                "SELECT * FROM memory_versions WHERE {where} AND (memory_id, version) IN "
                "(SELECT * FROM unnest(%s::uuid[], %s::int[]))"
            ).format(where=where)
            cur = await conn.execute(query, [*params, [m for m, _ in wanted], [v for _, v in wanted]])
            rows = await self.keys.open_rows(conn, await cur.fetchall(), id_column="memory_id")
        found = {}
        for row in rows:
            version = version_from_row(row)
            status = Status.FORGOTTEN if version.change.value == "forgotten" else Status.ACTIVE
            found[(version.memory.id, version.memory.version)] = replace(version.memory, status=status)
        return found

    async def subject_timezones(self, subject: str,
                                categories: tuple[Category, ...]) -> builtins.list[tuple[Category, str, datetime]]:
        """The subject's live ``timezone`` memories of ``categories`` (one per category at
        most): each one's category, text and update time, for the caller to choose from."""
        if not categories:
            return []
        tenant = self.tenant
        async with self.transaction() as conn:
            cur = await conn.execute(
                "SELECT id, subject, category, text, data, text_ct, data_ct, updated_at FROM memories "
                f"WHERE tenant_id = %s AND subject = %s AND scope = 'subject' AND key_label = %s "
                f"AND category = ANY(%s) AND {LIVE_NOW} ORDER BY id",
                (tenant, subject, self.hasher.label("timezone"), [c.value for c in categories]),
            )
            rows = await self.keys.open_rows(conn, await cur.fetchall())
        return [(Category(r["category"]), r["text"].strip(), r["updated_at"]) for r in rows
                if not r["content_unavailable"]]

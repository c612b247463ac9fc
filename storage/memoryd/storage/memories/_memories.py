"""The Postgres memory store: writes, keyed reads, listings, history and erasure.

Every method takes the tenant explicitly, runs in a tenant transaction (row level security
on) and also names the tenant in its WHERE clauses. Callers reach it only through the
server's use cases, whose guard supplies the tenant, the agent and the view-narrowed filter.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from psycopg import sql

from memoryd.domain import (
    AuditTag,
    Change,
    Draft,
    EraseMode,
    EraseSelector,
    ErasureReceipt,
    KeyProvider,
    KeywordHit,
    Listing,
    Memory,
    MemoryVersion,
    NotFound,
    Page,
    ReadFilter,
    Resolution,
    Status,
    StoreCounts,
    TenantPolicy,
    WriteResult,
)

from ..postgres import audit
from ..postgres import counters
from . import _erasure as erasure
from . import _trust as trust
from ..keywords import keyword_search
from ..keys import WRAPPED_KEY_COLUMN, SubjectKeys
from .._filters import in_states, read_conditions, rules_condition

from ..keywords import TermHasher, delete_terms
from ._labels import KeyNames, label_filter, needs_names
from ..vectors import IndexedMemory, embedding_text
from ..postgres import Postgres
from ._resolve import resolve
from ._rows import MEMORY_COLUMNS, memory_from_row, version_from_row
from ._session import StoreSession
from ._trust import with_pending
from ._writes import (
    Written,
    claim_idempotency,
    enqueue_index,
    record_version,
    store_idempotent_response,
    unindexed,
)


async def _audit(conn: Any, tenant: str, agent: str, subject: str, action: str, ids: list[str], tag: AuditTag,
                 details: dict[str, Any] | None = None) -> None:
    await audit.append(conn, tenant, agent, subject, action, ids, tag, details)


_log = logging.getLogger("memoryd.storage.memories")
# An outbox row whose vector a worker is writing to the index now: embedded, staged, its
# lease not run out (``_outbox``). A claimed row not yet writing is dropped by a purge.
WRITING = "(claim IS NOT NULL AND writing AND next_attempt_at > now())"
# One write to the index and a settle: well under a second; past this the worker is taken
# to be dead or stuck.
IN_FLIGHT_WAIT_SECONDS = 6.0
IN_FLIGHT_POLL_SECONDS = 0.05
# When a purge's queued deletion of its vectors becomes due for the workers: well after the
# purge has cleared the index itself (IN_FLIGHT_WAIT_SECONDS, then the deletes and read-back).
PURGE_FALLBACK_SECONDS = 60.0
ERASURE_ROUND_SECONDS = 60.0

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
# The memories a turn said something of (Erase by source turn): a memory answers to the turns
# of its value (every one: ``Memory.source_turn_ids``), of its older versions (what they said
# is in its history) and of its pending values — and goes whole. ``source_turn_id`` is
# matched too: a server of the version before writes only it (migration 0026).
_SAID_IN_TURN = (
    "(source_turn_ids @> %s::text[] OR source_turn_id = %s "
    "OR id IN (SELECT memory_id FROM memory_versions WHERE tenant_id = %s AND subject = %s "
    "AND (source_turn_ids @> %s::text[] OR source_turn_id = %s)) "
    "OR id IN (SELECT memory_id FROM pending_values WHERE tenant_id = %s AND subject = %s "
    "AND (source_turn_ids @> %s::text[] OR source_turn_id = %s)))"
)
_INDEX_COLUMNS = (
    "id, subject, scope, session_id, category, key, tags, key_label, tag_labels, updated_at, valid_until, "
    "text, data, text_ct, data_ct, key_ct, tags_ct"
)


def _index_row(r: dict[str, Any]) -> tuple[IndexedMemory, str | None]:
    """What the index needs of an opened row — its labels, never its key or tags — with the
    text to embed (None: unavailable)."""
    return (IndexedMemory(str(r["id"]), r["subject"], r["scope"], r["session_id"], r["category"],
                          bytes(r["key_label"]).hex(), tuple(sorted(bytes(t).hex() for t in r["tag_labels"])),
                          r["updated_at"], r["valid_until"]),
            None if r["content_unavailable"] else embedding_text(r["key"], r["text"]))


async def _deleted(conn: Any, delete: sql.Composable, params: tuple[Any, ...],
                   counted: frozenset[str]) -> tuple[int, int]:
    """How many rows ``delete`` (a DELETE ... RETURNING <memory id> AS id) removed, and how
    many of them belong to the ``counted`` memories: counted in Postgres, so a whole subject's
    thousands of version rows never come back to be counted here."""
    cur = await conn.execute(
        sql.SQL("WITH gone AS ({}) SELECT count(*) AS n, count(*) FILTER (WHERE id = ANY(%s::uuid[])) AS counted "
                "FROM gone").format(delete), (*params, sorted(counted)))
    row = await cur.fetchone()
    return int(row["n"]), int(row["counted"])


class PostgresMemoryStore:
    """Memories in Postgres, the source of truth, with their keyword index.

    ``hasher`` keys the keyword index's term hashes; the store keeps the terms of every
    memory in step with its text in the same transaction. ``keys`` wraps the subjects' data
    keys: text and data are stored only sealed (``_envelope``), and read back as
    ``content_unavailable`` when their key is gone or cannot be unwrapped.
    """

    def __init__(self, db: Postgres, hasher: TermHasher, keys: KeyProvider,
                 policy_for: Callable[[str], TenantPolicy] | None = None, *,
                 erasure_round: float = ERASURE_ROUND_SECONDS) -> None:
        self._db = db
        # How often a Milvus server's files are compacted for the purges since the last round
        # (``_erasure_recheck``): the receipt's ``pending`` is confirmed within about that.
        self.erasure_round = erasure_round
        # The tenant's lifecycle and trust policy (TTLs, trust levels), asked for per write.
        self.policy_for: Callable[[str], TenantPolicy] = policy_for or (lambda tenant: TenantPolicy())
        self._root_hasher = hasher
        self._hashers: dict[str, TermHasher] = {}
        self.keys = SubjectKeys(keys)
        self._names = KeyNames(self.keys)

    @property
    def db(self) -> Postgres:
        """The app-role pool (the lifecycle sweeper shares it)."""
        return self._db

    def session(self, tenant: str, agent: str) -> StoreSession:
        """The tenant-bound session of ``agent`` (``_session``)."""
        return StoreSession(self, tenant, agent)

    def term_hasher(self, tenant: str) -> TermHasher:
        return self._hasher(tenant)

    def _hasher(self, tenant: str) -> TermHasher:
        hasher = self._hashers.get(tenant)
        if hasher is None:
            if len(self._hashers) > 10_000:
                self._hashers.clear()
            hasher = self._hashers[tenant] = self._root_hasher.for_tenant(tenant)
        return hasher

    async def labelled(self, tenant: str, flt: ReadFilter) -> ReadFilter:
        """``flt`` with its key and tag labels (``_labels``), for a read that also searches the
        vector index; every method here labels an unlabelled filter itself."""
        if flt.labels is not None or not needs_names(flt):
            return await self._label(None, tenant, flt)
        async with self._db.tenant_tx(tenant) as conn:
            return await self._label(conn, tenant, flt)

    async def _label(self, conn: Any, tenant: str, flt: ReadFilter) -> ReadFilter:
        return await label_filter(conn, self._names, self._hasher(tenant), tenant, flt)

    async def write(
        self,
        tenant: str,
        agent: str,
        subject: str,
        drafts: list[Draft],
        *,
        blind: list[bool] | None = None,
        idempotency_key: str = "",
        request_hash: bytes = b"",
        tag: AuditTag = AuditTag(),
    ) -> list[WriteResult]:
        """Apply every draft's conflict policy in one transaction: all items or none.

        ``blind[i]`` says the writer cannot see what item i meets (``ItemWriter.write_all``).
        The results are the real outcomes; what the caller is told is the guard's business.
        """
        written = await self.write_with_index_state(tenant, agent, subject, drafts, blind=blind,
                                                    idempotency_key=idempotency_key, request_hash=request_hash,
                                                    tag=tag)
        return written.results

    async def write_with_index_state(
        self,
        tenant: str,
        agent: str,
        subject: str,
        drafts: list[Draft],
        *,
        blind: list[bool] | None = None,
        idempotency_key: str = "",
        request_hash: bytes = b"",
        tag: AuditTag = AuditTag(),
    ) -> Written:
        """``write``, also telling which written memories still have index work queued —
        read in the same transaction, so answering ``indexed`` takes no second one."""
        session = self.session(tenant, agent)
        # Pipelined: the statements below wait for Postgres only where they read an answer —
        # the data key, the rows the items meet, the audit chain's head — and the commit.
        async with session.transaction(pipelined=True) as conn:
            if idempotency_key:
                first = await claim_idempotency(conn, tenant, agent, idempotency_key, request_hash)
                if first is not None:
                    return Written(first, await (await unindexed(conn, tenant, first))())
            writer = session.item_writer(conn, subject)
            flags = blind or [False] * len(drafts)
            results = await writer.write_all(drafts, flags)
            if idempotency_key:
                await store_idempotent_response(conn, tenant, agent, idempotency_key, results)
            queued = await unindexed(conn, tenant, results, writer.enqueued)
            await _audit(conn, tenant, agent, subject, "write", [r.memory_id for r in results if r.memory_id],
                         tag, {"outcomes": [r.outcome.value for r in results]})
            await writer.finish()
            return Written(results, await queued())

    async def recall_keys(self, tenant: str, flt: ReadFilter, keys: list[str], now: datetime) -> list[Memory]:
        """Live memories with one of ``keys`` that pass the filter, in id order (the caller
        ranks them)."""
        labels = [self._hasher(tenant).label(k) for k in keys]
        return await self._active(tenant, flt, now, sql.SQL("key_label = ANY(%b)"), labels)

    async def keyword_search(self, tenant: str, flt: ReadFilter, query: str, limit: int,
                             now: datetime) -> list[KeywordHit]:
        """The keyword channel: BM25 over the filtered memories' term hashes."""
        async with self._db.tenant_tx(tenant, pipelined=True) as conn:
            flt = await self._label(conn, tenant, flt)
            return await keyword_search(conn, tenant, flt, query, self._hasher(tenant), limit, now)

    async def fetch(self, tenant: str, flt: ReadFilter, ids: list[str], now: datetime) -> list[Memory]:
        """The active, unexpired rows among ``ids`` that pass the filter — how every hit of an
        index is checked against the source of truth before it is served."""
        if not ids:
            return []
        return await self._active(tenant, flt, now, sql.SQL("id = ANY(%s::uuid[])"), ids)

    async def neighbours(self, tenant: str, flt: ReadFilter, anchors: list[str], before: int, after: int,
                         now: datetime) -> list[tuple[Memory, str, int]]:
        """The turns written just around each of ``anchors`` (episodic memories the caller may
        read): episodic memories with a source turn, each with the anchor it is next to and its
        place relative to it (-1: the one just before, 1: just after), at most ``before`` before
        and ``after`` after each anchor, in the anchor's subject, scope and session. A memory
        next to two anchors comes once for each.
        They are counted among the active, unexpired memories that pass the filter only, so a
        memory the caller may not read neither shows up nor takes a place."""
        if (before <= 0 and after <= 0) or not anchors:
            return []
        # One transaction, pipelined: the places, then the rows.
        async with self._db.tenant_tx(tenant, pipelined=True) as conn:
            flt = await self._label(conn, tenant, flt)
            where, params = read_conditions(tenant, flt, live_at=now)
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
            found = {m.id: m for m in await self._read_active(conn, tenant, flt, now, sql.SQL("id = ANY(%s::uuid[])"),
                                                              sorted({memory_id for memory_id, _, _ in places}))}
        return [(found[memory_id], anchor, place) for memory_id, anchor, place in places if memory_id in found]

    async def named_entities(self, tenant: str, flt: ReadFilter, tags: list[str], now: datetime) -> set[str]:
        """Those of ``tags`` that some active, unexpired memory passing the filter carries: how
        recall learns which entities a query names (``domain.named_spans``) among what the
        caller may read, and nothing of the rest."""
        if not tags:
            return set()
        hasher = self._hasher(tenant)
        by_label = {hasher.label(tag): tag for tag in tags}
        # Pipelined: on the query's way to its embedding, so BEGIN and the tenant go with it.
        async with self._db.tenant_tx(tenant, pipelined=True) as conn:
            where, params = read_conditions(tenant, await self._label(conn, tenant, flt), live_at=now)
            # One probe of the tag index per label (migration 0020), stopping at the first
            # memory that carries it: a tag on half a subject's memories costs no more than one
            # on a single memory.
            query = sql.SQL(
                "SELECT label FROM unnest(%b::bytea[]) AS label WHERE EXISTS "
                "(SELECT 1 FROM memories WHERE tag_labels @> ARRAY[label] AND {where})"
            ).format(where=where)
            cur = await conn.execute(query, [list(by_label), *params])
            return {by_label[bytes(row["label"])] for row in await cur.fetchall()}

    async def _active(self, tenant: str, flt: ReadFilter, now: datetime, which: sql.Composable,
                      values: list[Any]) -> list[Memory]:
        # Pipelined: BEGIN and the tenant go with the read, COMMIT right after it (a Recall
        # reads rows twice on its critical path; each round trip less is ~0.3 ms of Python).
        async with self._db.tenant_tx(tenant, pipelined=True) as conn:
            return await self._read_active(conn, tenant, flt, now, which, values)

    async def _read_active(self, conn: Any, tenant: str, flt: ReadFilter, now: datetime, which: sql.Composable,
                           values: list[Any]) -> list[Memory]:
        """The live memories that pass the filter and ``which`` (its one placeholder: ``values``),
        in ``conn``'s transaction."""
        # One statement: the rows, their subject's wrapped key, and whether any has pending values.
        where, params = read_conditions(tenant, await self._label(conn, tenant, flt), live_at=now)
        query = sql.SQL(
            "SELECT {cols}, {wrapped}, EXISTS (SELECT 1 FROM pending_values p WHERE p.tenant_id = "
            "memories.tenant_id AND p.memory_id = memories.id) AS has_pending FROM memories "
            "WHERE {where} AND {which} ORDER BY id"
        ).format(cols=sql.SQL(MEMORY_COLUMNS), wrapped=sql.SQL(WRAPPED_KEY_COLUMN), where=where, which=which)
        cur = await conn.execute(query, [*params, values])
        rows = await cur.fetchall()
        pending = any([row.pop("has_pending") for row in rows])
        memories = [memory_from_row(row) for row in await self.keys.open_with_keys(tenant, rows)]
        return await with_pending(conn, self.keys, tenant, memories) if pending else memories

    async def index_rows(self, tenant: str, ids: list[str]) -> list[tuple[IndexedMemory, str | None]]:
        """What the index needs of the active memories among ``ids``, with the text to embed
        (None for a memory whose content cannot be decrypted: it must not be embedded)."""
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                f"SELECT {_INDEX_COLUMNS} FROM memories WHERE tenant_id = %s AND id = ANY(%s::uuid[]) "
                "AND status = 'active'",
                (tenant, ids),
            )
            rows = await self.keys.open_rows(conn, tenant, await cur.fetchall())
        return [_index_row(r) for r in rows]

    async def enqueue_vector_deletes(self, tenant: str, subject: str, ids: list[str]) -> None:
        """Leave the index's deletions to the outbox worker (the index was unreachable)."""
        async with self._db.tenant_tx(tenant) as conn:
            for memory_id in ids:
                await enqueue_index(conn, tenant, memory_id, subject, "delete")

    async def queued_purge(self, tenant: str, erase_id: str) -> erasure.Purged | None:
        """A queued PURGE's ids for the background re-check; None (and off the queue) if there
        is no such purge."""
        async with self._db.tenant_tx(tenant) as conn:
            logged = await erasure.logged_ids(conn, tenant, erase_id)
            if logged is None:
                await erasure.recheck_in(conn, tenant, erase_id, None)  # nothing to check
                return None
            subject, ids, counted = logged
            cur = await conn.execute("SELECT 1 FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) "
                                     "AND NOT dead LIMIT 1", (tenant, ids))
            return erasure.Purged(subject, ids, counted, busy=await cur.fetchone() is not None)

    async def record_recheck(self, tenant: str, erase_id: str, ids: builtins.list[str],
                             vectors: erasure.VectorErasure) -> bool:
        """Add a background re-check of a PURGE to its log (``vectors``: what clearing its ids
        from the index came to); whether it is verified. Once nothing is left to confirm it
        leaves the queue; the caller schedules it otherwise."""
        async with self._db.tenant_tx(tenant) as conn:
            if vectors.verified:  # dead-lettered deletions, if any, are done now
                await conn.execute("DELETE FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) "
                                   "AND op = 'delete'", (tenant, ids))
            verified = vectors.verified and await erasure.rows_gone(conn, tenant, ids)
            await erasure.record_check(conn, tenant, erase_id, verified, vectors.deleted, vectors.counted,
                                       erasure.unchecked(EraseMode.PURGE, vectors), recheck=True)
            if verified and not vectors.later:
                await erasure.recheck_in(conn, tenant, erase_id, None)
        return verified

    async def count_active(self, tenant: str) -> int:
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute("SELECT count(*) AS n FROM memories WHERE tenant_id = %s AND status = 'active'",
                                     (tenant,))
            row = await cur.fetchone()
        return int(row["n"]) if row else 0

    async def index_page(self, tenant: str, after_id: str | None,
                         limit: int) -> list[tuple[IndexedMemory, str | None]]:
        """A page of active memories in id order after ``after_id``, for re-embedding."""
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                f"SELECT {_INDEX_COLUMNS} FROM memories WHERE tenant_id = %s AND status = 'active' "
                "AND id > %s::uuid ORDER BY id LIMIT %s",
                (tenant, after_id or "00000000-0000-0000-0000-000000000000", limit),
            )
            rows = await self.keys.open_rows(conn, tenant, await cur.fetchall())
        return [_index_row(r) for r in rows]

    async def pending_index_work(self, tenant: str, ids: list[str]) -> tuple[int, int]:
        """(pending, dead) outbox rows for ``ids``."""
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                "SELECT count(*) FILTER (WHERE NOT dead) AS pending, count(*) FILTER (WHERE dead) AS dead "
                "FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])",
                (tenant, ids),
            )
            row = await cur.fetchone()
        assert row is not None
        return int(row["pending"]), int(row["dead"])

    async def record_reads(self, tenant: str, counts: dict[str, int],
                           events: list[tuple[str, str, str, list[str], AuditTag]]) -> None:
        """Add recall counts and last-access times, and append read events (agent, subject,
        action, ids, request id) to the audit chain — one transaction per batch."""
        if not counts and not events:
            return
        async with self._db.tenant_tx(tenant) as conn:
            if counts:
                await conn.execute(
                    "UPDATE memories m SET access_count = m.access_count + c.n, last_access_at = now() "
                    "FROM unnest(%s::uuid[], %s::int[]) AS c(id, n) WHERE m.tenant_id = %s AND m.id = c.id",
                    (list(counts), list(counts.values()), tenant),
                )
            for agent, subject, action, ids, tag in events:
                await _audit(conn, tenant, agent, subject, action, ids, tag)

    async def verify_audit(self, tenant: str) -> audit.ChainReport:
        async with self._db.tenant_tx(tenant) as conn:
            return await audit.verify(conn, tenant)

    async def erasures(self, tenant: str, *, limit: int = 50, unverified_only: bool = False,
                       ) -> builtins.list[dict[str, Any]]:
        """The tenant's latest erasures with their checks (``_erasure.history``), for operators."""
        async with self._db.tenant_tx(tenant) as conn:
            return await erasure.history(conn, tenant, limit, unverified_only)

    async def list(self, tenant: str, flt: ReadFilter, page: Page, now: datetime | None = None) -> Listing:
        """One page of memories, most recently updated first (keyset pagination). An active
        memory past its time to live is not listed (the sweeper soon marks it forgotten)."""
        async with self._db.tenant_tx(tenant) as conn:
            flt = await self._label(conn, tenant, flt)
            where, params = read_conditions(tenant, flt)
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
            rows = await self.keys.open_rows(conn, tenant, await cur.fetchall())
            memories = await with_pending(conn, self.keys, tenant, [memory_from_row(r) for r in rows[: page.size]])
        return Listing(memories, has_more=len(rows) > page.size)

    async def history(self, tenant: str, flt: ReadFilter, memory_id: str, after_version: int,
                      size: int) -> tuple[builtins.list[MemoryVersion], bool]:
        """Versions of one memory the filter allows, newest first, while the memory itself is
        in one of the filter's statuses (``in_states``). NotFound if there is none."""
        async with self._db.tenant_tx(tenant) as conn:
            where, params = read_conditions(tenant, await self._label(conn, tenant, flt))
            states, state_params = in_states(flt, datetime.now(UTC), table="m")
            query = sql.SQL(
                "SELECT * FROM memory_versions WHERE {where} AND memory_id = %s AND version < %s "
                "AND EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = memory_versions.tenant_id "
                "AND m.id = memory_versions.memory_id AND {states}) ORDER BY version DESC LIMIT %s"
            ).format(where=where, states=states)
            cur = await conn.execute(query, [*params, memory_id, after_version or 2**31 - 1, *state_params,
                                             size + 1])
            rows = await self.keys.open_rows(conn, tenant, await cur.fetchall(), id_column="memory_id")
            versions = [version_from_row(r) for r in rows[:size]]
            # The pending values belong to the current value: shown on the active version.
            pending = await trust.load(conn, self.keys, tenant, [memory_id])
        if not rows and not after_version:
            raise NotFound("no such memory for this subject")
        if pending:
            versions = [replace(v, memory=replace(v.memory, pending=tuple(pending[memory_id])))
                        if v.memory.status is Status.ACTIVE else v for v in versions]
        return versions, len(rows) > size

    async def resolve_conflict(self, tenant: str, agent: str, subject: str, flt: ReadFilter, memory_id: str,
                               resolution: Resolution, pending_id: str, tag: AuditTag = AuditTag()) -> Memory:
        """Settle one keyed memory's pending values by hand (see ``_resolve.resolve``)."""
        async with self._db.tenant_tx(tenant) as conn:
            flt = await self._label(conn, tenant, flt)
            return await resolve(conn, self.session(tenant, agent), subject, flt, memory_id, resolution, pending_id,
                                 tag)

    async def lifecycle_counts(self, tenant: str) -> dict[str, int]:
        """The tenant's lifecycle and conflict counters (``_counters``)."""
        async with self._db.tenant_tx(tenant) as conn:
            return await counters.read(conn, tenant, counters.LIFECYCLE_FAMILIES)

    async def erase(
        self,
        tenant: str,
        agent: str,
        subject: str,
        flt: ReadFilter,
        selector: EraseSelector,
        mode: EraseMode,
        *,
        reason: str = "",
        tag: AuditTag = AuditTag(),
        after_commit: Callable[[builtins.list[str], frozenset[str]], Awaitable[erasure.VectorErasure]] | None = None,
    ) -> ErasureReceipt:
        """Forget or purge the selected memories of ``subject``, verify, and log a receipt.

        A PURGE of the whole subject also destroys the subject's data key (crypto-shredding)
        once nothing of the subject is left in memories or memory_versions; if the caller's
        view could not reach all of them, the key stays (the rest would become unreadable)
        and the receipt is not verified. FORGET never touches keys.

        The receipt counts only what the caller can tell exists: memories in one of the
        filter's statuses (``in_states``: a lapsed or, for a view that hides ``status``, a
        forgotten memory is erased too, uncounted), their versions and index work, and the
        caller's own extraction jobs. The erasure log keeps every count, and the receipt's.

        ``after_commit`` runs once the rows are gone, with the erased ids and those counted,
        to clear other stores (the vector index); it returns what it deleted and could verify
        (``_erasure``).
        """
        started = datetime.now(UTC)
        hasher = self._hasher(tenant)
        # What the logs keep of the selector: a key only as its label, so no log row holds
        # the name of what was erased.
        described = selector.describe()
        if selector.key and not selector.ids:
            described = {"key_label": hasher.label(selector.key).hex()}
        shred = mode is EraseMode.PURGE and selector.all_of_subject
        digest = erasure.request_digest(agent, subject, described, mode, reason)
        replay: erasure.LoggedErase | None = None
        async with self._db.tenant_tx(tenant) as conn:
            flt = await self._label(conn, tenant, flt)
            where, params = self._selection(tenant, subject, flt, selector, mode, hasher)
            if shred:
                # Taken before the memories: a concurrent write holds the key row FOR SHARE
                # until it commits, so this waits for it and then sees (and purges) its rows;
                # a write that starts later waits for this commit and makes a fresh key.
                await conn.execute("SELECT 1 FROM subject_keys WHERE tenant_id = %s AND subject = %s FOR UPDATE",
                                   (tenant, subject))
            # Pending extraction jobs go first (their turns with them): the job row is locked
            # after the key row and before memory rows, as a finishing job does.
            if shred:
                await erasure.drop_job_records(conn, tenant, subject)
            # Deferred: ``work`` sits above ``memories`` (its outbox reads memories); the erase
            # protocol that issue 42 moves into storage's erasure owns this call.
            from ..work import drop_subject_jobs

            jobs = await drop_subject_jobs(conn, tenant, subject, mode) if selector.all_of_subject else []
            states, state_params = in_states(flt, started)
            cur = await conn.execute(
                sql.SQL("SELECT id, {states} AS counted FROM memories WHERE {where} FOR UPDATE").format(
                    states=states, where=where), [*state_params, *params]
            )
            rows = await cur.fetchall()
            ids = [str(r["id"]) for r in rows]
            counted = frozenset(str(r["id"]) for r in rows if r["counted"])
            if mode is EraseMode.FORGET:
                counts, answered = await self.forget_ids(conn, tenant, subject, ids, counted)
            else:
                counts, answered = await self._purge(conn, tenant, ids, counted)
            counts = replace(counts, jobs=len(jobs))
            answered = replace(answered, jobs=jobs.count(agent))
            if shred and not await self._subject_rows_left(conn, tenant, subject):
                destroyed = await self.keys.destroy(conn, tenant, subject)
                counts, answered = replace(counts, keys=destroyed), replace(answered, keys=destroyed)
            mentions = None
            if selector.all_of_subject and subject and flt.include_org:
                mentions = await erasure.organisation_mentions(conn, self.keys, tenant, flt, subject, started)
            if not (ids or jobs or counts.keys):
                replay = await erasure.replayed(conn, tenant, agent, digest)
                if replay is not None and mode is EraseMode.PURGE and replay.ids and not replay.checked:
                    # Its process died before the check, and it is not queued (logged by an
                    # earlier release, which queued a purge only after its check): a worker
                    # checks it.
                    if not replay.queued:
                        await erasure.recheck_in(conn, tenant, replay.receipt.erase_id, 0.0)
                    replay = replace(replay, queued=True, receipt=replace(
                        replay.receipt, pending=erasure.pending(False, queued=True)))
            if replay is None:
                if mode is EraseMode.PURGE and ids:
                    # The vectors' deletion is queued with the purge: if this process dies
                    # before clearing the index below, a worker still does it — later, not now:
                    # a worker's delete racing this erase's own would write a new tombstone
                    # (which holds the id) after the compaction, and the files would fail the
                    # check. This erase removes the rows once the index is verified clear.
                    await conn.execute("INSERT INTO outbox (tenant_id, memory_id, subject, op, next_attempt_at) "
                                       "SELECT %s, unnest(%s::uuid[]), %s, 'delete', "
                                       "now() + make_interval(secs => %s)",
                                       (tenant, ids, subject, PURGE_FALLBACK_SECONDS))
                await _audit(conn, tenant, agent, subject, f"erase.{mode.value}", ids, tag,
                             {"selector": described, "reason": reason})
                erase_id = await erasure.log_erase(conn, tenant, agent, subject, described, mode, reason, counts,
                                                   answered, counted, started, ids, digest, mentions)
                if mode is EraseMode.PURGE and ids:
                    # If this process dies before its check, a worker does it (after the
                    # fallback deletion above); the check below moves or removes this.
                    await erasure.recheck_in(conn, tenant, erase_id, PURGE_FALLBACK_SECONDS)
        if replay is not None:  # a retry of an erase already done: answered from its log
            if replay.checked or replay.queued:  # checked, or a worker will check it
                return erasure.shown(replay.receipt, replay.counted, selector.all_of_subject)
            # Never checked, and nothing in the index to check (a FORGET, or no memory): the
            # re-read of the rows, now.
            erase_id, ids, answered, started, mentions = (replay.receipt.erase_id, replay.ids, replay.receipt.counts,
                                                          replay.receipt.started_at, replay.receipt.organisation_mentions)
            counted = frozenset(replay.counted)
        if mode is EraseMode.PURGE:
            self._names.evict(tenant, subject)  # no purged key name stays in this process
            await self._await_batches_in_flight(tenant, ids)
        vectors = await after_commit(ids, counted) if after_commit is not None else erasure.VectorErasure()
        answered = replace(answered, vectors=vectors.counted)
        unchecked = erasure.unchecked(mode, vectors)
        async with self._db.tenant_tx(tenant) as conn:
            if mode is EraseMode.PURGE and vectors.verified and ids:  # the queued deletion is done
                await conn.execute("DELETE FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) "
                                   "AND op = 'delete'", (tenant, ids))
            verified = vectors.verified and await self._verify(conn, tenant, subject, flt, selector, mode, ids, hasher)
            finished = await erasure.record_check(conn, tenant, erase_id, verified, vectors.deleted, vectors.counted,
                                                  unchecked)
            queued = False
            if mode is EraseMode.PURGE and ids:
                if verified:
                    # A server's compaction: in the next round, shared by every erase due.
                    queued = vectors.later
                    await erasure.recheck_in(conn, tenant, erase_id, self.erasure_round if queued else None,
                                             aligned=True)
                else:
                    # Rows gone but the index not confirmed clear (down, or a vector read
                    # back): a worker checks the index again as soon as the outbox has done
                    # the deletions. Rows left: no check of the index can make it verified.
                    queued = await self._verify(conn, tenant, subject, flt, selector, mode, ids, hasher,
                                                queued_deletes=False)
                    await erasure.recheck_in(conn, tenant, erase_id, 0.0 if queued else None)
        return erasure.shown(ErasureReceipt(erase_id, mode, answered, verified, started, finished, unchecked, mentions,
                                            erasure.pending(verified, queued)), counted, selector.all_of_subject)

    @staticmethod
    def _selection(tenant: str, subject: str, flt: ReadFilter, selector: EraseSelector, mode: EraseMode,
                   hasher: TermHasher) -> tuple[sql.Composable, builtins.list[Any]]:
        # Only the subject's own memories (subject and session scope) that the view reaches; for
        # subject '', the organisation's.
        rules, params = rules_condition(flt)
        owned = "scope = 'org'" if not subject else "scope <> 'org'"
        parts = [sql.SQL(f"tenant_id = %s AND subject = %s AND {owned}"), rules]
        params = [tenant, subject, *params]
        if mode is EraseMode.FORGET:
            parts.append(sql.SQL("status = 'active'"))
        if selector.ids:
            parts.append(sql.SQL("id = ANY(%s::uuid[])"))
            params.append(list(selector.ids))
        elif selector.key:
            parts.append(sql.SQL("key_label = %s"))
            params.append(hasher.label(selector.key))
        elif selector.source_turn_id:
            parts.append(sql.SQL(_SAID_IN_TURN))
            turn = selector.source_turn_id
            params.extend([[turn], turn, tenant, subject, [turn], turn, tenant, subject, [turn], turn])
        elif selector.category is not None:
            parts.append(sql.SQL("category = %s"))
            params.append(selector.category.value)
        return sql.SQL(" AND ").join(parts), params

    @staticmethod
    async def forget_ids(conn: Any, tenant: str, subject: str, ids: builtins.list[str],
                         counted: frozenset[str] = frozenset()) -> tuple[StoreCounts, StoreCounts]:
        """Forget the locked, active memories ``ids`` of ``subject`` in the caller's transaction
        (Erase FORGET, consolidation and the lifecycle sweeper): what went, and what went of
        the ``counted`` ids."""
        if not ids:
            return StoreCounts(), StoreCounts()
        await conn.execute(
            "UPDATE memories SET status = 'forgotten', version = version + 1, updated_at = now() "
            "WHERE tenant_id = %s AND id = ANY(%s::uuid[])",
            (tenant, ids),
        )
        dropped, counted_dropped = await _deleted(
            conn, sql.SQL("DELETE FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) AND op = 'upsert' "
                          "RETURNING memory_id AS id"), (tenant, ids), counted)
        await trust.discard(conn, tenant, ids)  # a forgotten memory has no value left to settle
        for memory_id in ids:
            await record_version(conn, tenant, memory_id, Change.FORGOTTEN)
            # A forgotten memory must leave the vector index as well.
            await enqueue_index(conn, tenant, memory_id, subject, "delete")
        return (StoreCounts(memories=len(ids), outbox=dropped),
                StoreCounts(memories=len(counted), outbox=counted_dropped))

    async def _await_batches_in_flight(self, tenant: str, ids: builtins.list[str]) -> None:
        """Wait until no outbox worker is still writing a vector of one of the purged memories.

        A worker reads and embeds a memory with no transaction open (``_outbox``), then marks
        the rows it still holds as writing and writes their vectors. The purge dropped every
        claimed row not yet writing, so their workers write nothing; rows already writing
        are left in place (``_purge``), and their vectors may land after this erase clears
        the index, so this waits for them to settle first — one index write, not a batch of
        embeddings. Past IN_FLIGHT_WAIT_SECONDS (a worker that died, or is stuck) the claims
        are taken away and the rows made due: a live worker then finds its rows gone when it
        settles and queues the deletion again, a dead one's rows are claimed anew at once (the
        memory is gone, so its vector is deleted), and the receipt is not verified while they
        are there (``_verify`` counts outbox rows)."""
        if not ids:
            return
        deadline = asyncio.get_running_loop().time() + IN_FLIGHT_WAIT_SECONDS
        while True:
            async with self._db.tenant_tx(tenant) as conn:
                # Upserts only: a delete in flight (the purge's own, say) writes no vector.
                cur = await conn.execute(f"SELECT count(*) AS n FROM outbox WHERE tenant_id = %s "
                                         f"AND memory_id = ANY(%s::uuid[]) AND op = 'upsert' AND {WRITING}",
                                         (tenant, ids))
                row = await cur.fetchone()
                if not row or not row["n"]:
                    return
                if asyncio.get_running_loop().time() >= deadline:
                    await conn.execute(f"UPDATE outbox SET claim = NULL, writing = false, next_attempt_at = now() "
                                       f"WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) AND {WRITING}",
                                       (tenant, ids))
                    _log.warning("a purge gave up waiting for %d index row(s) in flight", row["n"])
                    return
            await asyncio.sleep(IN_FLIGHT_POLL_SECONDS)

    @staticmethod
    async def _purge(conn: Any, tenant: str, ids: builtins.list[str],
                     counted: frozenset[str]) -> tuple[StoreCounts, StoreCounts]:
        """Delete the locked memories ``ids`` and what hangs on them: what went, and what went
        of the ``counted`` ids."""
        if not ids:
            return StoreCounts(), StoreCounts()
        gone: dict[str, tuple[int, int]] = {}
        await delete_terms(conn, tenant, ids)
        await erasure.drop_write_records(conn, tenant, ids)
        for table, column in (("outbox", "memory_id"), ("memory_versions", "memory_id"), ("memories", "id")):
            # Rows whose vectors a worker is writing right now stay: the erase waits for them
            # to settle (``_await_batches_in_flight``). A claimed row still being embedded
            # goes, and its worker then writes nothing for it.
            unclaimed = sql.SQL(f" AND NOT {WRITING}" if table == "outbox" else "")
            gone[table] = await _deleted(
                conn, sql.SQL("DELETE FROM {t} WHERE tenant_id = %s AND {c} = ANY(%s::uuid[]){u} RETURNING {c} AS id"
                              ).format(t=sql.Identifier(table), c=sql.Identifier(column), u=unclaimed),
                (tenant, ids), counted)
        return (StoreCounts(memories=gone["memories"][0], versions=gone["memory_versions"][0], outbox=gone["outbox"][0]),
                StoreCounts(memories=gone["memories"][1], versions=gone["memory_versions"][1],
                            outbox=gone["outbox"][1]))

    @staticmethod
    async def _subject_rows_left(conn: Any, tenant: str, subject: str) -> bool:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM memories WHERE tenant_id = %s AND subject = %s) "
            "OR EXISTS (SELECT 1 FROM memory_versions WHERE tenant_id = %s AND subject = %s) AS left",
            (tenant, subject, tenant, subject),
        )
        row = await cur.fetchone()
        return bool(row and row["left"])

    async def _verify(self, conn: Any, tenant: str, subject: str, flt: ReadFilter, selector: EraseSelector,
                      mode: EraseMode, ids: builtins.list[str], hasher: TermHasher, *,
                      queued_deletes: bool = True) -> bool:
        """Re-read after commit: nothing selected is left (PURGE) or still active (FORGET).
        ``queued_deletes=False``: vector deletions still queued for ``ids`` do not count."""
        where, params = self._selection(tenant, subject, flt, selector, mode, hasher)
        checks: list[tuple[sql.Composable, list[Any]]] = [
            (sql.SQL("SELECT count(*) AS n FROM memories WHERE {w}").format(w=where), params)
        ]
        if mode is EraseMode.PURGE:
            for table in ("memory_versions", "outbox", "memory_terms"):
                skip = sql.SQL(" AND op <> 'delete'" if table == "outbox" and not queued_deletes else "")
                checks.append((
                    sql.SQL("SELECT count(*) AS n FROM {t} WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]){s}").format(
                        t=sql.Identifier(table), s=skip),
                    [tenant, ids],
                ))
                if selector.all_of_subject:
                    checks.append((
                        sql.SQL("SELECT count(*) AS n FROM {t} WHERE tenant_id = %s AND subject = %s{s}").format(
                            t=sql.Identifier(table), s=skip),
                        [tenant, subject],
                    ))
            if selector.all_of_subject:
                for table in ("subject_keys", "extraction_jobs", "keyword_stats"):
                    checks.append((sql.SQL("SELECT count(*) AS n FROM {t} WHERE tenant_id = %s AND subject = %s").format(
                        t=sql.Identifier(table)), [tenant, subject]))
        for query, query_params in checks:
            cur = await conn.execute(query, query_params)
            row = await cur.fetchone()
            if row is None or row["n"]:
                return False
        return True

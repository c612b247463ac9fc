"""The statements a Write's items share, sent once per kind per batch instead of once per item.

``ItemWriter`` decides each item's fate (``_writes``); what the decisions leave to write —
new rows, changed rows, keyword terms, version snapshots, outbox rows, settled pending values
— is queued here and sent by ``flush`` as one statement per kind (multi-row statements over
arrays, or ``executemany``, which psycopg pipelines into one round trip), in this order:

    memories (insert, update, merge) → closed fact versions → settled pending values →
    keyword terms → version snapshots → outbox → folding the kept BM25 counts

Snapshots come after the rows they copy; closing a fact's active version comes before the
new snapshot supersedes it. A batch holds at most one change per memory: the writer flushes
before an item that meets a memory already changed in the batch (``ItemWriter.write_all``).
``record_version`` and ``enqueue_index`` are the same statements for one memory, outside a
batch (a FORGET, the sealing of old rows).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

import psycopg
from psycopg import pq

from memoryd.domain import Change

from ..postgres import counters
from ..keywords import fold_owners_stats
from ..keywords import TermHasher, check_terms_written, write_terms
from ..postgres import TenantConn

VERSION_COLUMNS = (
    "tenant_id, memory_id, version, change, subject, scope, session_id, category, key, text, data, "
    "text_ct, data_ct, key_label, key_ct, importance, confidence, stability, pinned, tags, tag_labels, tags_ct, "
    "valid_from, valid_until, agent, "
    "source_kind, source_turn_id, source_turn_ids, status, created_at, recorded_at, expires_at, trust"
)
# The current rows of the memories in c(id, change), as their version rows.
SNAPSHOTS = (
    "SELECT m.tenant_id, m.id, m.version, c.change, m.subject, m.scope, m.session_id, m.category, m.key, m.text, "
    "m.data, m.text_ct, m.data_ct, m.key_label, m.key_ct, m.importance, m.confidence, m.stability, m.pinned, m.tags, "
    "m.tag_labels, m.tags_ct, m.valid_from, m.valid_until, m.agent, m.source_kind, m.source_turn_id, m.source_turn_ids, "
    "m.status, "
    "m.created_at, m.updated_at, m.expires_at, m.trust "
    "FROM unnest(%s::uuid[], %s::text[]) WITH ORDINALITY AS c(id, change, n) "
    "JOIN memories m ON m.tenant_id = %s AND m.id = c.id ORDER BY c.n"
)

INSERT_MEMORY = (
    "INSERT INTO memories (tenant_id, id, subject, scope, session_id, category, key_label, key_ct, text_ct, "
    "text_hash, data_ct, importance, confidence, stability, pinned, tag_labels, tags_ct, valid_from, "
    "valid_until, agent, source_kind, source_turn_id, source_turn_ids, expires_at, trust, created_by) VALUES (%s, "
    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
    "now() + %s::float8 * interval '1 second', %s, %s)"
)
UPDATE_MEMORY = (
    "UPDATE memories SET category = %s, key_label = %s, key_ct = %s, text_ct = %s, text_hash = %s, "
    "data_ct = %s, key = '', text = NULL, data = NULL, tags = '{}', importance = %s, confidence = %s, "
    "stability = %s, pinned = %s, tag_labels = %s, tags_ct = %s, valid_from = %s, valid_until = %s, "
    "agent = %s, source_kind = %s, source_turn_id = %s, source_turn_ids = %s, "
    "expires_at = now() + %s::float8 * interval '1 second', trust = %s, version = version + 1, "
    "updated_at = now() WHERE tenant_id = %s AND id = %s"
)
MERGE_REPEAT = (
    "UPDATE memories SET importance = GREATEST(importance, %s), tags = '{}', tag_labels = %s, tags_ct = %s, "
    "pinned = pinned OR %s, agent = %s, source_turn_id = %s, source_turn_ids = %s, version = version + 1, "
    "updated_at = now(), "
    "expires_at = CASE WHEN pinned OR %s THEN NULL ELSE now() + %s::float8 * interval '1 second' END "
    "WHERE tenant_id = %s AND id = %s"
)
# A value said again (found the same, so no new version): the memory answers to the turns
# that said it again as well (``_rows.joined_turns``).
ADD_TURNS = "UPDATE memories SET source_turn_id = %s, source_turn_ids = %s WHERE tenant_id = %s AND id = %s"
# The old fact stays as a dated version: its validity ends where the new one starts.
_CLOSE_FACT = (
    "UPDATE memory_versions SET valid_until = LEAST(COALESCE(valid_until, 'infinity'), COALESCE(%s, now())) "
    "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'"
)


class WriteBatch:
    """The queued writes of one tenant's items, in the caller's transaction."""

    def __init__(self, conn: TenantConn, hasher: TermHasher) -> None:
        self._tenant = conn.tenant
        self._hasher = hasher
        self._clear()
        # Cursors whose answers are checked once the connection has synced (``check``).
        self._unchecked: list[tuple[psycopg.AsyncCursor[Any], int]] = []
        # Memories given an outbox row by this batch: pending until a worker sees the commit.
        self.enqueued: set[str] = set()

    def _clear(self) -> None:
        self._rows: list[tuple[str, tuple[Any, ...]]] = []  # (statement, params), in item order
        self._closed_facts: list[tuple[Any, ...]] = []
        self._settles: list[tuple[str, float]] = []
        self._terms: list[tuple[str, str, str, str]] = []  # (owner, memory id, key, text)
        self._versions: list[tuple[str, Change]] = []
        self._index: list[tuple[str, str]] = []  # (memory id, owner)
        # Memories inserted by this flush: their ids are new, so no terms, versions or outbox
        # rows of theirs can exist yet to be replaced, superseded or folded.
        self._fresh: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self._rows or self._closed_facts or self._settles or self._terms or self._versions
                    or self._index)

    def row(self, statement: str, params: tuple[Any, ...]) -> None:
        """Queue one INSERT_MEMORY, UPDATE_MEMORY, MERGE_REPEAT or ADD_TURNS."""
        self._rows.append((statement, params))
        if statement is INSERT_MEMORY:
            self._fresh.add(str(params[1]))

    def close_fact(self, memory_id: str, valid_from: Any) -> None:
        self._closed_facts.append((valid_from, self._tenant, memory_id))

    def settle(self, memory_id: str, trust: float) -> None:
        """Drop the memory's pending values trusted no more than ``trust`` (``_trust.settle``),
        counted as settled conflicts."""
        self._settles.append((memory_id, trust))

    def changed(self, owner: str, memory_id: str, change: Change, terms: tuple[str, str] | None) -> None:
        """The memory's row changed: snapshot it as a version, re-index its ``terms`` (key,
        text) if they changed, and queue it for the vector index."""
        if terms is not None:
            self._terms.append((owner, memory_id, *terms))
        self._versions.append((memory_id, change))
        self._index.append((memory_id, owner))

    async def flush(self, conn: TenantConn) -> None:
        """Send what is queued, one statement per kind; no answer is waited for (``check``)."""
        if not self:
            return
        tenant = self._tenant
        async with pipeline(conn):
            if self._rows:
                async with conn.cursor() as cur:
                    for statement in (INSERT_MEMORY, UPDATE_MEMORY, MERGE_REPEAT, ADD_TURNS):
                        params = [p for s, p in self._rows if s is statement]
                        if params:
                            await cur.executemany(statement, params)
            if self._closed_facts:
                async with conn.cursor() as cur:
                    await cur.executemany(_CLOSE_FACT, self._closed_facts)
            if self._settles:
                ids, levels = zip(*self._settles, strict=True)
                await counters.bump(conn, counters.Counted(
                    counters.CONFLICTS_SETTLED,
                    "DELETE FROM pending_values p USING unnest(%s::uuid[], %s::float8[]) AS s(id, t) "
                    "WHERE p.tenant_id = %s AND p.memory_id = s.id AND p.trust <= s.t RETURNING 1",
                    (list(ids), list(levels), tenant),
                ))
            if self._terms:
                await self._replace_terms(conn)
            if self._versions:
                versioned = [m for m, _ in self._versions]
                if older := [m for m in versioned if m not in self._fresh]:
                    await conn.execute(
                        "UPDATE memory_versions SET status = 'superseded' "
                        "WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) AND status = 'active'",
                        (tenant, older),
                    )
                await conn.execute(
                    f"INSERT INTO memory_versions ({VERSION_COLUMNS}) {SNAPSHOTS}",
                    (versioned, [c.value for _, c in self._versions], tenant),
                )
            if self._index:
                await enqueue_many(conn, self._index, "upsert", fresh=self._fresh)
                self.enqueued.update(m for m, _ in self._index)
                await fold_owners_stats(conn, [owner for _, owner in self._index])
        self._clear()

    async def _replace_terms(self, conn: TenantConn) -> None:
        cur = await write_terms(conn, self._terms, self._hasher, fresh=self._fresh)
        self._unchecked.append((cur, len({memory_id for _, memory_id, _, _ in self._terms})))

    async def check(self) -> None:
        """Check the answers of what was flushed: every memory whose terms were replaced is
        this tenant's and its owner's (else Internal, and the transaction is rolled back)."""
        unchecked, self._unchecked = self._unchecked, []
        for cur, expected in unchecked:
            await check_terms_written(cur, expected)


def pipeline(tx: TenantConn) -> AbstractAsyncContextManager[Any]:
    """A pipeline for the statements that follow, unless the connection is in one already
    (then leaving a nested one would sync: a round trip that waits for nothing)."""
    conn = tx.conn
    return nullcontext() if conn.pgconn.pipeline_status != pq.PipelineStatus.OFF else conn.pipeline()


async def enqueue_many(conn: TenantConn, work: list[tuple[str, str]], op: str, *,
                       fresh: set[str] | frozenset[str] = frozenset()) -> None:
    """Queue index work (memory id, owner) for the outbox worker, folding the memories'
    earlier pending rows (``_writes.enqueue_index``, for many memories at once); ``fresh``
    memories were created in this transaction and have none."""
    tenant = conn.tenant
    ids = [m for m, _ in work]
    if older := [m for m in ids if m not in fresh]:
        await conn.execute(
            "DELETE FROM outbox WHERE tenant_id = %s AND id IN (SELECT id FROM outbox WHERE tenant_id = %s "
            "AND memory_id = ANY(%s::uuid[]) AND attempts = 0 AND NOT dead FOR UPDATE SKIP LOCKED)",
            (tenant, tenant, older),
        )
    await conn.execute(
        "INSERT INTO outbox (tenant_id, memory_id, subject, op) "
        "SELECT %s, w.id, w.subject, %s FROM unnest(%s::uuid[], %s::text[]) WITH ORDINALITY AS w(id, subject, n) "
        "ORDER BY w.n",
        (tenant, op, ids, [s for _, s in work]),
    )


async def record_version(conn: TenantConn, memory_id: str, change: Change) -> None:
    """Snapshot the memory's current row as a version, and mark older versions superseded.

    The version keeps the memory's ciphertext and labels as they are: it was sealed for the
    same memory id and field, so the subject's data key opens it there too.
    """
    tenant = conn.tenant
    await conn.execute(
        "UPDATE memory_versions SET status = 'superseded' "
        "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'",
        (tenant, memory_id),
    )
    await conn.execute(f"INSERT INTO memory_versions ({VERSION_COLUMNS}) {SNAPSHOTS}",
                       ([memory_id], [change.value], tenant))


async def enqueue_index(conn: TenantConn, memory_id: str, subject: str, op: str) -> None:
    """Queue index work for the outbox worker, folding the memory's earlier pending rows.

    Rows a worker holds are skipped, not waited for: a write never waits for a batch of
    embeddings. The worker re-reads the current row, so a row left over is harmless.
    """
    await enqueue_many(conn, [(memory_id, subject)], op)

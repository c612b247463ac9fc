"""The stores, opened once, and their tenant-bound session.

``Stores`` holds what a process opened for memories (``StoreParts``: the app-role pool, the
key provider, the term hasher, the tenant policy lookup, what an erase needs).
``Stores.session(tenant, agent)`` is how use cases, recall, extraction, consolidation and
the workers reach memories: the session carries the tenant into every query, owns the
tenant's transactions (one per unit of work, inside the session) and holds what belongs to
the tenant: the subject keys, the tenant's keyword term hasher and its policy. Its reads are
``_reads``'s, its erase ``_erase``'s; it builds the item writer (``StoreSession.item_writer``) —
the only place that does — so every write applies the same conflict policies, TTLs and
trust levels.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from psycopg import sql

from memoryd.domain import (
    AuditTag,
    Draft,
    ExtractionJob,
    Internal,
    KeyProvider,
    Memory,
    NotFound,
    ReadFilter,
    Resolution,
    Scope,
    TenantPolicy,
    Turn,
    WriteResult,
)

from .._filters import LIVE_NOW, read_conditions
from ..keys import DataKey, SubjectKeys
from ..keywords import TermHasher
from ..postgres import Postgres, audit, counters
from ..vectors import IndexedMemory, embedding_text
from . import _erasure as erasure
from . import _trust as trust
from ._bound import Bound, Indexes, IndexWork, JobDesk, StoreParts, VectorEraser
from ._erase import ERASURE_ROUND_SECONDS, Erasing
from ._erasure import IndexVectors
from .sessions import SessionSnapshots, join_session
from ._rows import MEMORY_COLUMNS, memory_from_row
from ._writes import (ItemWriter, Written, claim_idempotency, store_idempotent_response, unindexed, write_response,
                      written_before)

# What reading a job the caller did not queue, or that does not exist, says (alike).
NO_SUCH_JOB = "no such extraction job for this subject"
# What the index needs of a memory (``index_rows``, ``index_page``).
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


# ResolveConflict: settle the pending values of one keyed memory by hand.


async def _current(conn: Any, session: Bound, flt: ReadFilter, memory_id: str) -> dict[str, Any] | None:
    where, params = read_conditions(session, flt)
    cur = await conn.execute(
        sql.SQL("SELECT {cols} FROM memories WHERE {where} AND id = %s AND {live} AND key_label <> '\\x' "
                "FOR UPDATE").format(cols=sql.SQL(MEMORY_COLUMNS), where=where, live=sql.SQL(LIVE_NOW)),
        [*params, memory_id],
    )
    return await cur.fetchone()  # type: ignore[no-any-return]


async def resolve(conn: Any, session: StoreSession, subject: str, flt: ReadFilter, memory_id: str,
                  resolution: Resolution, pending_id: str, tag: AuditTag) -> Memory:
    """Keep the current value (dropping the pending value ``pending_id``, or all of them) or
    accept ``pending_id`` as the new current value, with its own provenance and trust.

    The memory must be a live keyed memory the filter reads (else NotFound, as for an id
    that does not exist). Whether the caller may change it is decided before, by its guard.
    """
    tenant, agent, keys = session.tenant, session.agent, session.keys
    row = await _current(conn, session, flt, memory_id)
    if row is None:
        raise NotFound("no such keyed memory for this subject")
    opened = (await keys.open_rows(conn, [row]))[0]
    owner = row["subject"]
    details: dict[str, Any] = {"resolution": resolution.value}
    if resolution is Resolution.KEEP_CURRENT:
        dropped = await trust.discard(conn, [memory_id], pending_id)
        if not dropped:
            raise NotFound("this memory has no such pending value" if pending_id else "this memory has no pending values")
        details["discarded"] = dropped
    else:
        held = await trust.take(session, conn, memory_from_row(opened), pending_id)
        if held is None:
            raise NotFound("this memory has no such pending value")
        writer = session.item_writer(conn, subject, agent=held.agent)
        result = await writer.accept(row, held.draft, owner, held.trust)
        details.update(accepted=held.id, version=result.version)
    await counters.bump(conn, {counters.CONFLICTS_RESOLVED: 1})
    await audit.append(conn, agent, subject, "resolve_conflict", [memory_id], tag, details)
    cur = await conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s AND id = %s",
                             (tenant, memory_id))
    after = await cur.fetchone()
    assert after is not None
    memory = memory_from_row((await keys.open_rows(conn, [after]))[0])
    return (await trust.with_pending(session, conn, [memory]))[0]


class _WrittenSince(Exception):
    """An idle session was written in after the sweep claimed it: its end is rolled back."""


class StoreSession(SessionSnapshots, Erasing):
    """One tenant's and one agent's session (``agent`` '' for the service's own work)."""

    def item_writer(self, conn: Any, subject: str, *, agent: str | None = None,
                    first_key: DataKey | None = None) -> ItemWriter:
        """The writer of ``subject``'s items in ``conn``'s transaction, as ``agent`` (default:
        the session's). Data keys are taken (and locked) once per owner; ``first_key`` is one
        the caller already holds for ``subject``."""
        held: dict[str, DataKey] = {subject: first_key} if first_key is not None else {}

        async def key_for(owner: str) -> DataKey:
            if owner not in held:
                held[owner] = await self.keys.for_write(conn, owner)
            return held[owner]

        return ItemWriter(conn, agent or self.agent, subject, self.hasher, key_for, self.policy)

    async def write(
        self,
        subject: str,
        drafts: list[Draft],
        *,
        blind: list[bool] | None = None,
        idempotency_key: str = "",
        request_hash: bytes = b"",
        tag: AuditTag = AuditTag(),
        session_id: str = "",
    ) -> list[WriteResult]:
        """Apply every draft's conflict policy in one transaction: all items or none.

        ``blind[i]`` says the writer cannot see what item i meets (``ItemWriter.write_all``).
        The results are the real outcomes; what the caller is told is the guard's business.
        """
        written = await self.write_with_index_state(subject, drafts, blind=blind,
                                                    idempotency_key=idempotency_key, request_hash=request_hash,
                                                    tag=tag, session_id=session_id)
        return written.results

    async def write_with_index_state(
        self,
        subject: str,
        drafts: list[Draft],
        *,
        blind: list[bool] | None = None,
        idempotency_key: str = "",
        request_hash: bytes = b"",
        tag: AuditTag = AuditTag(),
        session_id: str = "",
    ) -> Written:
        """``write``, also telling which written memories still have index work queued —
        read in the same transaction, so answering ``indexed`` takes no second one. This
        process's outbox worker is woken for the work once it is committed. ``session_id``:
        the subject's memories written join that session (``join_session``)."""
        written = await self._write(subject, drafts, blind=blind, idempotency_key=idempotency_key,
                                    request_hash=request_hash, tag=tag, session_id=session_id)
        self._nudge_outbox()
        return written

    def _nudge_outbox(self) -> None:
        if self.parts.outbox is not None:
            self.parts.outbox.wakeup.set()

    async def _write(self, subject: str, drafts: builtins.list[Draft], *, blind: builtins.list[bool] | None,
                     idempotency_key: str, request_hash: bytes, tag: AuditTag, session_id: str = "") -> Written:
        agent, session = self.agent, self
        # Pipelined: the statements below wait for Postgres only where they read an answer —
        # the data key, the rows the items meet, the audit chain's head — and the commit.
        async with session.transaction(pipelined=True) as conn:
            if idempotency_key:
                response = await claim_idempotency(session, conn, idempotency_key, request_hash)
                if response is not None:
                    first = written_before(response)
                    return Written(first, await (await unindexed(session, conn, first))())
            writer = session.item_writer(conn, subject)
            flags = blind or [False] * len(drafts)
            results = await writer.write_all(drafts, flags)
            if session_id:  # the subject's own memories: the organisation's belong to no session of it
                await join_session(conn, agent, subject, session_id,
                                   [r.memory_id for r, d in zip(results, drafts, strict=True)
                                    if r.memory_id and d.scope is not Scope.ORG])
            if idempotency_key:
                await store_idempotent_response(session, conn, idempotency_key, write_response(results))
            queued = await unindexed(session, conn, results, writer.enqueued)
            await audit.append(conn, agent, subject, "write", [r.memory_id for r in results if r.memory_id],
                               tag, {"outcomes": [r.outcome.value for r in results]})
            await writer.finish()
            return Written(results, await queued())

    async def end_session(self, subject: str, session_id: str, summary: Draft | None, *, blind: bool,
                          expires_at: datetime, tag: AuditTag = AuditTag(),
                          idle_since: datetime | None = None) -> bool:
        """End ``subject``'s session ``session_id`` in one transaction: write its ``summary``
        (if any) as this agent's Write would (``blind`` as the guard decided), then
        ``close_session``. ``idle_since``: the idle sweep's claim; False (nothing written) if
        the session was written in since."""
        try:
            async with self.transaction() as conn:
                summary_id = ""
                if summary is not None:
                    writer = self.item_writer(conn, subject)
                    [result] = await writer.write_all([summary], [blind])
                    await writer.finish()
                    summary_id = result.memory_id
                    await audit.append(conn, self.agent, subject, "write", [summary_id], tag,
                                       {"outcomes": [result.outcome.value]})
                if not await self.close_session(conn, subject, session_id, expires_at, summary_id, idle_since):
                    raise _WrittenSince()
                await audit.append(conn, self.agent, subject, "session.end", [summary_id] if summary_id else [], tag,
                                   {"session_id": session_id, "idle": idle_since is not None})
        except _WrittenSince:
            return False
        self._nudge_outbox()
        return True

    async def pending_index_work(self, ids: list[str]) -> tuple[int, int]:
        """(pending, dead) outbox rows for ``ids``."""
        tenant = self.tenant
        async with self.transaction() as conn:
            cur = await conn.execute(
                "SELECT count(*) FILTER (WHERE NOT dead) AS pending, count(*) FILTER (WHERE dead) AS dead "
                "FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])",
                (tenant, ids),
            )
            row = await cur.fetchone()
        assert row is not None
        return int(row["pending"]), int(row["dead"])

    async def record_reads(self, counts: dict[str, int],
                           events: list[tuple[str, str, str, list[str], AuditTag]]) -> None:
        """Add recall counts and last-access times, and append read events (agent, subject,
        action, ids, request id) to the audit chain — one transaction per batch."""
        tenant = self.tenant
        if not counts and not events:
            return
        async with self.transaction() as conn:
            if counts:
                await conn.execute(
                    "UPDATE memories m SET access_count = m.access_count + c.n, last_access_at = now() "
                    "FROM unnest(%s::uuid[], %s::int[]) AS c(id, n) WHERE m.tenant_id = %s AND m.id = c.id",
                    (list(counts), list(counts.values()), tenant),
                )
            for agent, subject, action, ids, tag in events:
                await audit.append(conn, agent, subject, action, ids, tag)

    async def resolve_conflict(self, subject: str, flt: ReadFilter, memory_id: str,
                               resolution: Resolution, pending_id: str, tag: AuditTag = AuditTag()) -> Memory:
        """Settle one keyed memory's pending values by hand (``resolve``)."""
        async with self.transaction() as conn:
            flt = await self.label(conn, flt)
            memory = await resolve(conn, self, subject, flt, memory_id, resolution, pending_id, tag)
        self._nudge_outbox()
        return memory

    async def index_rows(self, ids: list[str]) -> list[tuple[IndexedMemory, str | None]]:
        """What the index needs of the active memories among ``ids``, with the text to embed
        (None for a memory whose content cannot be decrypted: it must not be embedded)."""
        tenant = self.tenant
        async with self.transaction() as conn:
            cur = await conn.execute(
                f"SELECT {_INDEX_COLUMNS} FROM memories WHERE tenant_id = %s AND id = ANY(%s::uuid[]) "
                "AND status = 'active'",
                (tenant, ids),
            )
            rows = await self.keys.open_rows(conn, await cur.fetchall())
        return [_index_row(r) for r in rows]

    async def index_page(self, after_id: str | None,
                         limit: int) -> list[tuple[IndexedMemory, str | None]]:
        """A page of active memories in id order after ``after_id``, for re-embedding."""
        tenant = self.tenant
        async with self.transaction() as conn:
            cur = await conn.execute(
                f"SELECT {_INDEX_COLUMNS} FROM memories WHERE tenant_id = %s AND status = 'active' "
                "AND id > %s::uuid ORDER BY id LIMIT %s",
                (tenant, after_id or "00000000-0000-0000-0000-000000000000", limit),
            )
            rows = await self.keys.open_rows(conn, await cur.fetchall())
        return [_index_row(r) for r in rows]

    async def count_active(self) -> int:
        tenant = self.tenant
        async with self.transaction() as conn:
            cur = await conn.execute("SELECT count(*) AS n FROM memories WHERE tenant_id = %s AND status = 'active'",
                                     (tenant,))
            row = await cur.fetchone()
        return int(row["n"]) if row else 0

    async def verify_audit(self) -> audit.ChainReport:
        async with self.transaction() as conn:
            return await audit.verify(conn)

    async def erasures(self, *, limit: int = 50, unverified_only: bool = False) -> builtins.list[dict[str, Any]]:
        """The tenant's latest erasures with their checks (``_erasure.history``), for operators."""
        async with self.transaction() as conn:
            return await erasure.history(self, conn, limit, unverified_only)

    async def lifecycle_counts(self) -> dict[str, int]:
        """The tenant's lifecycle and conflict counters (``_counters``)."""
        async with self.transaction() as conn:
            return await counters.read(conn, counters.LIFECYCLE_FAMILIES)

    async def wait_indexed(self, ids: builtins.list[str], timeout: float) -> bool:
        """Wait until no index work is pending for ``ids``; False if it did not happen in time.

        With this process's worker, each batch it settles ends the wait for a new look at once. The
        backing-off pause between looks is for work that a worker in another process settles.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.02
        while True:
            settled = None
            worker = self.parts.outbox
            if worker is not None:
                settled = worker.next_settlement()  # taken before the look: a batch settling during it counts
                worker.wakeup.set()
            pending, dead = await self.pending_index_work(ids)
            if not pending and not dead:
                return True
            if dead or loop.time() + delay > deadline:
                return False
            if settled is None:
                await asyncio.sleep(delay)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(settled.wait(), timeout=delay)
            delay = min(delay * 2, 0.25)

    async def queue_extraction(self, subject: str, turns: tuple[Turn, ...], *, idempotency_key: str = "",
                               request_hash: bytes = b"", tag: AuditTag = AuditTag(), session_id: str = "") -> str:
        """Queue ``turns`` of ``subject`` for extraction as this agent's job; its id. What it
        writes joins ``session_id``, if set."""
        if self.parts.jobs is None:
            raise Internal("this process queues no extraction jobs")
        return await self.parts.jobs.enqueue(self, subject, turns, idempotency_key=idempotency_key,
                                             request_hash=request_hash, tag=tag, session_id=session_id)

    async def extraction_job(self, subject: str, job_id: str) -> ExtractionJob:
        """This agent's job ``job_id`` of ``subject``; NotFound for any other, alike."""
        if self.parts.jobs is None:
            raise NotFound(NO_SUCH_JOB)
        return await self.parts.jobs.get(self, subject, job_id)


class Stores:
    """Memories in Postgres, the source of truth, with their keyword index, opened once.

    ``hasher`` keys the keyword index's term hashes; a session keeps the terms of every
    memory in step with its text in the same transaction. ``keys`` wraps the subjects' data
    keys: text and data are stored only sealed (``_envelope``), and read back as
    ``content_unavailable`` when their key is gone or cannot be unwrapped. ``vectors`` is how
    an erase clears the vector index (``use_index``).
    """

    def __init__(self, db: Postgres, hasher: TermHasher, keys: KeyProvider,
                 policy_for: Callable[[str], TenantPolicy] | None = None, *,
                 erasure_round: float = ERASURE_ROUND_SECONDS, vectors: VectorEraser | None = None) -> None:
        self.parts = StoreParts(db, hasher, SubjectKeys(keys), policy_for or (lambda tenant: TenantPolicy()),
                                erasure_round, vectors)

    def session(self, tenant: str, agent: str = "") -> StoreSession:
        """The tenant-bound session of ``agent`` ('' for the service's own work: workers, sweeps)."""
        return StoreSession(self.parts, tenant, agent)

    def use_index(self, indexes: Indexes, outbox: IndexWork | None = None) -> None:
        """Erase clears the vectors of ``indexes`` (every collection of the process's index
        set); a write wakes ``outbox`` (this process's outbox worker), and ``wait_indexed``
        waits on it."""
        self.parts.vectors = IndexVectors(indexes)
        self.parts.outbox = outbox

    def use_jobs(self, jobs: JobDesk) -> None:
        """Sessions queue and read extraction jobs in ``jobs`` (the process's queue)."""
        self.parts.jobs = jobs

    @property
    def db(self) -> Postgres:
        """The app-role pool (the lifecycle sweeper shares it)."""
        return self.parts.db

    @property
    def keys(self) -> SubjectKeys:
        return self.parts.keys

    @property
    def erasure_round(self) -> float:
        """How often a Milvus server's files are compacted for the purges since the last round
        (``_erasure_recheck``): the receipt's ``pending`` is confirmed within about that."""
        return self.parts.erasure_round

    @property
    def policy_for(self) -> Callable[[str], TenantPolicy]:
        """The tenant's lifecycle and trust policy (TTLs, trust levels), asked for per write."""
        return self.parts.policy_for

    @property
    def term_hasher(self) -> Callable[[str], TermHasher]:
        """A tenant's keyword term hasher, given the tenant (sealing rows written before keys
        were labelled): ``TermHasher.for_tenant``."""
        return self.parts.root_hasher.for_tenant

"""Erase, end to end in storage: rows, in-flight index writes, vectors, verify, receipt.

``erase`` runs the whole protocol for one session: it deletes (PURGE) or forgets (FORGET) the
selected rows and logs the erase in one transaction, waits for index writes still in flight
(``_await_batches_in_flight``), clears the vectors through the ``VectorEraser`` the stores
were built with, re-reads what it erased and records the check, and returns the receipt. What
a PURGE removes beyond the rows, and what a receipt cannot vouch for, is ``_erasure``'s.
``forget_ids`` is the FORGET step that consolidation and the lifecycle sweeper share.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from psycopg import sql

from memoryd.domain import AuditTag, Change, EraseMode, EraseSelector, ErasureReceipt, ReadFilter, StoreCounts

from ..postgres import TenantConn, audit
from .._filters import in_states, rules_condition
from ..keywords import delete_terms
from . import _erasure as erasure
from . import _trust as trust
from ._bound import Bound, VectorErasure
from ._write_batch import enqueue_index, record_version


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


async def erase(
    session: Bound,
    subject: str,
    flt: ReadFilter,
    selector: EraseSelector,
    mode: EraseMode,
    *,
    reason: str = "",
    tag: AuditTag = AuditTag(),
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

    The steps, in order: the rows (one transaction, with the erasure log and the purge's
    place in the re-check queue), the wait for index writes in flight, the vectors (the
    ``VectorEraser`` the stores were built with; none: nothing to clear), the re-read, and
    the receipt.
    """
    started = datetime.now(UTC)
    tenant, agent, parts = session.tenant, session.agent, session.parts
    hasher = session.hasher
    # What the logs keep of the selector: a key only as its label, so no log row holds
    # the name of what was erased.
    described = selector.describe()
    if selector.key and not selector.ids:
        described = {"key_label": hasher.label(selector.key).hex()}
    shred = mode is EraseMode.PURGE and selector.all_of_subject
    digest = erasure.request_digest(agent, subject, described, mode, reason)
    replay: erasure.LoggedErase | None = None
    async with session.transaction() as conn:
        flt = await session.label(conn, flt)
        where, params = _selection(session, subject, flt, selector, mode)
        if shred:
            # Taken before the memories: a concurrent write holds the key row FOR SHARE
            # until it commits, so this waits for it and then sees (and purges) its rows;
            # a write that starts later waits for this commit and makes a fresh key.
            await conn.execute("SELECT 1 FROM subject_keys WHERE tenant_id = %s AND subject = %s FOR UPDATE",
                               (tenant, subject))
        # Pending extraction jobs go first (their turns with them): the job row is locked
        # after the key row and before memory rows, as a finishing job does.
        if shred:
            await erasure.drop_job_records(session, conn, subject)
        jobs = await erasure.drop_subject_jobs(session, conn, subject, mode) if selector.all_of_subject else []
        states, state_params = in_states(flt, started)
        cur = await conn.execute(
            sql.SQL("SELECT id, {states} AS counted FROM memories WHERE {where} FOR UPDATE").format(
                states=states, where=where), [*state_params, *params]
        )
        rows = await cur.fetchall()
        ids = [str(r["id"]) for r in rows]
        counted = frozenset(str(r["id"]) for r in rows if r["counted"])
        if mode is EraseMode.FORGET:
            counts, answered = await forget_ids(conn, subject, ids, counted)
        else:
            counts, answered = await _purge(session, conn, ids, counted)
        counts = replace(counts, jobs=len(jobs))
        answered = replace(answered, jobs=jobs.count(agent))
        if shred and not await _subject_rows_left(session, conn, subject):
            destroyed = await session.keys.destroy(conn, subject)
            await _erase_subject_changes(session, conn, subject)
            counts, answered = replace(counts, keys=destroyed), replace(answered, keys=destroyed)
        mentions = None
        if selector.all_of_subject and subject and flt.include_org:
            mentions = await erasure.organisation_mentions(session, conn, flt, subject, started)
        if not (ids or jobs or counts.keys):
            replay = await erasure.replayed(session, conn, digest)
            if replay is not None and mode is EraseMode.PURGE and replay.ids and not replay.checked:
                # Its process died before the check, and it is not queued (logged by an
                # earlier release, which queued a purge only after its check): a worker
                # checks it.
                if not replay.queued:
                    await erasure.recheck_in(session, conn, replay.receipt.erase_id, 0.0)
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
            await audit.append(conn, agent, subject, f"erase.{mode.value}", ids, tag,
                         {"selector": described, "reason": reason})
            erase_id = await erasure.log_erase(session, conn, subject, described, mode, reason, counts,
                                               answered, counted, started, ids, digest, mentions)
            if mode is EraseMode.PURGE and ids:
                # If this process dies before its check, a worker does it (after the
                # fallback deletion above); the check below moves or removes this.
                await erasure.recheck_in(session, conn, erase_id, PURGE_FALLBACK_SECONDS)
    if replay is not None:  # a retry of an erase already done: answered from its log
        if replay.checked or replay.queued:  # checked, or a worker will check it
            return erasure.shown(replay.receipt, replay.counted, selector.all_of_subject)
        # Never checked, and nothing in the index to check (a FORGET, or no memory): the
        # re-read of the rows, now.
        erase_id, ids, answered, started, mentions = (replay.receipt.erase_id, replay.ids, replay.receipt.counts,
                                                      replay.receipt.started_at, replay.receipt.organisation_mentions)
        counted = frozenset(replay.counted)
    if mode is EraseMode.PURGE:
        parts.names.evict(session, subject)  # no purged key name stays in this process
        await _await_batches_in_flight(session, ids)
    vectors = await parts.vectors.erase(session, subject, ids, mode=mode, whole_subject=selector.all_of_subject,
                                         counted=counted, defer=partial(enqueue_vector_deletes, session)) \
        if parts.vectors is not None else VectorErasure()
    answered = replace(answered, vectors=vectors.counted)
    unchecked = erasure.unchecked(mode, vectors)
    async with session.transaction() as conn:
        if mode is EraseMode.PURGE and vectors.verified and ids:  # the queued deletion is done
            await conn.execute("DELETE FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) "
                               "AND op = 'delete'", (tenant, ids))
        verified = vectors.verified and await _verify(session, conn, subject, flt, selector, mode, ids)
        finished = await erasure.record_check(session, conn, erase_id, verified, vectors.deleted,
                                              vectors.counted, unchecked)
        queued = False
        if mode is EraseMode.PURGE and ids:
            if verified:
                # A server's compaction: in the next round, shared by every erase due.
                queued = vectors.later
                await erasure.recheck_in(session, conn, erase_id, parts.erasure_round if queued else None,
                                         aligned=True)
            else:
                # Rows gone but the index not confirmed clear (down, or a vector read
                # back): a worker checks the index again as soon as the outbox has done
                # the deletions. Rows left: no check of the index can make it verified.
                queued = await _verify(session, conn, subject, flt, selector, mode, ids, queued_deletes=False)
                await erasure.recheck_in(session, conn, erase_id, 0.0 if queued else None)
    return erasure.shown(ErasureReceipt(erase_id, mode, answered, verified, started, finished, unchecked, mentions,
                                        erasure.pending(verified, queued)), counted, selector.all_of_subject)


def _selection(session: Bound, subject: str, flt: ReadFilter, selector: EraseSelector,
               mode: EraseMode) -> tuple[sql.Composable, list[Any]]:
    tenant, hasher = session.tenant, session.hasher
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


async def forget_ids(conn: TenantConn, subject: str, ids: list[str],
                     counted: frozenset[str] = frozenset()) -> tuple[StoreCounts, StoreCounts]:
    """Forget the locked, active memories ``ids`` of ``subject`` in the caller's transaction
    (Erase FORGET, consolidation and the lifecycle sweeper): what went, and what went of
    the ``counted`` ids."""
    tenant = conn.tenant
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
    await trust.discard(conn, ids)  # a forgotten memory has no value left to settle
    for memory_id in ids:
        await record_version(conn, memory_id, Change.FORGOTTEN)
        # A forgotten memory must leave the vector index as well.
        await enqueue_index(conn, memory_id, subject, "delete")
    return (StoreCounts(memories=len(ids), outbox=dropped),
            StoreCounts(memories=len(counted), outbox=counted_dropped))


async def _await_batches_in_flight(session: Bound, ids: list[str]) -> None:
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
    tenant = session.tenant
    deadline = asyncio.get_running_loop().time() + IN_FLIGHT_WAIT_SECONDS
    while True:
        async with session.transaction() as conn:
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


async def _purge(session: Bound, conn: Any, ids: list[str],
                 counted: frozenset[str]) -> tuple[StoreCounts, StoreCounts]:
    """Delete the locked memories ``ids`` and what hangs on them: what went, and what went
    of the ``counted`` ids."""
    if not ids:
        return StoreCounts(), StoreCounts()
    tenant = session.tenant
    gone: dict[str, tuple[int, int]] = {}
    await delete_terms(conn, ids)
    await erasure.drop_write_records(session, conn, ids)
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


async def _erase_subject_changes(session: Bound, conn: Any, subject: str) -> None:
    """Nothing of an erased subject stays in the change log: its rows go (the erased rows
    this purge has just logged among them), and one 'subject_erased' row says it went."""
    tenant = session.tenant
    await conn.execute("DELETE FROM memory_changes WHERE tenant_id = %s AND subject = %s", (tenant, subject))
    await conn.execute("INSERT INTO memory_changes (tenant_id, subject, scope, kind) "
                       "VALUES (%s, %s, %s, 'subject_erased')", (tenant, subject, "org" if not subject else "subject"))


async def _subject_rows_left(session: Bound, conn: Any, subject: str) -> bool:
    tenant = session.tenant
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM memories WHERE tenant_id = %s AND subject = %s) "
        "OR EXISTS (SELECT 1 FROM memory_versions WHERE tenant_id = %s AND subject = %s) AS left",
        (tenant, subject, tenant, subject),
    )
    row = await cur.fetchone()
    return bool(row and row["left"])


async def _verify(session: Bound, conn: Any, subject: str, flt: ReadFilter, selector: EraseSelector,
                  mode: EraseMode, ids: list[str], *, queued_deletes: bool = True) -> bool:
    """Re-read after commit: nothing selected is left (PURGE) or still active (FORGET).
    ``queued_deletes=False``: vector deletions still queued for ``ids`` do not count."""
    tenant = session.tenant
    where, params = _selection(session, subject, flt, selector, mode)
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
            # The change log keeps only the row that says the subject was erased (and what
            # was written since: a later write is not the erased subject's).
            checks.append((sql.SQL("SELECT count(*) AS n FROM memory_changes WHERE tenant_id = %s AND subject = %s "
                                   "AND kind <> 'subject_erased' AND memory_id NOT IN (SELECT id FROM memories "
                                   "WHERE tenant_id = %s AND subject = %s)"), [tenant, subject, tenant, subject]))
    for query, query_params in checks:
        cur = await conn.execute(query, query_params)
        row = await cur.fetchone()
        if row is None or row["n"]:
            return False
    return True


async def queued_purge(session: Bound, erase_id: str) -> erasure.Purged | None:
    """A queued PURGE's ids for the background re-check; None (and off the queue) if there
    is no such purge."""
    tenant = session.tenant
    async with session.transaction() as conn:
        logged = await erasure.logged_ids(session, conn, erase_id)
        if logged is None:
            await erasure.recheck_in(session, conn, erase_id, None)  # nothing to check
            return None
        subject, ids, counted = logged
        cur = await conn.execute("SELECT 1 FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) "
                                 "AND NOT dead LIMIT 1", (tenant, ids))
        return erasure.Purged(subject, ids, counted, busy=await cur.fetchone() is not None)


async def record_recheck(session: Bound, erase_id: str, ids: list[str],
                         vectors: VectorErasure) -> bool:
    """Add a background re-check of a PURGE to its log (``vectors``: what clearing its ids
    from the index came to); whether it is verified. Once nothing is left to confirm it
    leaves the queue; the caller schedules it otherwise."""
    tenant = session.tenant
    async with session.transaction() as conn:
        if vectors.verified:  # dead-lettered deletions, if any, are done now
            await conn.execute("DELETE FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[]) "
                               "AND op = 'delete'", (tenant, ids))
        verified = vectors.verified and await erasure.rows_gone(session, conn, ids)
        await erasure.record_check(session, conn, erase_id, verified, vectors.deleted, vectors.counted,
                                   erasure.unchecked(EraseMode.PURGE, vectors), recheck=True)
        if verified and not vectors.later:
            await erasure.recheck_in(session, conn, erase_id, None)
    return verified


async def enqueue_vector_deletes(session: Bound, subject: str, ids: list[str]) -> None:
    """Leave the index's deletions to the outbox worker (the index was unreachable)."""
    async with session.transaction() as conn:
        for memory_id in ids:
            await enqueue_index(conn, memory_id, subject, "delete")


class Erasing(Bound):
    """The session's erase and what the background re-check of a purge asks of it."""

    async def erase(self, subject: str, flt: ReadFilter, selector: EraseSelector, mode: EraseMode, *,
                    reason: str = "", tag: AuditTag = AuditTag()) -> ErasureReceipt:
        """Forget or purge the selected memories of ``subject``, end to end (``erase``)."""
        return await erase(self, subject, flt, selector, mode, reason=reason, tag=tag)

    async def enqueue_vector_deletes(self, subject: str, ids: list[str]) -> None:
        await enqueue_vector_deletes(self, subject, ids)

    async def queued_purge(self, erase_id: str) -> erasure.Purged | None:
        return await queued_purge(self, erase_id)

    async def record_recheck(self, erase_id: str, ids: list[str], vectors: VectorErasure) -> bool:
        return await record_recheck(self, erase_id, ids, vectors)

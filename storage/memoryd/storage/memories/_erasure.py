"""What a PURGE removes beyond the memory rows, and what it cannot vouch for.

- Idempotency records. A record keeps the SHA-256 of the whole Write request and the ids it
  answered with, for as long as the key lives; a purge of a memory deletes every record
  whose response names it (and a whole-subject purge those naming the subject's extraction
  jobs), in the purge's transaction. A retry with such a key is then a new request: it
  writes again and gets new ids — the erasure forgets that the write ever happened, rather
  than answering with ids of memories that no longer exist.
- The vectors. Deleted from every collection and read back by query (strongly: a server
  answers a bounded read from before the delete). Milvus Lite of this process is compacted
  at once, so the rows leave its files, and its files are read back. A Milvus server's
  compaction is collection-wide: it flushes every growing segment of every tenant and can
  take minutes, so an Erase never waits for it — the erase is queued for the next
  background round (``_erasure_recheck``), which compacts once for every erase due and
  records the result. The receipt says so: ``pending``.

The receipt. The erasure log row commits with the erase itself (with the erased ids and a
digest of the request), and so does the erase's place in the re-check queue (due after
the purge's fallback deletion, in case this process dies before its check); the check
after the commit adds a row to ``erasure_checks`` and moves the erase in the queue (off it,
to the next round, or at once when the index was down). A retry of the same request by the
same agent that finds nothing left to erase, within ``REPLAY_WINDOW``, is answered from the
log — the first receipt as its latest check left it, with what is still pending — instead
of "0 erased" (``replayed``): it never checks again itself.

``unchecked`` names what a receipt's ``verified`` does not cover, because nothing this
process can read shows it: Postgres's WAL and dead tuples (until VACUUM and WAL recycling;
crypto-shredding leaves the sealed values there unreadable), backups, and the vector store's
files wherever compaction could not be confirmed or its old files are out of reach (a Milvus
server keeps the old segments' binlogs until its garbage collection, and the inserted rows in
its message log until the log's retention).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from memoryd.domain import EraseMode, ErasureReceipt, Internal, ReadFilter, StoreCounts, Unavailable

from .._filters import Tenanted, read_conditions
from ._bound import Bound, Indexes, VectorErasure


_log = logging.getLogger("memoryd.storage.erasure")

POSTGRES_HISTORY = "postgres_wal_and_dead_tuples"
BACKUPS = "backups"
VECTOR_FILES = "vector_store_files"  # compaction not confirmed: deleted rows may be in the files
# Compacted on a Milvus server, which keeps the replaced segments' binlogs until its garbage
# collection and every inserted row in its message log (rocksmq, Pulsar, Kafka) until retention.
VECTOR_SERVER_LOGS = "vector_store_binlogs_and_message_log"
# Pending only: the vectors' deletion is not yet confirmed by reading the index (it was down,
# or still held a vector); the background re-check deletes and reads again.
VECTOR_INDEX = "vector_index"


REPLAY_WINDOW = timedelta(minutes=15)


def request_digest(agent: str, subject: str, selector: dict[str, Any], mode: EraseMode, reason: str) -> bytes:
    """What makes two Erase calls the same request (the selector as the logs keep it)."""
    text = json.dumps([agent, subject, selector, mode.value, reason], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class LoggedErase:
    """An erasure log row: the receipt as committed with the erase, and its latest check."""

    receipt: ErasureReceipt
    ids: list[str]
    counted: list[str]  # the ids the receipt counts
    checked: bool
    queued: bool  # in the re-check queue


async def log_erase(session: Bound, conn: Any, subject: str, described: dict[str, Any], mode: EraseMode,
                    reason: str, counts: StoreCounts, answered: StoreCounts, counted: frozenset[str],
                    started: datetime, ids: list[str], digest: bytes, mentions: int | None = None) -> str:
    """The receipt's row, in the erase's own transaction: not verified until ``record_check``.
    ``counts`` is everything erased; ``answered`` what the receipt says (of the ``counted``
    ids: what the caller could see), with the organisation ``mentions`` it told of."""
    tenant, agent = session.tenant, session.agent
    logged = {**counts.__dict__, "answered": {**answered.__dict__, "ids": sorted(counted),
                                              "organisation_mentions": mentions}}
    cur = await conn.execute(
        "INSERT INTO erasure_log (tenant_id, agent, subject, selector, mode, reason, counts, verified, started_at, "
        "finished_at, memory_ids, request_digest) VALUES (%s, %s, %s, %s, %s, %s, %s, false, %s, clock_timestamp(), "
        "%s::uuid[], %s) RETURNING erase_id",
        (tenant, agent, subject, Jsonb(described), mode.value, reason, Jsonb(logged), started, ids, digest))
    row = await cur.fetchone()
    assert row is not None
    return str(row["erase_id"])


async def record_check(session: Bound, conn: Any, erase_id: str, verified: bool, vectors: int, counted_vectors: int,
                       unchecked_parts: tuple[str, ...], *, recheck: bool = False) -> datetime:
    """Add a check's result to the erasure log (``recheck``: by the background re-check)."""
    tenant = session.tenant
    cur = await conn.execute(
        "INSERT INTO erasure_checks (tenant_id, erase_id, verified, vectors, counted_vectors, unchecked, recheck) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING checked_at",
        (tenant, erase_id, verified, vectors, counted_vectors, list(unchecked_parts), recheck))
    row = await cur.fetchone()
    assert row is not None
    return row["checked_at"]  # type: ignore[no-any-return]


async def recheck_in(session: Bound, conn: Any, erase_id: str, delay: float | None, *, aligned: bool = False) -> None:
    """Queue the erase for the background re-check ``delay`` seconds from now, or take it off
    the queue (None). ``aligned``: at the next multiple of ``delay`` seconds since a fixed
    epoch, so every erase of a round is due at the same moment and one worker's compaction
    serves them all (a Milvus server's flush seals a segment per written partition: once a
    round, not once an erase)."""
    tenant = session.tenant
    await conn.execute("DELETE FROM erasure_rechecks WHERE tenant_id = %s AND erase_id = %s", (tenant, erase_id))
    if delay is None:
        return
    due = NEXT_ROUND if aligned else "now() + make_interval(secs => %s)"
    await conn.execute(f"INSERT INTO erasure_rechecks (tenant_id, erase_id, next_attempt_at) VALUES (%s, %s, {due})",
                       (tenant, erase_id, *((delay, delay) if aligned else (delay,))))


def pending(verified: bool, queued: bool) -> tuple[str, ...]:
    """What the background re-check still has to confirm of a queued erase: the vectors'
    deletion unless verified, and the index's files (compaction) in any case."""
    if not queued:
        return ()
    return (VECTOR_FILES,) if verified else (VECTOR_INDEX, VECTOR_FILES)


async def logged_ids(session: Bound, conn: Any, erase_id: str) -> tuple[str, list[str], frozenset[str]] | None:
    """A PURGE's subject, erased ids and the ids its receipt counts; None if there is no such purge."""
    tenant = session.tenant
    cur = await conn.execute("SELECT subject, counts, memory_ids::text[] AS ids FROM erasure_log "
                             "WHERE tenant_id = %s AND erase_id = %s AND mode = 'purge'", (tenant, erase_id))
    row = await cur.fetchone()
    if row is None:
        return None
    counted = row["counts"].get("answered", {}).get("ids", row["ids"])
    return row["subject"], list(row["ids"]), frozenset(counted)


async def rows_gone(session: Bound, conn: Any, ids: list[str]) -> bool:
    """Whether nothing of the purged ``ids`` is left in Postgres: memories, versions, keyword
    terms, index work. By id only: what the subject wrote since the erase is not its concern."""
    tenant = session.tenant
    for table in ("memories", "memory_versions", "memory_terms", "outbox"):
        column = "id" if table == "memories" else "memory_id"
        cur = await conn.execute(
            sql.SQL("SELECT count(*) AS n FROM {t} WHERE tenant_id = %s AND {c} = ANY(%s::uuid[])").format(
                t=sql.Identifier(table), c=sql.Identifier(column)), (tenant, ids))
        row = await cur.fetchone()
        if row is None or row["n"]:
            return False
    return True


async def replayed(session: Bound, conn: Any, digest: bytes) -> LoggedErase | None:
    """The latest receipt of the same request by the same agent within ``REPLAY_WINDOW``."""
    tenant, agent = session.tenant, session.agent
    cur = await conn.execute(
        "SELECT l.erase_id::text AS erase_id, l.mode, l.counts, l.started_at, l.finished_at, "
        "l.memory_ids::text[] AS ids, c.verified, c.vectors, c.counted_vectors, c.unchecked, c.checked_at, "
        "EXISTS (SELECT 1 FROM erasure_rechecks r WHERE r.tenant_id = l.tenant_id AND r.erase_id = l.erase_id) "
        "AS queued FROM erasure_log l LEFT JOIN LATERAL (SELECT * FROM erasure_checks c WHERE c.tenant_id = l.tenant_id "
        "AND c.erase_id = l.erase_id ORDER BY c.checked_at DESC LIMIT 1) c ON true "
        "WHERE l.tenant_id = %s AND l.agent = %s AND l.request_digest = %s AND l.started_at > now() - %s "
        "ORDER BY l.started_at DESC LIMIT 1", (tenant, agent, digest, REPLAY_WINDOW))
    row = await cur.fetchone()
    if row is None:
        return None
    # Logged before version 24: the receipt said every count.
    answered = row["counts"].get("answered", {**row["counts"], "ids": row["ids"]})
    vectors = row["counted_vectors"] if row["counted_vectors"] is not None else row["vectors"]
    stored = {k: v for k, v in answered.items() if k in StoreCounts.__dataclass_fields__}
    counts = StoreCounts(**{**stored, "vectors": int(vectors or 0)})
    mode = EraseMode(row["mode"])
    checked = row["checked_at"] is not None
    parts = tuple(row["unchecked"]) if checked else unchecked(mode, VectorErasure(verified=False,
                                                                                 unchecked=(VECTOR_FILES,)))
    verified = bool(row["verified"])
    receipt = ErasureReceipt(row["erase_id"], mode, counts, verified, row["started_at"],
                             row["checked_at"] or row["finished_at"], parts, answered.get("organisation_mentions"),
                             pending(verified, row["queued"]))
    return LoggedErase(receipt, list(row["ids"]), list(answered["ids"]), checked, row["queued"])


async def history(session: Bound, conn: Any, limit: int, unverified_only: bool) -> list[dict[str, Any]]:
    """The tenant's latest erasures, newest first: each with its checks, oldest first (the one
    after the erase, then any background re-check), its queued re-check and what that is
    still to confirm (``pending``), if queued.
    ``unverified_only``: those whose latest check is not verified."""
    tenant = session.tenant
    cur = await conn.execute(
        "SELECT l.erase_id::text AS erase_id, l.agent, l.subject, l.mode, l.started_at, "
        "coalesce((SELECT jsonb_agg(jsonb_build_object('checked_at', c.checked_at, 'verified', c.verified, "
        "'vectors', c.vectors, 'unchecked', c.unchecked, 'recheck', c.recheck) ORDER BY c.checked_at) "
        "FROM erasure_checks c WHERE c.tenant_id = l.tenant_id AND c.erase_id = l.erase_id), '[]') AS checks, "
        "(SELECT jsonb_build_object('attempts', r.attempts, 'next_attempt_at', r.next_attempt_at, "
        "'last_error', r.last_error) FROM erasure_rechecks r WHERE r.tenant_id = l.tenant_id "
        "AND r.erase_id = l.erase_id) AS recheck "
        "FROM erasure_log l WHERE l.tenant_id = %s AND (NOT %s OR NOT coalesce((SELECT c.verified "
        "FROM erasure_checks c WHERE c.tenant_id = l.tenant_id AND c.erase_id = l.erase_id "
        "ORDER BY c.checked_at DESC LIMIT 1), false)) ORDER BY l.started_at DESC LIMIT %s",
        (tenant, unverified_only, limit))
    rows = [{**row, "verified": bool(row["checks"]) and bool(row["checks"][-1]["verified"])}
            for row in await cur.fetchall()]
    return [{**row, "pending": list(pending(row["verified"], row["recheck"] is not None))} for row in rows]


@dataclass(frozen=True)
class Purged:
    """A queued PURGE to re-check: its subject, erased ids and the ids its receipt counts;
    ``busy`` while the outbox still holds deletions of them (its worker's delete after the
    round's compaction would leave them in the files: not yet)."""

    subject: str
    ids: list[str]
    counted: frozenset[str]
    busy: bool


NEXT_ROUND = ("date_bin(make_interval(secs => %s), now(), timestamptz '2000-01-01 00:00Z') "
              "+ make_interval(secs => %s)")


def unchecked(mode: EraseMode, vectors: VectorErasure) -> tuple[str, ...]:
    """What the receipt of an erase in ``mode`` cannot vouch for physically (a FORGET keeps
    the rows on purpose, so it claims nothing physical)."""
    if mode is not EraseMode.PURGE:
        return ()
    return tuple(sorted({POSTGRES_HISTORY, BACKUPS, *vectors.unchecked}))


def shown(receipt: ErasureReceipt, counted: Collection[str], whole_subject: bool) -> ErasureReceipt:
    """The receipt as its caller may read it. A PURGE that reached only memories the caller
    cannot list (lapsed, or forgotten behind a view that hides status) says of the vector
    index what a PURGE of nothing says: what it left unchecked or pending there would tell
    that they existed. The erasure log keeps what happened."""
    if counted or whole_subject or receipt.mode is not EraseMode.PURGE:
        return receipt
    return replace(receipt, unchecked=unchecked(receipt.mode, VectorErasure()), pending=())


# A subject's id named in a memory: not inside a longer id (subject ids are letters, digits
# and ._:@-), though a sentence may end right after it and a prefix may name its kind
# ("entity:alice-7", as entity tags do).
_AROUND = (r"(?<![\w.-])", r"(?![\w@-])(?![.:][\w])")


def naming(subject: str) -> re.Pattern[str]:
    """What finds ``subject`` named in a memory's key, text, data or tags (case aside)."""
    return re.compile(_AROUND[0] + re.escape(subject) + _AROUND[1], re.IGNORECASE)


def names_subject(pattern: re.Pattern[str], row: dict[str, Any]) -> bool:
    """Whether an opened memory row's key, text, data or tags hold ``pattern`` (``naming``)."""
    values = [row["key"] or "", row["text"] or "", json.dumps(row["data"], ensure_ascii=False) if row["data"] else "",
              *(row["tags"] or ())]
    return any(pattern.search(value) for value in values)


async def organisation_mentions(session: Bound, conn: Any, flt: ReadFilter, subject: str,
                                now: datetime) -> int:
    """How many of the organisation's live memories that ``flt`` reads name ``subject``: what an
    erase of the subject leaves behind about it. Their content is opened to look (the
    organisation's data key), in the erase's transaction."""
    keys = session.keys
    where, params = read_conditions(session, replace(flt, include_org=True), live_at=now)
    cur = await conn.execute(
        sql.SQL("SELECT id, subject, key, text, data, tags, key_ct, text_ct, data_ct, tags_ct FROM memories "
                "WHERE {where} AND subject = '' AND scope = 'org'").format(where=where), params)
    rows = await keys.open_rows(conn, await cur.fetchall())
    pattern = naming(subject)
    return sum(1 for row in rows if not row["content_unavailable"] and names_subject(pattern, row))


async def drop_write_records(session: Bound, conn: Any, ids: list[str]) -> int:
    """Delete the idempotency records whose stored response names any of ``ids`` (memories
    or extraction jobs), in the caller's transaction; return how many went."""
    tenant = session.tenant
    if not ids:
        return 0
    cur = await conn.execute("DELETE FROM idempotency_keys WHERE tenant_id = %s AND names && %s::uuid[]",
                             (tenant, ids))
    return int(cur.rowcount)


async def drop_job_records(session: Bound, conn: Any, subject: str) -> int:
    """Delete the idempotency records of ``subject``'s extraction jobs (before the jobs go)."""
    tenant = session.tenant
    cur = await conn.execute(
        "DELETE FROM idempotency_keys WHERE tenant_id = %s AND names && ARRAY("
        "SELECT id FROM extraction_jobs WHERE tenant_id = %s AND subject = %s)",
        (tenant, tenant, subject),
    )
    return int(cur.rowcount)


# What a dropped job's error says (``GetExtractionJob``).
ERASED = "dropped: the subject was erased"


async def drop_subject_jobs(session: Bound, conn: Any, subject: str, mode: EraseMode) -> list[str]:
    """Erase of a whole subject: its queued and running jobs are dropped (their turns with
    them); a PURGE deletes every job of the subject. Returns the agents of the pending jobs
    that went, one entry a job (an agent is told only of its own)."""
    tenant = session.tenant
    if mode is EraseMode.PURGE:
        cur = await conn.execute("DELETE FROM extraction_jobs WHERE tenant_id = %s AND subject = %s "
                                 "RETURNING state, agent", (tenant, subject))
        return [row["agent"] for row in await cur.fetchall() if row["state"] in ("queued", "running")]
    cur = await conn.execute(
        "UPDATE extraction_jobs SET state = 'failed', error = %s, turns_ct = NULL, finished_at = now() "
        "WHERE tenant_id = %s AND subject = %s AND state IN ('queued', 'running') RETURNING agent",
        (ERASED, tenant, subject),
    )
    return [row["agent"] for row in await cur.fetchall()]


class IndexVectors:
    """The ``VectorEraser`` of a process's index set: ``erase_vectors`` over every collection."""

    def __init__(self, indexes: Indexes) -> None:
        self._indexes = indexes

    async def erase(self, scope: Tenanted, subject: str, ids: list[str], *, mode: EraseMode, whole_subject: bool,
                    counted: frozenset[str], defer: Callable[[str, list[str]], Awaitable[None]]) -> VectorErasure:
        # Deleted, compacted out of the index's files and checked; left to the outbox (and the
        # receipt not verified) while the index is down.
        return await erase_vectors(self._indexes, scope, subject, ids, mode=mode, whole_subject=whole_subject,
                                   defer=defer, counted=counted)


async def erase_vectors(indexes: Indexes | None, scope: Tenanted, subject: str, ids: list[str], *, mode: EraseMode,
                        whole_subject: bool, defer: Callable[[str, list[str]], Awaitable[None]],
                        counted: frozenset[str] | None = None,
                        compacted: Mapping[str, bool | None] | None = None) -> VectorErasure:
    """Delete the vectors of ``ids`` (and of the whole subject) from every collection and read
    the index back; ``defer(subject, ids)`` hands the deletions to the outbox when the index
    is down. A FORGET leaves the index to the outbox. ``counted``: the ids whose deleted
    vectors the receipt counts (default: all).

    The files: an Erase (``compacted`` None) compacts a Milvus Lite of this process at once and
    leaves a server's compaction to the next background round (``later``). The round passes
    what its compaction of each collection, done before this call, came to: a vector this
    call still had to delete was not in it, so that collection's files wait another round."""
    if mode is not EraseMode.PURGE or indexes is None or not (ids or whole_subject):
        return VectorErasure()  # nothing selected: nothing to compact either
    deleted = left = counted_deleted = 0
    missed: set[str] = set()
    later = False
    first = [i for i in ids if counted is None or i in counted]
    rest = [i for i in ids if counted is not None and i not in counted]
    try:
        for target in indexes.targets():  # every model's collection, not just the active one
            index = target.index
            own = index.partition(scope.tenant)
            gone = await own.delete(first) if first else 0
            counted_deleted += gone
            gone += await own.delete(rest) if rest else 0
            if whole_subject:
                gone += await own.delete_subject(subject)
            deleted += gone
            if compacted is not None:
                files = compacted.get(index.collection, False) if not gone else False
            elif index.local:
                try:
                    files = await index.compact()
                except Internal:
                    files = False  # logged by the index; the rows are deleted, the files unknown
            else:
                files = False  # the next round's
            left += await own.count(ids=ids, subject=subject if whole_subject else None)
            if not files:
                missed.add(VECTOR_FILES)
                later = later or files is False  # None: never confirmable here (a milvus-lite server)
                continue
            on_disk = await index.residue(ids)
            if on_disk is None:
                missed.add(VECTOR_SERVER_LOGS)
            elif on_disk:
                _log.error("%d purged vectors are still in the index files after compaction", len(on_disk))
                left += len(on_disk)
    except Unavailable:
        # The index is down: the outbox deletes the vectors when it is back, and the receipt
        # says the erase is not verified yet. Recall never serves them meanwhile.
        await defer(subject, ids)
        return VectorErasure(0, False, (VECTOR_FILES,))
    return VectorErasure(deleted, left == 0, tuple(sorted(missed)), counted_deleted, later)

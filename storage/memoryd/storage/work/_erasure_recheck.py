"""The background check of PURGEs: what the Erase could not confirm, confirmed later.

A PURGE commits its rows' removal with a place in ``erasure_rechecks`` (``_erasure``). Its
check after the commit then takes it off the queue, or leaves it there for one of two reasons:
the vector index was down (or still held a vector: the receipt is not verified), or the index
is a Milvus server, whose compaction the Erase does not wait for (verified by reading the
index, the files pending). Every outbox worker (the server's in-process one, ``memoryd
worker``) also runs this loop, in rounds: it claims the due erases through the worker role
(ids only, SKIP LOCKED), leaves those whose vector deletions the outbox still holds for a
little later, compacts each collection ONCE for all the others (a Milvus server's flush
seals a segment in every partition written since the last one, so a flush per purge
multiplied the segments a restarted server must load; an erase's compaction wait of ~10 s
broke clients' deadlines), then, through each tenant's own session, deletes whatever vector
of the purged ids is still there, reads the index back and adds the result to the erasure
log (``erasure_checks``, ``recheck``), where ``memoryd audit erasures`` and a retried Erase
read it. Purges waiting only for the files are due together at the start of a round
(``Stores.erasure_round`` seconds apart), so one round serves them all.

An erase is off the queue once nothing is left to confirm. The index still down, or a vector
read back, makes it due again after a doubling wait (``attempts``), so a long outage costs one
try per erase now and then; deletions still queued, after the first wait; files whose
compaction was not confirmed (or whose vectors this round had to delete after compacting),
the next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from memoryd.domain import EraseMode, Internal, MemorydError, Unavailable

from ..memories import NEXT_ROUND, Purged, erase_vectors
from .._loops import backoff, idle

if TYPE_CHECKING:
    from ..memories import IndexTarget, Stores
    from ..postgres import Postgres

_log = logging.getLogger("memoryd.storage.erasure")

# A claimed erase is due for other workers again after this (its worker died): longer than a
# round can take (a server's compaction is waited for up to _milvus.COMPACTION_TIMEOUT).
LEASE_SECONDS = 600.0


class _Targets:
    def __init__(self, targets: Callable[[], Sequence[IndexTarget]]) -> None:
        self.targets = targets


async def _still_down(subject: str, ids: list[str]) -> None:
    raise Unavailable("the vector index is still unreachable")  # the deletions stay queued


class ErasureRechecks:
    """Re-checks queued erases until their vectors are confirmed gone, files included."""

    def __init__(self, queue: Postgres, store: Stores,
                 targets: Callable[[], Awaitable[Sequence[IndexTarget]]], *,
                 batch_size: int = 256, base_backoff: float = 5.0, max_backoff: float = 300.0,
                 idle_seconds: float = 10.0) -> None:
        self._queue = queue
        self._store = store
        self._targets = targets
        self._batch = batch_size
        self._base = base_backoff
        self._cap = max_backoff
        self._idle = idle_seconds
        self.wakeup = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                done = await self.recheck_once()
            except MemorydError as exc:
                _log.warning("erasure re-check: %s; again in %.0fs", exc.message, self._idle)
                done = 0
            if done:
                continue
            self.wakeup.clear()
            await idle(stop, self.wakeup, self._idle)

    async def recheck_once(self) -> int:
        """One round: claim the due erases, compact once, check each; return how many are
        confirmed (off the queue)."""
        # Every collection to check (``IndexSet.writable``): none while a registered model
        # cannot be written here — an empty or partial check would prove nothing.
        targets = await self._targets()
        if not targets:
            return 0
        async with self._queue.worker_tx() as conn:
            cur = await conn.execute(
                "UPDATE erasure_rechecks SET next_attempt_at = now() + make_interval(secs => %s) "
                "WHERE (tenant_id, erase_id) IN (SELECT tenant_id, erase_id FROM erasure_rechecks "
                "WHERE next_attempt_at <= now() ORDER BY next_attempt_at LIMIT %s FOR UPDATE SKIP LOCKED) "
                "RETURNING tenant_id, erase_id::text AS erase_id, attempts",
                (LEASE_SECONDS, self._batch))
            claimed = await cur.fetchall()
        ready: list[tuple[dict[str, Any], Purged]] = []
        for row in claimed:
            purged = await self._store.session(row["tenant_id"], "").queued_purge(row["erase_id"])
            if purged is None:
                continue
            if purged.busy:  # the outbox is at work, not stuck: look again soon, no longer wait
                await self._later([row], "vector deletions still queued", tried=False)
            else:
                ready.append((row, purged))
        if not ready:
            return 0
        try:
            compacted = {t.index.collection: await self._compact(t) for t in targets}
        except Unavailable as exc:
            await self._later([row for row, _ in ready], f"index unreachable: {exc.message}")
            return 0
        confirmed = 0
        for i, (row, purged) in enumerate(ready):
            tenant, erase_id = row["tenant_id"], row["erase_id"]
            try:
                # The purged ids only, not the whole subject: what it wrote since was not erased.
                session = self._store.session(tenant, "")
                vectors = await erase_vectors(_Targets(lambda: targets), session, purged.subject, purged.ids,
                                              mode=EraseMode.PURGE, whole_subject=False, defer=_still_down,
                                              counted=purged.counted, compacted=compacted)
                verified = await session.record_recheck(erase_id, purged.ids, vectors)
            except Unavailable as exc:
                # The index is down again: every erase left waits longer, untried.
                await self._later([r for r, _ in ready[i:]], f"index unreachable: {exc.message}")
                return confirmed
            except MemorydError as exc:
                await self._later([row], exc.message)
                continue
            if not verified:
                await self._later([row], "not verified: a purged memory is still found in the index")
            elif vectors.later:
                await self._later([row], "the index files' compaction is not confirmed yet", next_round=True)
            else:
                confirmed += 1
                _log.info("erasure %s of tenant %s confirmed by a later check", erase_id, tenant)
        return confirmed

    @staticmethod
    async def _compact(target: IndexTarget) -> bool | None:
        try:
            return await target.index.compact()
        except Internal:
            return False  # logged by the index; the erases' files wait for the next round

    async def _later(self, rows: list[dict[str, Any]], reason: str, *, tried: bool = True,
                     next_round: bool = False) -> None:
        """Due again after a doubling wait, or (not ``tried``) after the first one, or at the
        start of the next round."""
        async with self._queue.worker_tx() as conn:
            for row in rows:
                attempts = row["attempts"] + (1 if tried else 0)
                delay = backoff(attempts, self._base, self._cap) if tried else self._base
                due, params = "now() + make_interval(secs => %s)", [delay]
                if next_round:
                    due, params = NEXT_ROUND, [self._store.erasure_round] * 2
                await conn.execute(
                    f"UPDATE erasure_rechecks SET attempts = %s, last_error = %s, next_attempt_at = {due} "
                    "WHERE tenant_id = %s AND erase_id = %s",
                    (attempts, reason[:500], *params, row["tenant_id"], row["erase_id"]))

"""The background re-check of receipts the vector index could not confirm.

A PURGE answered while the index was down (or whose read-back still found a vector) commits
its rows' removal and answers "not verified"; its erase is queued in ``erasure_rechecks``
(``_erasure.recheck_later``). Every outbox worker (the server's in-process one, ``memoryd
worker``) also runs this loop: it claims due erases through the worker role (ids only, SKIP
LOCKED), and for each one, through the tenant's own session, waits until the outbox has done
the queued deletions, then deletes whatever vector of the purged ids is still there, compacts
and reads the index back (``_erasure.erase_vectors``), and adds the result to the erasure log
(``erasure_checks``, ``recheck``), where ``memoryd audit erasures`` and a retried Erase (the
receipt look-up) read it. A verified check takes the erase off the queue; the index still
down or a vector read back makes it due again after a doubling wait (``attempts``), so a long
outage costs one try per erase now and then; deletions still queued, after the first wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memoryd.domain import EraseMode, MemorydError, Unavailable

from ._erasure import VectorErasure, erase_vectors
from ._loops import backoff, idle

if TYPE_CHECKING:
    from ._memories import PostgresMemoryStore
    from ._outbox import IndexTarget
    from ._postgres import Postgres

_log = logging.getLogger("memoryd.storage.erasure")

# A claimed erase is due for other workers again after this (its worker died). A check may
# wait ~12 s for a Milvus server's compaction, so a claim is a few erases, well within it.
LEASE_SECONDS = 120.0


class _Targets:
    def __init__(self, targets: Callable[[], list[IndexTarget]]) -> None:
        self.targets = targets


class ErasureRechecks:
    """Re-checks queued erases until their vectors are confirmed gone."""

    def __init__(self, queue: Postgres, store: PostgresMemoryStore,
                 targets: Callable[[], Awaitable[list[IndexTarget]]], *,
                 batch_size: int = 4, base_backoff: float = 5.0, max_backoff: float = 300.0,
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
        """Claim the due erases and check each one; return how many were verified."""
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
        verified = 0
        for i, row in enumerate(claimed):
            try:
                outcome = await self._store.recheck_erasure(row["tenant_id"], row["erase_id"],
                                                             self._clearing(row["tenant_id"], targets))
            except Unavailable as exc:
                # The index is still down: every erase claimed waits longer, untried.
                await self._later(claimed[i:], f"index unreachable: {exc.message}")
                return verified
            except MemorydError as exc:
                await self._later([row], exc.message)
                continue
            if outcome:
                verified += 1
                _log.info("erasure %s of tenant %s verified by a later check", row["erase_id"], row["tenant_id"])
            elif outcome is None:  # the outbox is at work, not stuck: look again soon, no longer wait
                await self._later([row], "vector deletions still queued", tried=False)
            else:
                await self._later([row], "not verified: a purged memory is still found in the index")
        return verified

    def _clearing(self, tenant: str,
                  targets: list[IndexTarget]) -> Callable[[str, list[str], frozenset[str]], Awaitable[VectorErasure]]:
        async def still_down(subject: str, ids: list[str]) -> None:
            raise Unavailable("the vector index is still unreachable")  # the deletions stay queued

        async def clear(subject: str, ids: list[str], counted: frozenset[str]) -> VectorErasure:
            # The purged ids only, not the whole subject: what it wrote since was not erased.
            return await erase_vectors(_Targets(lambda: targets), tenant, subject, ids, mode=EraseMode.PURGE,
                                       whole_subject=False, defer=still_down, counted=counted)
        return clear

    async def _later(self, rows: list[dict[str, Any]], reason: str, *, tried: bool = True) -> None:
        """Due again after a doubling wait, or (not ``tried``) after the first one."""
        async with self._queue.worker_tx() as conn:
            for row in rows:
                attempts = row["attempts"] + (1 if tried else 0)
                delay = backoff(attempts, self._base, self._cap) if tried else self._base
                await conn.execute(
                    "UPDATE erasure_rechecks SET attempts = %s, last_error = %s, "
                    "next_attempt_at = now() + make_interval(secs => %s) WHERE tenant_id = %s AND erase_id = %s",
                    (attempts, reason[:500], delay, row["tenant_id"], row["erase_id"]))

"""Reads recorded off the request path: recall counts per memory and read audit events."""

from __future__ import annotations

import asyncio
import logging
from memoryd.domain import AuditTag, MemorydError
from memoryd.storage import Stores, StoreSession, periodic

_log = logging.getLogger("memoryd.server.recall")

MAX_PENDING_EVENTS = 100_000  # read audit events kept per tenant while Postgres is unreachable


class AccessRecorder:
    """Records reads off the request path: recall counts per memory, and one audit event per
    read (which memories were returned, to whom), written in batches.

    ``flush`` runs every ``interval`` seconds and once more on shutdown, so a graceful stop
    loses nothing.
    """

    def __init__(self, store: Stores, interval: float = 1.0) -> None:
        self._store = store
        self._interval = interval
        self._counts: dict[str, dict[str, int]] = {}
        self._events: dict[str, list[tuple[str, str, str, list[str], AuditTag]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def record(self, session: StoreSession, subject: str, action: str, ids: list[str], tag: AuditTag, *,
               count_access: bool = False) -> None:
        """A read by ``session``'s agent, recorded in its tenant with the next flush."""
        tenant, agent = session.tenant, session.agent
        if count_access:
            counts = self._counts.setdefault(tenant, {})
            for memory_id in ids:
                counts[memory_id] = counts.get(memory_id, 0) + 1
        self._events.setdefault(tenant, []).append((agent, subject, action, ids, tag))

    def start(self) -> None:
        self._task = asyncio.create_task(periodic(self._stopping, self._interval, self.flush, what="recording reads"))

    async def flush(self) -> None:
        counts, self._counts = self._counts, {}
        events, self._events = self._events, {}
        for tenant in set(counts) | set(events):
            try:
                await self._store.session(tenant).record_reads(counts.get(tenant, {}), events.get(tenant, []))
            except MemorydError as exc:
                # Put them back: the next flush tries again, so reads are not lost to a short
                # outage. A long one is bounded: past MAX_PENDING_EVENTS the oldest are dropped,
                # loudly, rather than growing without end.
                for memory_id, n in counts.get(tenant, {}).items():
                    pending = self._counts.setdefault(tenant, {})
                    pending[memory_id] = pending.get(memory_id, 0) + n
                queue = self._events.setdefault(tenant, [])
                queue[:0] = events.get(tenant, [])
                if len(queue) > MAX_PENDING_EVENTS:
                    dropped = len(queue) - MAX_PENDING_EVENTS
                    del queue[:dropped]
                    _log.error("dropped %d read audit event(s) of a tenant: Postgres has been unreachable too long",
                               dropped)
                _log.warning("could not record reads for a tenant yet: %s", exc.message)

    async def stop(self) -> None:
        if self._task is not None:
            self._stopping.set()
            await self._task  # returns between flushes, never in the middle of one
        await self.flush()

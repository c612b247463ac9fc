"""The change log's wake-ups: one LISTEN connection per process on ``memoryd_changes``.

Each committed change notifies the channel with its tenant (migration 0029). ``ChangeListener``
holds one connection of the app role that listens, and calls ``on_change(tenant)`` for each
notification. A notification is only a hint: when the connection cannot be made or drops, it
calls ``on_lost()`` (every reader re-reads the log) and reconnects with backoff, and readers
poll the log anyway, so delivery never depends on NOTIFY alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

from .._loops import backoff, stopped_within
from ..postgres import APP_ROLE, PostgresSettings, role_connection

CHANNEL = "memoryd_changes"
# How often the listening loop looks at the stop event while no notification comes.
_STOP_CHECK_SECONDS = 0.5
_log = logging.getLogger("memoryd.storage.postgres")


class ChangeListener:
    """Listens for committed changes until stopped (``run``)."""

    def __init__(self, settings: PostgresSettings, on_change: Callable[[str], None],
                 on_lost: Callable[[], None]) -> None:
        self._settings = settings
        self._on_change = on_change
        self._on_lost = on_lost
        self.listening = False  # whether the connection listens now (tests, health)

    async def run(self, stop: asyncio.Event) -> None:
        failures = 0
        while not stop.is_set():
            try:
                await self._listen(stop)
                return
            except (psycopg.Error, OSError) as exc:
                self.listening = False
                failures += 1
                self._on_lost()  # what was notified meanwhile is read by the readers' next look
                delay = backoff(failures, 0.2, 10.0)
                _log.warning("listening for changes failed (%s); again in %.1fs", type(exc).__name__, delay)
                if await stopped_within(stop, delay):
                    return

    async def _listen(self, stop: asyncio.Event) -> None:
        async with role_connection(self._settings, APP_ROLE) as conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            self.listening = True
            self._on_lost()  # changes committed before this LISTEN were not notified here
            try:
                while not stop.is_set():
                    async for notice in conn.notifies(timeout=_STOP_CHECK_SECONDS):
                        self._on_change(notice.payload)
            finally:
                self.listening = False

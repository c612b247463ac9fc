"""This process's open Watch streams (``WatchHub``): the per-tenant cap, the wake-ups, the poll,
and the reads that streams woken together share.

Streams are woken together — by a notification for their tenant, or by the poll every
``poll_seconds`` (one clock for every stream, not one each) — and then mostly ask the same:
the log after the same position, the same versions through the same view. ``shared`` makes
that one read: 100 streams of a tenant cost about one query per wake-up, not 100
(bench/probes/watch_probe.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterator
from typing import Any, TypeVar

from memoryd.domain import ResourceExhausted, Unavailable

from .._config import Watch

T = TypeVar("T")


class WatchHub:
    """This process's open streams: how many each tenant has (the cap) and how to wake them."""

    def __init__(self, settings: Watch) -> None:
        self.settings = settings
        self._streams: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._reads: dict[Hashable, asyncio.Future[Any]] = {}
        # Counts wake-ups: streams share a read only with streams woken by the same one, never
        # a read that began before their wake-up (it may not see the change that woke them).
        self.wakes = 0
        self.closing = False

    async def run(self, stop: asyncio.Event) -> None:
        """The poll: every stream looks at the log every ``poll_seconds`` even when no
        notification came, all at once (so their reads are shared)."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.settings.poll_seconds)
            self.wake_all()

    async def shared(self, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        """``read()``, or the same read another stream started and that has not finished:
        its answer (or its error) for both."""
        running = self._reads.get(key)
        if running is None:
            running = asyncio.ensure_future(read())
            self._reads[key] = running
            running.add_done_callback(lambda done: self._ended(key, done))
        answer: T = await asyncio.shield(running)
        return answer

    def _ended(self, key: Hashable, done: asyncio.Future[Any]) -> None:
        self._reads.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: every stream that asked may have gone meanwhile

    @contextlib.contextmanager
    def stream(self, tenant: str) -> Iterator[asyncio.Event]:
        """One stream of ``tenant`` while the block runs: its wake-up event. RESOURCE_EXHAUSTED
        TOO_MANY_STREAMS when the tenant has as many open as allowed."""
        if self.closing:
            raise Unavailable("the server is shutting down: Watch again, with the last cursor, on another server")
        open_ = self._streams[tenant]
        if len(open_) >= self.settings.max_streams_per_tenant:
            raise ResourceExhausted(f"this tenant already has {len(open_)} open Watch streams on this server, as "
                                    "many as it allows: retry once one has closed", reason="TOO_MANY_STREAMS")
        wakeup = asyncio.Event()
        open_.add(wakeup)
        try:
            yield wakeup
        finally:
            open_.discard(wakeup)
            if not open_:
                del self._streams[tenant]

    def wake(self, tenant: str) -> None:
        """A change of ``tenant`` was committed (a notification)."""
        self.wakes += 1
        for wakeup in self._streams.get(tenant, ()):
            wakeup.set()

    def wake_all(self) -> None:
        """Notifications may have been missed (the listening connection dropped): every stream
        looks at the log."""
        self.wakes += 1
        for streams in self._streams.values():
            for wakeup in streams:
                wakeup.set()

    def close(self) -> None:
        """The server is stopping: every stream ends (UNAVAILABLE; its client resumes elsewhere)."""
        self.closing = True
        self.wake_all()

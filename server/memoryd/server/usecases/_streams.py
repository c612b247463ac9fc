"""This process's open Watch streams (``WatchHub``): the per-tenant cap and the wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator

from memoryd.domain import ResourceExhausted, Unavailable

from .._config import Watch


class WatchHub:
    """This process's open streams: how many each tenant has (the cap) and how to wake them."""

    def __init__(self, settings: Watch) -> None:
        self.settings = settings
        self._streams: dict[str, set[asyncio.Event]] = defaultdict(set)
        self.closing = False

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

    def open_streams(self, tenant: str) -> int:
        return len(self._streams.get(tenant, ()))

    def wake(self, tenant: str) -> None:
        """A change of ``tenant`` was committed (a notification)."""
        for wakeup in self._streams.get(tenant, ()):
            wakeup.set()

    def wake_all(self) -> None:
        """Notifications may have been missed (the listening connection dropped): every stream
        looks at the log."""
        for streams in self._streams.values():
            for wakeup in streams:
                wakeup.set()

    def close(self) -> None:
        """The server is stopping: every stream ends (UNAVAILABLE; its client resumes elsewhere)."""
        self.closing = True
        self.wake_all()

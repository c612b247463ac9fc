"""The runtime of memoryd's background tasks: how each one waits, stops and backs off.

Every task of a process runs until the process's ``stop`` event is set, and none may let an
outage end it. Two shapes cover them all:

- **periodic** work (metrics, lifecycle sweeps, the embedding models' refresh, health
  checks, read recording, the lease of an outbox batch at work): ``periodic`` runs it every
  ``seconds``, counted from the start of one run to the next, logs a failed run and waits for
  the next one, and returns as soon as ``stop`` is set — never in the middle of a run;
- **queue drainers** (the outbox and extraction workers): they loop on their own claims,
  wait with ``idle`` for new work (``wakeup``) or ``stop`` when a claim finds nothing, and
  space retries with ``backoff``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from memoryd.domain import MemorydError

_log = logging.getLogger("memoryd.storage.loops")


def backoff(attempts: int, base: float, cap: float) -> float:
    """Seconds before try ``attempts + 1`` after ``attempts`` failed ones: doubling, capped."""
    return min(base * 2.0 ** (attempts - 1), cap)


async def idle(stop: asyncio.Event, wakeup: asyncio.Event, seconds: float) -> None:
    """Wait up to ``seconds`` for ``stop`` or ``wakeup`` (new work), whichever comes first."""
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wakeup.wait())]
    await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()


async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``stop``; whether it was set."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))
    except TimeoutError:
        return stop.is_set()
    return True


async def periodic(stop: asyncio.Event, seconds: float, work: Callable[[], Awaitable[None]], *, what: str,
                   at_once: bool = False, survives: tuple[type[BaseException], ...] = (MemorydError,)) -> None:
    """Run ``work`` every ``seconds`` until ``stop`` (first at once, or after one wait). A run
    that raises one of ``survives`` is logged as a warning naming ``what`` and the loop goes
    on; anything else ends the task, as a bug should."""
    if not at_once and await stopped_within(stop, seconds):
        return
    while not stop.is_set():
        started = time.monotonic()
        try:
            await work()
        except survives as exc:
            message = exc.message if isinstance(exc, MemorydError) else str(exc) or type(exc).__name__
            _log.warning("%s: %s; again in %.0fs", what, message, seconds)
        if await stopped_within(stop, seconds - (time.monotonic() - started)):
            return

"""What a job's worker does when the model is out: wait for it, never lose the turns.

A model server that is down, restarting, overloaded or slower than the timeout is an outage
(``ExtractionUnavailable.outage``): the job goes back to the queue, state WAITING, its turns
still sealed in its row, and is tried again after ``outage_delay``. Its waits do not use up
``extraction_max_attempts`` (that is for failures that may be the job's own: a store error,
an HTTP 500); they end when the model answers, or — the job fails, its turns deleted — once
``extraction_retry_horizon_seconds`` have passed since the job's **first** outage (not since
it was queued: a job queued behind a long backlog has as long to wait for the model as any).
Meanwhile the endpoint's breaker (``memoryd.storage.ModelBreaker``) keeps every replica from
sending a dead model more than a trickle of requests.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Asked:
    """How a job met its model, for the slot and the breaker: ``outage`` True (out), False (it
    answered, whatever it said) or None (not asked); ``pending``: the request the job stopped
    waiting for, still open at the model; ``rest``: seconds the slot rests after it."""

    outage: bool | None = None
    pending: asyncio.Future[Any] | None = None
    rest: float = 0.0


def outage_delay(outages: int, base: float, cap: float, *, retry_after: float | None = None,
                 remaining: float = float("inf"), at_least: float = 0.0,
                 rand: Callable[[], float] = random.random) -> float:
    """Seconds a job waits after its ``outages + 1``-th outage: doubling from ``base``, at
    most ``cap``, jittered down by up to half (the jobs a dead model sent back together do
    not all come back together), at least what the server asked for (``Retry-After``) and
    ``at_least``; never past the horizon (``remaining``), so the last try is at its end."""
    delay = min(base * 2.0 ** min(outages, 60), cap) * (0.5 + rand() / 2)
    delay = max(delay, retry_after or 0.0, at_least)
    return max(0.0, min(delay, remaining))


def gave_up(message: str, horizon: float) -> str:
    """A job's error once its model has been out past the horizon."""
    return f"{message} (gave up after waiting {horizon:g}s for it)"

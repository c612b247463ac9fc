"""A circuit breaker per model endpoint, shared by every replica through Postgres.

A dead model answers every request with an outage (connection refused, 429, 503; a timeout
is left out by the worker: it tells of one request). Each outage answer counts (``failed``); after ``threshold`` in a row the breaker **opens**:
no job is claimed for the endpoint for a cool-down (``base`` seconds, doubling each time it
opens again, at most ``cap``), so the queued jobs stay queued — untried, their turns sealed —
instead of each being sent to the dead model. When the cool-down is over the breaker is
**half-open**: one claim goes through (``admit`` moves ``open_until`` a lease ahead, so the
others wait for its answer); any answer of the model's (``answered``) closes it, another
outage opens it again, for longer. Only that failed trial and the first opening set the
cool-down: with several requests out at once, the outage answers that arrive after the
breaker opened are late news of the same outage, and do not lengthen it.

The row is locked (``FOR UPDATE``) by the claim transaction, which ``ExtractionJobs.claim``
keeps short, so two replicas never both let a half-open trial through. A worker that dies
with the trial out leaves the breaker half-open again when its lease runs out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..postgres import Connection


@dataclass(frozen=True)
class BreakerState:
    open: bool  # no claim now
    tripped: bool  # past the threshold: a claim now is the half-open trial


@dataclass(frozen=True)
class BreakerPosition:
    """What the breaker says to an onlooker: ``closed`` (jobs are sent), ``half_open`` (the
    next claim is its trial) or ``open`` until ``open_until`` (a trial may be out meanwhile)."""

    state: Literal["closed", "half_open", "open"] = "closed"
    open_until: datetime | None = None


@dataclass(frozen=True)
class ModelBreaker:
    """The breaker of ``endpoint`` (``ModelSlots.endpoint``, a hash of the URL)."""

    endpoint: str
    threshold: int = 3
    base: float = 5.0
    cap: float = 300.0

    def __post_init__(self) -> None:
        if self.threshold < 1 or self.base <= 0 or self.cap < self.base:
            raise ValueError("a breaker needs a threshold of at least 1 and 0 < base <= cap")

    async def state(self, conn: Connection) -> BreakerState:
        """The breaker now, its row locked until ``conn``'s transaction ends."""
        cur = await conn.execute(
            "SELECT failures >= %s AS tripped, open_until > now() AS open FROM extraction_breakers "
            "WHERE endpoint = %s FOR UPDATE", (self.threshold, self.endpoint))
        row = await cur.fetchone()
        return BreakerState(False, False) if row is None else BreakerState(row["open"], row["tripped"])

    async def admit(self, conn: Connection, lease_seconds: float) -> None:
        """The half-open trial is out: no other claim until it answers or its lease runs out."""
        await conn.execute("UPDATE extraction_breakers SET open_until = now() + make_interval(secs => %s) "
                           "WHERE endpoint = %s", (lease_seconds, self.endpoint))

    async def failed(self, conn: Connection, *, trial: bool = False) -> bool:
        """One more outage answer (``trial``: the half-open trial's); whether it opened the
        breaker — from closed, or again after a failed trial, for twice as long as before."""
        await conn.execute("INSERT INTO extraction_breakers (endpoint) VALUES (%s) ON CONFLICT DO NOTHING",
                           (self.endpoint,))
        cur = await conn.execute("SELECT failures FROM extraction_breakers WHERE endpoint = %s FOR UPDATE",
                                 (self.endpoint,))
        row = await cur.fetchone()
        failures = int(row["failures"]) if row is not None else 0
        tripped = failures >= self.threshold
        opens = (trial and tripped) or failures + 1 == self.threshold
        await conn.execute(
            "UPDATE extraction_breakers SET failures = failures + 1, "
            "open_until = CASE WHEN %(opens)s "
            "  THEN now() + make_interval(secs => least(%(base)s * 2 ^ least(openings, 30), %(cap)s)) "
            "  ELSE open_until END, "
            "openings = CASE WHEN %(opens)s THEN openings + 1 ELSE openings END "
            "WHERE endpoint = %(endpoint)s",
            {"opens": opens, "base": self.base, "cap": self.cap, "endpoint": self.endpoint})
        return opens

    async def answered(self, conn: Connection) -> None:
        """The model answered (whatever it said): the breaker closes."""
        await conn.execute(
            "UPDATE extraction_breakers SET failures = 0, openings = 0, open_until = '-infinity' "
            "WHERE endpoint = %s AND (failures > 0 OR open_until > '-infinity')", (self.endpoint,))

    async def untried(self, conn: Connection) -> None:
        """The half-open trial ended without asking the model (its job was erased, a store
        failed): the next claim may try instead."""
        await conn.execute("UPDATE extraction_breakers SET open_until = now() WHERE endpoint = %s AND failures >= %s "
                           "AND open_until > now()", (self.endpoint, self.threshold))

    async def position(self, conn: Connection) -> BreakerPosition:
        """Where the breaker is now (for metrics and job states; nothing locked)."""
        cur = await conn.execute(
            "SELECT CASE WHEN open_until > now() THEN 'open' WHEN failures >= %s THEN 'half_open' "
            "ELSE 'closed' END AS state, "
            "CASE WHEN open_until > now() THEN open_until END AS open_until "
            "FROM extraction_breakers WHERE endpoint = %s", (self.threshold, self.endpoint))
        row = await cur.fetchone()
        return BreakerPosition() if row is None else BreakerPosition(row["state"], row["open_until"])

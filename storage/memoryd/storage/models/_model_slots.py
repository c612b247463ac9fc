"""Slots of a model endpoint: how many requests the whole deployment has in flight at it.

The extraction worker of every replica takes a slot before it claims a job, in the claim's
own transaction (``ExtractionJobs.claim``), holds it while its one request is out, and gives
it back when the model has answered — or, when the request was abandoned on a timeout, only
after ``rest_seconds`` more, because the model's server may still be working on it (sending
another request then is what made a slow model's queue snowball). A slot is leased
(``busy_until``), so one held by a worker that died comes free when its lease runs out; a
give-back only frees the slot if it still holds the taker's token.

Rows are (endpoint, slot): the endpoint is a hash of its URL, slots 0..limit-1 are made on
first use, and a lowered limit simply leaves the higher slots unused.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field

from ..postgres import Connection


@dataclass(frozen=True)
class Slot:
    number: int
    holder: uuid.UUID


@dataclass
class ModelSlots:
    """``limit`` slots of the endpoint at ``url``."""

    url: str
    limit: int
    _made: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError("a model endpoint needs at least one slot")
        self.endpoint = hashlib.sha256(self.url.encode()).hexdigest()[:32]

    async def take(self, conn: Connection) -> Slot | None:
        """Lock a free slot in ``conn``'s transaction (the worker role's), or None if every
        slot is busy. ``hold`` makes it taken; ending the transaction without it leaves it free."""
        if not self._made:
            await conn.execute("INSERT INTO extraction_slots (endpoint, slot) SELECT %s, n FROM generate_series(0, %s) n "
                               "ON CONFLICT DO NOTHING", (self.endpoint, self.limit - 1))
            self._made = True
        cur = await conn.execute(
            "SELECT slot FROM extraction_slots WHERE endpoint = %s AND slot < %s AND busy_until <= now() "
            "ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED", (self.endpoint, self.limit))
        row = await cur.fetchone()
        return Slot(row["slot"], uuid.uuid4()) if row is not None else None

    async def hold(self, conn: Connection, slot: Slot, lease_seconds: float) -> None:
        await conn.execute(
            "UPDATE extraction_slots SET busy_until = now() + make_interval(secs => %s), holder = %s "
            "WHERE endpoint = %s AND slot = %s", (lease_seconds, slot.holder, self.endpoint, slot.number))

    async def give_back(self, conn: Connection, slot: Slot, rest_seconds: float = 0.0) -> None:
        """Free ``slot`` now, or after ``rest_seconds`` — if it is still this taker's."""
        await conn.execute(
            "UPDATE extraction_slots SET busy_until = now() + make_interval(secs => %s), holder = NULL "
            "WHERE endpoint = %s AND slot = %s AND holder = %s",
            (rest_seconds, self.endpoint, slot.number, slot.holder))

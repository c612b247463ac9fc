"""How soon the pool tries again to reach a PostgreSQL that went away (issue 39 item 5).

psycopg_pool doubles its wait between attempts (1, 2, 4, 8, 16 s ...): a replica whose
PostgreSQL was back after a 20 s restart waited for the attempt due at 31 s. The waits the pool
schedules are read here as it makes them, against a port where nothing listens, with no
sleeping in between: deterministic, and a second's work however long the waits would be.
tests/distributed/test_postgres_restart.py restarts a real server under a replica.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg_pool.pool_async import AddConnection

from memoryd.storage import Postgres, PostgresSettings

from ..support import free_port

ATTEMPTS = 8


async def test_a_lost_connection_is_tried_again_at_least_every_second(monkeypatch: pytest.MonkeyPatch) -> None:
    db = Postgres(PostgresSettings(f"postgresql://memoryd@127.0.0.1:{free_port()}/memoryd?connect_timeout=2"))
    pool: Any = db._pool  # noqa: SLF001 — the pool's own schedule is what is under test
    waits: list[float] = []
    enough = asyncio.Event()

    async def schedule_task(task: Any, delay: float) -> None:
        if not isinstance(task, AddConnection):
            return  # the pool's other chores (shrinking it every 10 minutes)
        waits.append(delay)  # the wait before the next attempt; the attempt is made at once instead
        if len(waits) < ATTEMPTS:
            pool.run_task(task)
        else:
            enough.set()

    monkeypatch.setattr(pool, "schedule_task", schedule_task)
    await pool.open(wait=False)  # its one connection (pool_min) fails: refused
    try:
        await asyncio.wait_for(enough.wait(), 60)
    finally:
        await db.close()
    assert len(waits) == ATTEMPTS
    assert max(waits) <= 1.0, f"waits between attempts: {[round(w, 2) for w in waits]}"

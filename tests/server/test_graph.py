"""The object graph of one process (``memoryd.server.app._graph``), on a real PostgreSQL, the
bundled embedder and a Milvus Lite of its own: each part is built once, shared by whatever
uses it, and closed only after the background loops that use it have ended."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memoryd.domain import Unavailable
from memoryd.server import Config, open_graph


@pytest.fixture
def config(private_database: str, key_file: Path, tmp_path: Path) -> Config:
    return Config(data_dir=tmp_path, postgres_dsn=private_database, signing_key_file=str(key_file))


async def test_each_part_is_built_once_and_shared(config: Config):
    async with open_graph(config, create_keys=True) as graph:
        indexes = await graph.indexes(register=True)
        assert await graph.indexes() is indexes
        worker = await graph.outbox_worker()
        assert await graph.outbox_worker() is worker
        assert await graph.sweeper() is await graph.sweeper()
        assert graph.jobs() is graph.jobs()
        # The worker role's pool: one, whoever asks first (the outbox worker did, full-sized).
        assert await graph.worker_db(small=True) is graph.queue
        # Recall's dense channel runs on the one configured embedder: one model in memory.
        dense = graph.dense()
        assert dense is not None and dense[1] is graph.embedders().configured
        with pytest.raises(RuntimeError, match="as OutboxWorker, not WatchedOutboxWorker"):
            await graph.watched_outbox_worker()


async def test_the_pools_close_only_after_the_background_loops_have_ended(config: Config):
    answered: list[str] = []

    async def last_batch(stop: asyncio.Event) -> None:
        await stop.wait()
        await asyncio.sleep(0.2)  # a batch still finishing when the process is told to stop
        async with queue.worker_tx() as conn:
            await conn.execute("SELECT 1")
        answered.append("worker role")

    async with open_graph(config, create_keys=True) as graph:
        queue = await graph.worker_db()
        graph.run(last_batch)
    assert answered == ["worker role"]
    with pytest.raises(Unavailable):  # and then it is closed
        async with queue.worker_tx() as conn:
            await conn.execute("SELECT 1")


async def test_a_loop_that_failed_still_leaves_no_pool_open(config: Config):
    answered: list[str] = []

    async def failing(stop: asyncio.Event) -> None:
        raise RuntimeError("a loop's own bug")

    async def last_batch(stop: asyncio.Event) -> None:
        await stop.wait()
        await asyncio.sleep(0.2)
        async with queue.worker_tx() as conn:
            await conn.execute("SELECT 1")
        answered.append("worker role")

    with pytest.raises(RuntimeError, match="a loop's own bug"):
        async with open_graph(config, create_keys=True) as graph:
            queue = await graph.worker_db()
            graph.run(failing)
            graph.run(last_batch)  # the loops after the failed one still end first
    assert answered == ["worker role"]
    with pytest.raises(Unavailable):
        async with queue.worker_tx() as conn:
            await conn.execute("SELECT 1")

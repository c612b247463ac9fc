"""The database a probe (``bench/*_probe.py``) runs on: a migrated one given by ``--dsn``, or
an embedded PostgreSQL in a temporary directory, left nothing behind."""

from __future__ import annotations

import asyncio
import tempfile
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path

from memoryd.storage import EmbeddedPostgres, migrate


def run_probe(dsn: str, prefix: str, probe: Callable[[str], Awaitable[None]]) -> None:
    """Run ``probe(owner_dsn)`` on ``dsn``, or on a fresh embedded PostgreSQL if it is empty."""
    if dsn:
        asyncio.run(probe(dsn))
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as tests/conftest.py: the embedded server's noise
            pg = EmbeddedPostgres(Path(tmp))
            pg.start()
        try:
            asyncio.run(migrate(pg.owner_dsn))
            asyncio.run(probe(pg.owner_dsn))
        finally:
            pg.stop()

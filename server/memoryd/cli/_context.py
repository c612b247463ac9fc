"""Opening the stores for the operator commands (worker, outbox, reindex, audit, lifecycle)."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.server import Config
    from memoryd.storage import Postgres, Stores, PostgresSettings


@dataclass
class Storage:
    config: Config
    settings: PostgresSettings
    store: Stores
    queue: Postgres


def instant(text: str) -> datetime:
    """An ISO 8601 time given on the command line (UTC unless it names a zone)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@asynccontextmanager
async def open_storage(args: argparse.Namespace, config: Config | None = None) -> AsyncIterator[Storage]:
    """The stores of the configuration (``config``, else loaded from ``args``)."""
    from memoryd.server import load, open_stores

    # Never a new master key here (open_stores says why).
    async with open_stores(config or load(args.config), create_keys=False, with_worker_pool=True) as stores:
        assert stores.queue is not None
        yield Storage(stores.config, stores.settings, stores.store, stores.queue)

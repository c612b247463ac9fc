"""Opening the stores for the operator commands (worker, outbox, reindex, audit, lifecycle)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from memoryd.server import (
    Config,
    KeyFiles,
    keyword_hasher,
    load,
    load_secrets,
    prepare_postgres,
    require_shared_master_key,
    require_shared_term_secret,
)
from memoryd.storage import WORKER_ROLE, LocalKeyProvider, Postgres, PostgresMemoryStore, PostgresSettings


@dataclass
class Storage:
    config: Config
    settings: PostgresSettings
    store: PostgresMemoryStore
    queue: Postgres


def instant(text: str) -> datetime:
    """An ISO 8601 time given on the command line (UTC unless it names a zone)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@asynccontextmanager
async def open_storage(args: argparse.Namespace) -> AsyncIterator[Storage]:
    config = load(args.config)
    secrets = load_secrets(KeyFiles.of(config))
    # Never a new key here: a worker with a key of its own could not read a single memory
    # and would settle their index work without embedding them.
    provider = LocalKeyProvider.from_file(config.key_file_path, create=False)
    settings, embedded = await prepare_postgres(config)
    app_db, queue = Postgres(settings), Postgres(settings, role=WORKER_ROLE)
    try:
        await require_shared_term_secret(settings.setup_dsn, secrets, KeyFiles.of(config))
        await require_shared_master_key(settings.setup_dsn, provider, config)
        await app_db.open()
        await queue.open()
        store = PostgresMemoryStore(app_db, keyword_hasher(secrets), provider, config.policy_for)
        yield Storage(config, settings, store, queue)
    finally:
        await queue.close()
        await app_db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)

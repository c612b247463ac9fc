"""Fixtures of the storage tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memoryd.storage import EmbeddedPostgres, Postgres, PostgresSettings


@pytest.fixture
async def db(postgres: EmbeddedPostgres) -> AsyncIterator[Postgres]:
    """A pool on the suite's PostgreSQL, as the app connects: owner DSN, then SET ROLE memoryd_app."""
    database = Postgres(PostgresSettings(postgres.owner_dsn))
    await database.open()
    yield database
    await database.close()

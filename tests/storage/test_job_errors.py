"""Extraction job errors written by earlier versions, which quoted the model server's error (and
with it, where the server echoed them, the job's turns): migration 0025 drops the quote from
every tenant's jobs and keeps the status, run as a deployment runs it, by an owner that is no
superuser (row level security is forced on the table owner too)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from memoryd.storage import available, migrate

from ..support import database_before, unique

WITHOUT_QUOTES = 25  # the migration that drops the server's words from job errors

# (state, error as versions 21-22 stored it, error after the migration)
JOBS = [
    ("failed", r'the extraction model refused the request: HTTP 400 "could not process the request: [{\"role\": '
               r'\"user\", \"content\": \"My sister wrote \\\"Quokka-Z\u00fcrich-42\\\"\"}]"',
     "the extraction model refused the request: HTTP 400"),
    ("failed", 'the extraction model was unavailable: HTTP 500 "cannot parse "Quokka" at 3" (gave up after 3 attempts)',
     "the extraction model was unavailable: HTTP 500 (gave up after 3 attempts)"),
    ("queued", 'the extraction model was unavailable: HTTP 503 "Quokka"', "the extraction model was unavailable: HTTP 503"),
    ("failed", "the extraction model did not answer in time (gave up after 3 attempts)",
     "the extraction model did not answer in time (gave up after 3 attempts)"),
    ("failed", "the extraction model's answer could not be parsed", "the extraction model's answer could not be parsed"),
    ("failed", "the extraction model refused the request: HTTP 401", "the extraction model refused the request: HTTP 401"),
    ("succeeded", "", ""),
]


def _errors(conn: psycopg.Connection[Any], tenant: str) -> dict[str, str]:
    with conn.transaction():
        conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
        return {str(i): e for i, e in conn.execute("SELECT id, error FROM extraction_jobs WHERE tenant_id = %s",
                                                   (tenant,)).fetchall()}


async def test_the_migration_drops_the_servers_words_from_every_tenants_job_errors(postgres: Any) -> None:
    tenants = [unique("jobs"), unique("jobs")]
    expected: dict[str, dict[str, str]] = {t: {} for t in tenants}
    with database_before(postgres.owner_dsn, WITHOUT_QUOTES, "jobs") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for tenant in tenants:  # as the version before stored them (that code is gone)
                for state, error, after in JOBS:
                    job = str(uuid.uuid4())
                    expected[tenant][job] = after
                    with conn.transaction():
                        conn.execute("SELECT set_config('memoryd.tenant', %s, true)", (tenant,))
                        conn.execute("INSERT INTO extraction_jobs (tenant_id, id, subject, agent, state, turn_count, "
                                     "error) VALUES (%s, %s, 'alice', 'agent-1', %s, 1, %s)",
                                     (tenant, job, state, error))

        assert [m.version for m in await migrate(dsn)] == [m.version for m in available()
                                                           if m.version >= WITHOUT_QUOTES]

        with psycopg.connect(dsn, autocommit=True) as conn:
            for tenant in tenants:
                assert _errors(conn, tenant) == expected[tenant]
            assert conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE oid = 'extraction_jobs'::regclass"
                                ).fetchone() == (True,)

"""The deploy files' database set-up, run for real on Debian's PostgreSQL: compose's init
script makes a CREATEROLE-only owner, CloudNativePG's managed roles pre-create the logins;
either way `memoryd migrate` as that owner works and the logins reach only what they may."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ..support import MEMORYD, ROOT, server_env
from ..support_distributed import ExternalPostgres

pytestmark = pytest.mark.slow
INIT = ROOT / "deploy" / "postgres-init" / "10-memoryd-owner.sh"


@pytest.fixture
def cluster() -> Iterator[ExternalPostgres]:
    server = ExternalPostgres().start()
    yield server
    server.destroy()


def _migrate(owner_dsn: str, tmp_path: Path, **password_files: str) -> subprocess.CompletedProcess[str]:
    env = server_env(MEMORYD_POSTGRES_DSN=owner_dsn)
    for role, password in password_files.items():
        path = tmp_path / f"{role}_password"
        path.write_text(password + "\n")
        env[f"MEMORYD_POSTGRES_{role.upper()}_PASSWORD_FILE"] = str(path)
    return subprocess.run([*MEMORYD, "migrate"], env=env, capture_output=True, text=True, timeout=120)


def _logins_work(cluster: ExternalPostgres, app: str, worker: str) -> None:
    with psycopg.connect(cluster.dsn("memoryd_app", app, "memoryd")) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] >= 13
    with psycopg.connect(cluster.dsn("memoryd_worker", worker, "memoryd")) as conn:
        assert conn.execute("SELECT count(*) FROM outbox").fetchone() == (0,)


def test_the_compose_init_script_makes_an_owner_that_can_migrate_and_set_the_logins(cluster: ExternalPostgres,
                                                                                    tmp_path: Path) -> None:
    (tmp_path / "owner_password").write_text("owner-pw-1")
    env = {**os.environ, "PGHOST": str(cluster.sockets), "PGPORT": str(cluster.port), "PGUSER": "postgres",
           "MEMORYD_OWNER_PASSWORD_FILE": str(tmp_path / "owner_password")}
    done = subprocess.run(["sh", str(INIT)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    owner_dsn = cluster.dsn("memoryd", "owner-pw-1", "memoryd")
    with psycopg.connect(owner_dsn) as conn:
        assert conn.execute("SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user"
                            ).fetchone() == (False, True)
    done = _migrate(owner_dsn, tmp_path, app="app-pw-2", worker="worker-pw-3")
    assert done.returncode == 0, done.stderr
    assert "set the login password of memoryd_app" in done.stdout
    _logins_work(cluster, "app-pw-2", "worker-pw-3")
    # The verifier was made client-side: the server's log never saw the password.
    assert "app-pw-2" not in cluster.log.read_text()


def test_logins_precreated_by_the_platform_are_only_granted_to(cluster: ExternalPostgres, tmp_path: Path) -> None:
    """What deploy/k8s/postgres-cluster.yaml does: CloudNativePG creates the owner (CREATEROLE)
    and, as managed roles, memoryd_app and memoryd_worker with their passwords."""
    with psycopg.connect(cluster.superuser_dsn, autocommit=True) as conn:
        conn.execute("CREATE ROLE memoryd LOGIN CREATEROLE PASSWORD 'owner-pw'")
        conn.execute("CREATE ROLE memoryd_app LOGIN PASSWORD 'app-pw'")
        conn.execute("CREATE ROLE memoryd_worker LOGIN PASSWORD 'worker-pw'")
        conn.execute("CREATE DATABASE memoryd OWNER memoryd")
    done = _migrate(cluster.dsn("memoryd", "owner-pw", "memoryd"), tmp_path)
    assert done.returncode == 0, done.stderr
    _logins_work(cluster, "app-pw", "worker-pw")

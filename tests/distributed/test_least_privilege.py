"""Bug 1 of issue 13: a CREATEROLE owner (not a superuser) runs the migrations; servers and
workers log in as memoryd_app / memoryd_worker with their own passwords and never hold the
owner's; a wrong role setting stops a process with one clear line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from ..support import MEMORYD, ServerProcess, server_env
from ..support_distributed import APP_PASSWORD, Deployment, ExternalPostgres, MilvusStandalone
from .conftest import new_deployment

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def deployment(pg15: ExternalPostgres, milvus_standalone: MilvusStandalone,
               tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    return new_deployment(pg15, milvus_standalone, tmp_path_factory.mktemp("least-privilege"))


def test_the_owner_is_no_superuser_and_cannot_become_the_app_role(deployment: Deployment) -> None:
    with psycopg.connect(deployment.owner_dsn) as conn:
        row = conn.execute("SELECT rolsuper, rolcreaterole, rolbypassrls FROM pg_roles "
                           "WHERE rolname = current_user").fetchone()
        assert row == (False, True, False)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET ROLE memoryd_app")


def test_the_logins_have_least_privilege(deployment: Deployment) -> None:
    with psycopg.connect(deployment.app_dsn) as conn:
        assert conn.execute("SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles "
                            "WHERE rolname = current_user").fetchone() == (False, False, False)
        # Row level security hides every tenant's rows without a tenant set.
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM audit_log")
    with psycopg.connect(deployment.worker_dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT text_ct FROM memories LIMIT 1")


def test_a_replica_with_its_own_logins_serves(deployment: Deployment) -> None:
    replica = deployment.start_replica()
    try:
        assert "MEMORYD_POSTGRES_DSN" not in replica.env
        health = subprocess.run([*MEMORYD, "health", "--addr", replica.target, "--timeout", "10"],
                                capture_output=True, text=True, timeout=60)
        assert health.returncode == 0, health.stdout + health.stderr
    finally:
        deployment.stop_all()
        deployment.replicas.clear()


def _serve_fails(env: dict[str, str], log: Path) -> str:
    proc = ServerProcess(env, log)
    with pytest.raises(RuntimeError):
        proc.start(timeout=90)
    return log.read_text()


def test_the_owner_login_alone_fails_with_the_setting_to_fix(deployment: Deployment, tmp_path: Path) -> None:
    env = deployment.env()
    del env["MEMORYD_POSTGRES_APP_DSN"], env["MEMORYD_POSTGRES_WORKER_DSN"]
    env["MEMORYD_POSTGRES_DSN"] = deployment.owner_dsn
    log = _serve_fails(env, tmp_path / "owner-only.log")
    assert "may not SET ROLE memoryd_app" in log and "MEMORYD_POSTGRES_APP_DSN" in log
    assert "Traceback" not in log


def test_a_wrong_password_names_the_login(deployment: Deployment, tmp_path: Path) -> None:
    env = deployment.env(MEMORYD_POSTGRES_APP_DSN=deployment.app_dsn.replace(APP_PASSWORD, "wrong"))
    log = _serve_fails(env, tmp_path / "wrong-password.log")
    assert "refused the memoryd_app login" in log and "password authentication failed" in log
    assert "wrong" not in log.replace("wrong-password", "")  # the password itself is never printed


def test_an_unmigrated_database_is_refused_without_the_owner(pg15: ExternalPostgres, deployment: Deployment,
                                                             tmp_path: Path) -> None:
    with psycopg.connect(pg15.superuser_dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE unmigrated OWNER memoryd_owner")
    env = deployment.env(MEMORYD_POSTGRES_APP_DSN=pg15.dsn("memoryd_app", APP_PASSWORD, "unmigrated"),
                         MEMORYD_POSTGRES_WORKER_DSN=deployment.worker_dsn.replace(deployment.dbname, "unmigrated"))
    log = _serve_fails(env, tmp_path / "unmigrated.log")
    assert "memoryd migrate" in log


def test_migrate_refuses_without_the_owner_login(deployment: Deployment) -> None:
    env = server_env(MEMORYD_POSTGRES_APP_DSN=deployment.app_dsn, MEMORYD_POSTGRES_WORKER_DSN=deployment.worker_dsn)
    done = subprocess.run([*MEMORYD, "migrate"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "owner" in done.stderr and "Traceback" not in done.stderr

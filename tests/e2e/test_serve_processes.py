"""`memoryd serve --processes N` refused where it cannot work, at once and in one line with a
hint, before anything starts: with an embedded store (the embedded PostgreSQL and Milvus Lite
belong to one process) and with a count that is not one. The mode itself runs on the
distributed lane's stores (tests/distributed/test_processes.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..support import MEMORYD, server_env

EXTERNAL_POSTGRES = {"MEMORYD_POSTGRES_DSN": "postgresql://memoryd@127.0.0.1:1/memoryd"}  # never reached
EXTERNAL_MILVUS = {"MEMORYD_MILVUS_URI": "http://127.0.0.1:1"}  # never reached


def _serve(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # A generous bound: a refusal takes about a second; only one that never comes fails here.
    return subprocess.run([*MEMORYD, "serve", *args], cwd=cwd, env=server_env(**env), capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("args", "env"), [
    (("--processes", "2"), {}),
    ((), {"MEMORYD_PROCESSES": "2"}),
    (("--processes", "2"), EXTERNAL_POSTGRES),
    (("--processes", "2"), EXTERNAL_MILVUS),
], ids=["embedded-default", "embedded-default-by-variable", "milvus-lite", "embedded-postgres"])
def test_several_processes_with_an_embedded_store_are_refused(tmp_path: Path, args: tuple[str, ...],
                                                              env: dict[str, str]) -> None:
    result = _serve(tmp_path, *args, **env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "memoryd: error: serving from 2 processes needs external stores, a PostgreSQL server "
        "(MEMORYD_POSTGRES_APP_DSN and MEMORYD_POSTGRES_WORKER_DSN, or MEMORYD_POSTGRES_DSN) and a Milvus server "
        "(MEMORYD_MILVUS_URI): the embedded PostgreSQL and Milvus Lite belong to one process",
        "hint: see docs/configuration.md, or deploy/memoryd.example.toml"]
    assert not (tmp_path / ".memoryd").exists()  # nothing started, nothing made


@pytest.mark.parametrize("count", ["0", "257"])
def test_a_count_out_of_range_is_refused(tmp_path: Path, count: str) -> None:
    result = _serve(tmp_path, "--processes", count, **EXTERNAL_POSTGRES, **EXTERNAL_MILVUS)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[0] == "memoryd: error: processes must be between 1 and 256 (one per core is " \
                                            "the point)"

"""The key-copying init steps of deploy/ (the Kubernetes init containers, compose's keys-init),
run by ``sh`` with their folders moved under tmp_path: every key file and the earlier public
keys land owner-only. The files themselves are checked in tests/static/test_deploy_files.py."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from ..static.test_deploy_files import _compose, _workloads


def _run_copy(command: str, source: Path, target: Path, *, source_path: str, target_path: str) -> None:
    """Run an init step's shell command with its folders moved under tmp_path (and without
    its chown, which needs root)."""
    script = command.replace(source_path, str(source)).replace(target_path, str(target))
    script = script.replace("-o 10001 -g 10001 ", "")
    subprocess.run(["sh", "-c", script], check=True)


def _key_files(folder: Path, *, verify_folder: Path) -> None:
    folder.mkdir()
    for name in ("master.key", "signing.pem", "terms.json", "pages.json", "pgpass"):
        (folder / name).write_text(name)
    verify_folder.mkdir(exist_ok=True)


def _copied(target: Path) -> dict[str, str]:
    return {str(p.relative_to(target)): stat.filemode(p.stat().st_mode) for p in sorted(target.rglob("*"))}


@pytest.mark.parametrize("earlier", [0, 2], ids=["no-earlier-keys", "two-earlier-keys"])
def test_the_kubernetes_init_containers_copy_every_key_file_and_the_earlier_public_keys(tmp_path, earlier):
    for workload in (w for w in _workloads() if w["spec"]["template"]["spec"].get("initContainers")):
        [init] = workload["spec"]["template"]["spec"]["initContainers"]
        source, target = tmp_path / f"{workload['metadata']['name']}-src", tmp_path / workload["metadata"]["name"]
        _key_files(source, verify_folder=source)
        for n in range(earlier):  # a Secret has no folders: verify/<kid>.pem is the key verify-<kid>.pem
            (source / f"verify-kid{n}.pem").write_text(f"public {n}")
        target.mkdir()
        _run_copy(init["command"][2], source, target, source_path="/keys-src", target_path="/run/memoryd/keys")
        assert _copied(target) == {
            "master.key": "-rw-------", "pages.json": "-rw-------", "signing.pem": "-rw-------",
            "terms.json": "-rw-------", "verify": "drwx------",
            **{f"verify/kid{n}.pem": "-rw-------" for n in range(earlier)}}
        assert all((target / "verify" / f"kid{n}.pem").read_text() == f"public {n}" for n in range(earlier))


@pytest.mark.parametrize("earlier", [0, 2], ids=["no-earlier-keys", "two-earlier-keys"])
def test_the_compose_keys_init_copies_every_key_file_and_the_earlier_public_keys(tmp_path, earlier):
    [command] = _compose()["services"]["keys-init"]["command"]
    source, target = tmp_path / "secrets", tmp_path / "keys"
    _key_files(source, verify_folder=source / "verify")
    for n in range(earlier):
        (source / "verify" / f"kid{n}.pem").write_text(f"public {n}")
    for name in ("app", "worker", "owner"):
        (source / f"{name}_password").write_text(f"{name}-pw\n")
    target.mkdir()
    owner = tmp_path / "owner"
    owner.mkdir()
    script = command.replace("$$", "$").replace("/run/memoryd/owner", str(owner))
    _run_copy(script, source, target, source_path="/run/secrets", target_path="/run/memoryd/keys")
    assert _copied(target) == {
        "master.key": "-rw-------", "pages.json": "-rw-------", "pgpass": "-rw-------", "signing.pem": "-rw-------",
        "terms.json": "-rw-------", "verify": "drwx------",
        **{f"verify/kid{n}.pem": "-rw-------" for n in range(earlier)}}
    # The server and the worker get the two application logins; only migrate gets the owner's.
    assert (target / "pgpass").read_text() == ("postgres:5432:memoryd:memoryd_app:app-pw\n"
                                               "postgres:5432:memoryd:memoryd_worker:worker-pw\n")
    assert _copied(owner) == {"app_password": "-rw-------", "pgpass": "-rw-------", "worker_password": "-rw-------"}
    assert (owner / "pgpass").read_text() == "postgres:5432:memoryd:memoryd:owner-pw\n"

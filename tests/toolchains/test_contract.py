"""The contract stays lint-clean, formatted, backward compatible, and its generated code current."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = shutil.which("buf", path=str(Path(sys.executable).parent)) or shutil.which("buf")
GENERATED = ROOT / "clients" / "python" / "memoryd" / "v1"


def _buf(*args: str) -> subprocess.CompletedProcess[str]:
    assert BUF, "buf is not installed: it comes with the dev extra (buf-bin)"
    return subprocess.run([BUF, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_buf_lint_is_clean():
    result = _buf("lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_format_is_clean():
    result = _buf("format", "--diff", "--exit-code")
    assert result.returncode == 0, result.stdout + result.stderr


def _has_main_branch() -> bool:
    probe = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "refs/heads/main"], cwd=ROOT,
                           capture_output=True, text=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _has_main_branch(), reason="no main branch to compare the contract with")
def test_buf_breaking_against_main():
    result = _buf("breaking", "--against", ".git#branch=main")
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_code_matches_a_fresh_generation(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    fresh = tmp_path / "memoryd" / "v1"
    committed = sorted(p.name for p in GENERATED.iterdir() if p.name != "__pycache__")
    assert committed == sorted(p.name for p in fresh.iterdir())
    _, mismatch, errors = filecmp.cmpfiles(GENERATED, fresh, committed, shallow=False)
    assert mismatch == [] and errors == [], f"stale generated code: run 'make gen' ({mismatch + errors})"

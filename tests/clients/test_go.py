"""The Go client (clients/go) vets clean and passes its own tests (go test, against an in-process
gRPC server). Modules come from go.sum through the Go module proxy; the Go build cache keeps
reruns fast. No Go toolchain means failure, never a skip."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "clients" / "go"


def _go(*args: str) -> subprocess.CompletedProcess[str]:
    go = shutil.which("go")
    assert go, "the Go toolchain (go 1.26+) is needed for the Go client"
    return subprocess.run([go, *args], cwd=MODULE, capture_output=True, text=True, timeout=900)


def test_go_vet_is_clean():
    run = _go("vet", "./...")
    assert run.returncode == 0, run.stdout + run.stderr


def test_go_tests_pass():
    run = _go("test", "./...")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok  \tgithub.com/memoryd/memoryd/clients/go/memoryd" in run.stdout, run.stdout


def test_go_code_is_gofmt_clean():
    gofmt = shutil.which("gofmt")
    assert gofmt, "gofmt comes with the Go toolchain"
    run = subprocess.run([gofmt, "-l", "memoryd", "cmd"], cwd=MODULE, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout == "", f"not gofmt-formatted: {run.stdout}{run.stderr}"

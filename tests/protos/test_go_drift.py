"""The committed Go code (clients/go/gen/memoryd/v1) is what scripts/gen_go.sh makes from protos/."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "clients" / "go" / "gen" / "memoryd" / "v1"


def test_go_generated_code_matches_a_fresh_generation(tmp_path):
    assert shutil.which("go"), "the Go toolchain (go) is not installed: it is needed to check the Go stubs"
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gen_go.sh"), str(tmp_path)], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "MEMORYD_PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr
    fresh = tmp_path / "gen" / "memoryd" / "v1"
    committed = sorted(p.name for p in GENERATED.iterdir())
    assert committed == sorted(p.name for p in fresh.iterdir())
    _, mismatch, errors = filecmp.cmpfiles(GENERATED, fresh, committed, shallow=False)
    assert mismatch == [] and errors == [], f"stale generated Go code: run 'make gen' ({mismatch + errors})"


def test_go_generated_files_say_do_not_edit():
    files = list(GENERATED.glob("*.go"))
    assert files
    for path in files:
        assert "DO NOT EDIT" in path.read_text().splitlines()[0], path.name

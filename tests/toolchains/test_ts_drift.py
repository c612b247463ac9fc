"""The committed TypeScript code (clients/typescript/src/gen) is what scripts/gen_ts.sh makes now."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "clients" / "typescript" / "src" / "gen"


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_typescript_code_matches_a_fresh_generation(tmp_path: Path):
    assert shutil.which("npm"), "npm is not installed: the TypeScript generator (protoc-gen-es) needs Node 20+"
    out = tmp_path / "gen"
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gen_ts.sh"), str(out)], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYTHON": sys.executable})
    assert run.returncode == 0, run.stdout + run.stderr
    committed = _files(GENERATED)
    assert committed == _files(out), "generated TypeScript files differ: run 'make gen'"
    _, mismatch, errors = filecmp.cmpfiles(GENERATED, out, committed, shallow=False)
    assert mismatch == [] and errors == [], f"stale generated TypeScript: run 'make gen' ({mismatch + errors})"

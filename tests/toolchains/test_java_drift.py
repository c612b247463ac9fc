"""The committed Java stubs (clients/java/memoryd-client/src/main/java-gen) are what `make gen` makes now.

scripts/gen_java.sh fetches its protoc and protoc-gen-grpc-java from Maven Central; when it
cannot, this fails rather than skips."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "clients" / "java" / "memoryd-client" / "src" / "main" / "java-gen"


def _files(base: Path) -> list[str]:
    return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())


def test_java_stubs_match_a_fresh_generation(tmp_path):
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gen_java.sh"), str(tmp_path)], capture_output=True,
                         text=True, timeout=240, env={**os.environ, "PYTHON": sys.executable})
    assert run.returncode == 0, f"scripts/gen_java.sh failed:\n{run.stdout}\n{run.stderr[-3000:]}"
    committed = _files(COMMITTED)
    assert committed == _files(tmp_path), "the generated Java files differ: run 'make gen'"
    _, mismatch, errors = filecmp.cmpfiles(COMMITTED, tmp_path, committed, shallow=False)
    assert mismatch == [] and errors == [], f"stale generated Java code: run 'make gen' ({mismatch + errors})"

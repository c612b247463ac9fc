"""The committed Go code (clients/go/gen/memoryd/v1) is what scripts/gen_go.sh makes from protos/, and
what buf.gen.yaml makes for a team that generates its own stubs."""

from __future__ import annotations

import filecmp
import os
import re
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


# The one line buf cannot reproduce: it does not pass the plugins a compiler version.
_PROTOC_VERSION_LINE = re.compile(r"^// (\t|- )protoc +\S+$", re.MULTILINE)


def test_buf_gen_yaml_makes_the_committed_go_code(tmp_path):
    """A team running `buf generate --template buf.gen.yaml` gets the stubs this repository ships:
    the same files, byte for byte, but for the protoc version in the header comment."""
    buf = shutil.which("buf", path=str(Path(sys.executable).parent)) or shutil.which("buf")
    assert buf, "buf is not installed: it comes with the dev extra (buf-bin)"
    assert shutil.which("go"), "the Go toolchain (go) is not installed: buf.gen.yaml runs the Go plugins with it"
    run = subprocess.run([buf, "generate", "--template", "buf.gen.yaml", "-o", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    fresh = tmp_path / "clients" / "go" / "gen" / "memoryd" / "v1"
    assert sorted(p.name for p in fresh.iterdir()) == sorted(p.name for p in GENERATED.iterdir())
    for path in sorted(GENERATED.iterdir()):
        committed, generated = path.read_text(), (fresh / path.name).read_text()
        header = _PROTOC_VERSION_LINE.search(generated)
        assert header and header.group(0).endswith("(unknown)"), f"{path.name}: {header}"
        assert _PROTOC_VERSION_LINE.sub("", generated) == _PROTOC_VERSION_LINE.sub("", committed), (
            f"{path.name}: buf.gen.yaml and scripts/gen_go.sh disagree (plugin versions or options)")

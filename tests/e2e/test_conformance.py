"""The conformance scenario (clients/conformance) in every client language, against the real
server. A language whose toolchain is missing or whose build fails fails here — never skips."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from ..support import ROOT, ServerProcess

CONFORMANCE = ROOT / "clients" / "conformance"
LANGUAGES = ["python", "typescript", "go", "java"]


def _prepare():  # clients/conformance is not a package: load its prepare module by path
    spec = importlib.util.spec_from_file_location("conformance_prepare", CONFORMANCE / "prepare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.prepare


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_scenario_passes_in(language: str, server: ServerProcess, key_file: Path, tmp_path: Path):
    script = ROOT / "clients" / language / "conformance.sh"
    assert script.exists(), f"no conformance runner for {language}: {script}"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_prepare()(server.target, key_file)))
    run = subprocess.run(["bash", str(script), str(CONFORMANCE / "scenario.json"), str(config)],
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    steps = json.loads((CONFORMANCE / "scenario.json").read_text())["steps"]
    assert run.returncode == 0, f"{language} runner failed:\n{run.stdout}\n{run.stderr[-4000:]}"
    # One line per step, each passed: a runner that skipped a step would not print it.
    passed = [line for line in run.stdout.splitlines() if line.startswith("ok ")]
    assert passed == [f"ok {n} {step['name']}" for n, step in enumerate(steps, 1)], run.stdout

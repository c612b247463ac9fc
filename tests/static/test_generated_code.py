"""Code generated from protos/ is marked DO NOT EDIT in every language (docs/conventions.md,
"Generated code": produced by one command, never hand-edited). That it matches a fresh
generation: tests/toolchains/test_*_drift.py and test_contract.py."""

from __future__ import annotations

from ..support import ROOT

PYTHON = ROOT / "clients" / "python" / "memoryd" / "v1"
GO = ROOT / "clients" / "go" / "gen" / "memoryd" / "v1"
JAVA = ROOT / "clients" / "java" / "memoryd-client" / "src" / "main" / "java-gen"
TYPESCRIPT = ROOT / "clients" / "typescript" / "src" / "gen"


def test_python_generated_files_say_do_not_edit():
    for path in PYTHON.glob("*.py*"):
        assert "DO NOT EDIT" in path.read_text().splitlines()[0] + path.read_text()[:300], path.name


def test_go_generated_files_say_do_not_edit():
    files = list(GO.glob("*.go"))
    assert files
    for path in files:
        assert "DO NOT EDIT" in path.read_text().splitlines()[0], path.name


def test_java_stubs_say_do_not_edit():
    for path in JAVA.rglob("*.java"):
        assert "DO NOT EDIT" in path.read_text()[:300], path.name


def test_typescript_generated_files_say_do_not_edit():
    files = list(TYPESCRIPT.rglob("*.ts"))
    assert files
    for path in files:
        assert "DO NOT EDIT" in path.read_text().splitlines()[0], path.name

"""The Java client's own tests: `mvn test` in clients/java (JUnit against in-process gRPC servers
in memoryd-client, the conformance runner's path lookups in conformance).

Fails — never skips — when Maven or a JDK is missing or the build fails. Maven runs offline once
the local repository (~/.m2) has every dependency and plugin, and goes online only when it does
not (the first run on a fresh machine downloads them, a minute or two).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ..support import ROOT

JAVA = ROOT / "clients" / "java"


def _mvn(*args: str, cwd: Path, timeout: int = 400) -> subprocess.CompletedProcess[str]:
    """Run Maven offline; online only when the local repository lacks something."""
    assert shutil.which("mvn"), "Maven (mvn) is not installed: the Java client needs it"
    assert shutil.which("java"), "no JDK (java) is installed: the Java client needs Java 17"
    run = subprocess.run(["mvn", "-B", "-q", "-o", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0 and "offline mode" in run.stdout + run.stderr:
        run = subprocess.run(["mvn", "-B", "-q", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, f"mvn {' '.join(args)} failed in {cwd}:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    return run


def test_the_java_client_builds_and_its_junit_tests_pass():
    reports = [JAVA / module / "target" / "surefire-reports" for module in ("memoryd-client", "conformance")]
    for folder in reports:
        if folder.exists():
            shutil.rmtree(folder)
    _mvn("test", cwd=JAVA)
    summaries = {folder.parent.parent.name: [p.read_text() for p in folder.glob("*.txt")] for folder in reports}
    for module, texts in summaries.items():
        counts = [tuple(map(int, m)) for s in texts
                  for m in re.findall(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)", s)]
        assert counts, f"mvn test ran no test class in {module}"
        assert all(c[1:] == (0, 0, 0) for c in counts), texts
    ran = sum(int(n) for texts in summaries.values() for s in texts for n in re.findall(r"Tests run: (\d+),", s))
    assert ran >= 10, summaries

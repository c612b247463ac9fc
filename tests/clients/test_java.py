"""The Java client's own tests (JUnit against an in-process server): `mvn test` in clients/java.

Fails — never skips — when Maven or a JDK is missing or the build fails. The first run on a
fresh machine downloads the Maven dependencies (about half a minute here); later runs are
incremental."""

from __future__ import annotations

import re
import shutil
import subprocess

from ..support import ROOT

JAVA = ROOT / "clients" / "java"


def test_the_java_client_builds_and_its_junit_tests_pass():
    assert shutil.which("mvn"), "Maven (mvn) is not installed: the Java client needs it"
    assert shutil.which("java"), "no JDK (java) is installed: the Java client needs Java 17"
    reports = JAVA / "target" / "surefire-reports"
    if reports.exists():
        shutil.rmtree(reports)
    run = subprocess.run(["mvn", "-B", "-q", "test"], cwd=JAVA, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, f"mvn test failed:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    summaries = [p.read_text() for p in reports.glob("*.txt")]
    counts = [tuple(map(int, m)) for s in summaries
              for m in re.findall(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)", s)]
    assert counts, "mvn test ran no test class"
    ran = sum(c[0] for c in counts)
    assert ran >= 10 and all(c[1:] == (0, 0, 0) for c in counts), summaries

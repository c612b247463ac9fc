"""The Python client's wheel, built as pip builds it, ships the Apache License 2.0 text and
declares it (the licence files themselves: tests/static/test_licence.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from ..support import ROOT


def test_the_python_client_wheel_carries_the_licence(tmp_path: Path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path),
                    str(ROOT / "clients/python")], check=True, timeout=300)
    [wheel] = tmp_path.glob("memoryd_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [licence] = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(licence) == (ROOT / "LICENSE").read_bytes()
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        assert "License-Expression: Apache-2.0" in archive.read(metadata).decode().splitlines()

"""memoryd and each of its clients carry the Apache License 2.0: the text at the root, the
same file in every client's folder (what each ecosystem packs), and the SPDX id in every
manifest — and the Python client's wheel, built as pip builds it, ships it."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from ..support import ROOT

CLIENTS = ["clients/python", "clients/typescript", "clients/go", "clients/java"]


def test_the_root_licence_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    assert "END OF TERMS AND CONDITIONS" in text


def test_every_client_folder_ships_the_same_licence():
    root = (ROOT / "LICENSE").read_bytes()
    assert {folder: (ROOT / folder / "LICENSE").read_bytes() == root for folder in CLIENTS} == \
        dict.fromkeys(CLIENTS, True)


def test_every_manifest_declares_apache_2():
    for manifest in (ROOT / "pyproject.toml", ROOT / "clients/python/pyproject.toml"):
        assert tomllib.loads(manifest.read_text())["project"]["license"] == "Apache-2.0", manifest
    assert json.loads((ROOT / "clients/typescript/package.json").read_text())["license"] == "Apache-2.0"
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(ROOT / "clients/java/pom.xml").getroot()
    assert [e.text for e in pom.findall("m:licenses/m:license/m:name", namespace)] == ["Apache-2.0"]


def test_the_python_client_wheel_carries_the_licence(tmp_path: Path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path),
                    str(ROOT / "clients/python")], check=True, timeout=300)
    [wheel] = tmp_path.glob("memoryd_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [licence] = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(licence) == (ROOT / "LICENSE").read_bytes()
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        assert "License-Expression: Apache-2.0" in archive.read(metadata).decode().splitlines()

"""memoryd and each of its clients carry the Apache License 2.0: the text at the root, the
same file in every client's folder (what each ecosystem packs), and the SPDX id in every
manifest. That the Python client's wheel ships it: tests/toolchains/test_python_wheel.py."""

from __future__ import annotations

import json
import tomllib
import xml.etree.ElementTree as ET

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

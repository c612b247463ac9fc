"""``memoryd export`` and ``memoryd import``: a sealed round trip through files, with the
passphrase from a file or the environment and never from an argument."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, ROOT, ServerProcess, draft, server_env

PASSPHRASE = "tea before coffee, always"


def _memoryd(server: ServerProcess, token: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, *args, "--addr", server.target, "--token", token], cwd=ROOT,
                          env=server_env(**env), capture_output=True, text=True, timeout=120)


def test_export_erase_import_round_trip_with_a_passphrase_file(server, agent, tmp_path: Path):
    agent.write("alice", draft("preference", "绿茶", key="drink"), draft("event", "Moved to Porto", tags=["move"]),
                draft("fact", "Works at Acme", key="employer", importance=0.9))
    secret, archive = tmp_path / "passphrase", tmp_path / "alice.memoryd.json"
    secret.write_text(PASSPHRASE + "\n")

    exported = _memoryd(server, agent.token, "export", "--subject", "alice", "--out", str(archive),
                        "--passphrase-file", str(secret))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip() == f"exported 3 memories of alice to {archive} (sealed)"
    assert json.loads(archive.read_bytes())["format"] == "memoryd-export-sealed"
    assert "绿茶".encode() not in archive.read_bytes()

    agent.erase("alice", svc.ERASE_MODE_PURGE, all_of_subject=True)
    imported = _memoryd(server, agent.token, "import", "--subject", "alice", str(archive),
                        "--passphrase-env", "ALICE_PASSPHRASE", ALICE_PASSPHRASE=PASSPHRASE)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "imported 3 memories into alice: 3 created"
    assert sorted(m.text for m in agent.list_all("alice")) == ["Moved to Porto", "Works at Acme", "绿茶"]

    again = _memoryd(server, agent.token, "import", "--subject", "alice", str(archive), "--passphrase-file", str(secret))
    assert again.stdout.strip() == "imported 3 memories into alice: 1 merged, 2 unchanged"


def test_a_wrong_passphrase_prints_one_line_and_the_field(server, agent, tmp_path: Path):
    agent.write("alice", draft("preference", "绿茶", key="drink"))
    plain = _memoryd(server, agent.token, "export", "--subject", "alice")  # to standard output
    assert plain.returncode == 0 and json.loads(plain.stdout)["format"] == "memoryd-export"
    assert plain.stderr.strip().endswith("exported 1 memories of alice (plain)")

    archive = tmp_path / "sealed.json"
    _memoryd(server, agent.token, "export", "--subject", "alice", "--out", str(archive), "--passphrase-env", "P",
             P=PASSPHRASE)
    failed = _memoryd(server, agent.token, "import", "--subject", "bob", str(archive), "--passphrase-env", "P",
                      P="not the passphrase")
    assert failed.returncode == 1
    first, *violations = failed.stderr.strip().splitlines()
    assert first.startswith("memoryd: error: INVALID_ARGUMENT: ")
    assert violations and violations[0].startswith("  passphrase: ")
    assert agent.list_all("bob") == []


def test_a_passphrase_is_never_taken_as_an_argument(server, agent):
    refused = _memoryd(server, agent.token, "export", "--subject", "alice", "--passphrase", PASSPHRASE)
    assert refused.returncode == 2 and refused.stdout == "" and "error:" in refused.stderr

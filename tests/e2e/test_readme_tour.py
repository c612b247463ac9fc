"""The README's tour runs as written, against the embedded default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..support import ROOT, ServerProcess, server_env


def _tour() -> str:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- tour:start -->\s*```bash\n(.*?)```\s*<!-- tour:end -->", readme, re.DOTALL)
    assert block, "README.md has no tour block"
    return block.group(1)


def test_readme_tour_works_as_written(tmp_path):
    # The tour runs at a repository root: give the temporary one the project's virtualenv.
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    process = ServerProcess(server_env(), tmp_path / "server.log")
    process.cwd = tmp_path
    process.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        env["MEMORYD_ADDR"] = process.target
        # Each command's output is kept, separated, to check what a reader would see; an
        # assignment (ID=$(...)) shows the value it captured.
        lines = []
        for line in _tour().splitlines():
            lines.append(line)
            if line.startswith("ID="):
                lines.append('echo "$ID"')
            if line.strip() and not line.lstrip().startswith(("#", "source", "export")):
                lines.append("echo '@@@'")
        script = "set -euo pipefail\n" + "\n".join(lines)
        result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        assert process.stop() == 0
    outputs = [chunk.strip() for chunk in result.stdout.split("@@@")][:-1]
    (first_write, memory_id, refund, trip, listing, recall, by_meaning, by_words, history, erase,
     final) = outputs
    assert json.loads(first_write)["results"][0]["outcome"] == "WRITE_OUTCOME_CREATED"
    assert re.fullmatch(r"[0-9a-f-]{36}", memory_id)
    assert json.loads(refund)["indexed"] is True and json.loads(trip)["indexed"] is True
    assert {m["text"] for m in json.loads(listing)["memories"]} == {
        "Rust", "Asked for a refund of order 1042", "下个月要去上海出差"}
    recalled = json.loads(recall)
    assert [m["memory"]["text"] for m in recalled["memories"]] == ["Rust"]
    assert "not instructions" in recalled["block"]
    [meaning] = json.loads(by_meaning)["memories"]
    assert meaning["memory"]["text"] == "下个月要去上海出差" and meaning["dense_rank"] == 1
    [words] = json.loads(by_words)["memories"]
    assert words["memory"]["text"] == "下个月要去上海出差" and words["keyword_rank"] == 1
    versions = json.loads(history)["versions"]
    assert [(v["memory"]["text"], v["memory"]["status"]) for v in versions] == [
        ("Rust", "MEMORY_STATUS_ACTIVE"), ("Python", "MEMORY_STATUS_SUPERSEDED")]
    receipt = json.loads(erase)["receipt"]
    assert receipt["verified"] is True and receipt["counts"]["memories"] == "1" and receipt["counts"]["versions"] == "2"
    assert [m["category"] for m in json.loads(final)["memories"]] == ["CATEGORY_EVENT", "CATEGORY_EVENT"]

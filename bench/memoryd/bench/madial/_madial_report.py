"""MADial-Bench results presented: the table by shape and language, the ratios of context to
query, and the JSON result (``memoryd bench madial``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any



from .._dataset import MADIAL_DIALOGUES, MADIAL_MEMORIES
from .._report import sha256
from ._madial import MAX_QUERY_BYTES, SMALL_TALK, Chatted, MadialResult


SHAPE_TITLES = {
    "query": "the dialogue before the test turn as RecallRequest.query (the authors' protocol)",
    "context": "the same turns as RecallRequest.context, no query",
}


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def ratios(result: MadialResult) -> dict[str, dict[str, float | None]]:
    """Per shape and reference: the shape's Recall p50 ÷ the reference's."""
    out: dict[str, dict[str, float | None]] = {}
    for shape in result.options.shapes:
        p50 = result.latency(shape)["p50"]
        for name, reference in result.reference.items():
            base = reference["latency_ms"]["p50"]
            out.setdefault(shape, {})[name] = p50 / base if p50 is not None and base else None
    return out


def report(result: MadialResult) -> str:
    options, ks = result.options, result.ks
    minimum = "server default" if options.min_relevance is None else f"{options.min_relevance}"
    lines = [f"MADial-Bench memory recall through Recall (top_k {options.k}, min_relevance {minimum})"]
    for shape in options.shapes:
        lines += ["", f"shape {shape}: {SHAPE_TITLES[shape]}"]
        if shape in result.refused:
            lines.append(f"  not measured: this server does not take RecallRequest.context ({result.refused[shape]})")
            continue
        header = (f"{'mode':<6} {'dialogues':>9}" + "".join(f" {f'R@{k}':>6}" for k in ks)
                  + f" {f'hit@{result.hit_at}':>6} {'empty':>5} {'p50 ms':>7} {'p99 ms':>7}")
        lines += [header, "-" * len(header)]
        for row in result.rows(shape):
            lines.append(f"{row.mode:<6} {row.dialogues:>9}" + "".join(f" {row.recall[k]:>6.3f}" for k in ks)
                         + f" {row.hit:>6.3f} {row.empty:>5} {_ms(row.p50):>7} {_ms(row.p99):>7}")
    lines += ["", "latency: client wall time of each dialogue's first call of the run only (the same dialogue in "
                  "another mode or shape may find its embedding in the server's query cache; the shapes take turns "
                  "going first); n/a: no first call in that row"]
    if "query" in options.shapes:
        lines += [f"queries: longest {result.longest_query_bytes} bytes; the server takes {MAX_QUERY_BYTES}: "
                      + (f"{result.cut} cut to their last lines that fit" if result.cut else "none cut")]
    if result.small_talk:
        lines.append(f"small talk ({SMALL_TALK.name}, as context, of every subject): "
                     f"{sum(not c.returned for c in result.small_talk)} of {len(result.small_talk)} answers empty"
                     " (the right answer: all); " + ", ".join(
                         f"{language}→{stored} {sum(not c.returned for c in asked)}/{len(asked)}"
                         for (language, stored), asked in _by_languages(result.small_talk).items()))
    for name, reference in result.reference.items():
        latency = reference["latency_ms"]
        lines.append(f"reference ({name}), same server: {reference['what']}: {reference['calls']} calls, "
                     f"p50 {_ms(latency['p50'])} ms, p99 {_ms(latency['p99'])} ms")
    degraded = Counter(a.degraded for a in result.asked if a.degraded)
    if degraded:
        lines.append(f"WARNING: {sum(degraded.values())} recalls were degraded: "
                     + "; ".join(f"{reason} ×{n}" for reason, n in degraded.most_common()))
    for shape, by_reference in ratios(result).items():
        if shape not in result.refused:
            lines.append(f"Recall p50, shape {shape} ÷ reference p50: " + ", ".join(
                f"{name} {'n/a' if r is None else f'{r:.2f}×'}" for name, r in by_reference.items())
                + " (the issue's target: at most 1.5× LoCoMo's)")
    return "\n".join(lines)


def _by_languages(chatted: Sequence[Chatted]) -> dict[tuple[str, str], list[Chatted]]:
    out: dict[tuple[str, str], list[Chatted]] = {}
    for c in chatted:
        out.setdefault((c.language, c.stored), []).append(c)
    return out


def json_result(result: MadialResult) -> dict[str, Any]:
    """Ids and numbers only: no text of the dataset."""
    options = result.options
    files = sorted({*MADIAL_DIALOGUES.values(), *MADIAL_MEMORIES.values()})
    return {
        "benchmark": "madial",
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": result.seconds,
        "dataset": {"folder": str(options.folder), "sha256": {str(f): sha256(options.folder / f) for f in files}},
        "options": {"modes": list(options.modes), "shapes": list(options.shapes), "top_k": options.k,
                    "min_relevance": options.min_relevance, "limit": options.limit, "spread": options.spread,
                    "reference_questions": options.reference_questions, "subject_prefix": options.subject_prefix,
                    "consistency": "CONSISTENCY_WAIT_INDEXED", "locomo": str(options.locomo) if options.locomo else None},
        "server": result.server,
        "rows": {shape: [row.__dict__ | {"recall": {str(k): v for k, v in row.recall.items()}}
                         for row in result.rows(shape)] for shape in options.shapes},
        "refused": dict(result.refused),
        "latency_ms": {shape: result.latency(shape) for shape in options.shapes},
        "queries": {"longest_bytes": result.longest_query_bytes, "max_query_bytes": MAX_QUERY_BYTES, "cut": result.cut},
        "reference": result.reference, "ratios": ratios(result),
        "small_talk": [c.__dict__ for c in result.small_talk],
        "dialogues": [{"mode": a.mode, "shape": a.shape, "dialogue": a.dialogue, "user": a.user,
                       "relevant": list(a.relevant), "recall": {str(k): a.recall(k) for k in result.ks},
                       "latency_ms": a.latency_ms, "first": a.first, "sent_bytes": a.sent_bytes, "cut": a.cut,
                       "degraded": a.degraded,
                       "returned": [r.__dict__ for r in a.returned]} for a in result.asked],
    }

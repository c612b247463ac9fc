"""The benchmark's arithmetic: recall@k per question, averages per category, percentiles.

Pure functions over plain values, so they can be checked with hand-made rankings.

A ranking is the recalled memories, best first, each given as the dia_ids it stands for
(usually one; a memory that an exact repeat was merged into stands for several turns).
recall@k of a question = |evidence ∩ dia_ids of the first k memories| / |evidence|.
A question without usable evidence is counted but not scored.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ._dataset import CATEGORY_NAMES, SCORED_CATEGORIES

Ranking = Sequence[Collection[str]]


def recall_at_k(ranking: Ranking, evidence: Collection[str], k: int) -> float:
    """The fraction of ``evidence`` found among the dia_ids of the first ``k`` ranked memories."""
    if k < 1:
        raise ValueError("k must be at least 1")
    wanted = set(evidence)
    if not wanted:
        raise ValueError("recall is undefined without evidence")
    found: set[str] = set()
    for ids in ranking[:k]:
        found.update(ids)
    return len(wanted & found) / len(wanted)


@dataclass(frozen=True)
class QuestionResult:
    """One asked question: what was expected, what came back, how long it took."""

    sample_id: str
    index: int
    category: int
    evidence: tuple[str, ...]
    ranking: tuple[tuple[str, ...], ...]
    latency_ms: float
    # Per ranked memory: "dense", "keyword", "both" or "" (which recall channels matched it).
    channels: tuple[str, ...] = ()
    degraded: bool = False

    @property
    def scored(self) -> bool:
        return bool(self.evidence)

    def recall(self, k: int) -> float:
        return recall_at_k(self.ranking, self.evidence, k)


@dataclass(frozen=True)
class Row:
    """Averages over a group of questions (a category, or all of categories 1–4)."""

    label: str
    questions: int
    scored: int
    recall: Mapping[int, float | None]


@dataclass(frozen=True)
class Summary:
    ks: tuple[int, ...]
    categories: tuple[Row, ...]
    overall: Row
    latency_ms: Mapping[str, float | None] = field(default_factory=dict)


def _row(label: str, results: Sequence[QuestionResult], ks: Sequence[int]) -> Row:
    scored = [r for r in results if r.scored]
    recall: dict[int, float | None] = {
        k: (math.fsum(r.recall(k) for r in scored) / len(scored) if scored else None) for k in ks}
    return Row(label, len(results), len(scored), recall)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100) with linear interpolation between ranks; None if empty."""
    if not 0 <= q <= 100:
        raise ValueError("q must be in [0, 100]")
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise(results: Sequence[QuestionResult], ks: Sequence[int]) -> Summary:
    """Per-category rows (only categories that have questions), the overall row (a mean over
    every scored question of categories 1–4, not a mean of the category means) and latency."""
    ks = tuple(sorted(set(ks)))
    rows = tuple(_row(f"{c} {CATEGORY_NAMES[c]}", [r for r in results if r.category == c], ks)
                 for c in SCORED_CATEGORIES if any(r.category == c for r in results))
    overall = _row("overall (1-4)", [r for r in results if r.category in SCORED_CATEGORIES], ks)
    latencies = [r.latency_ms for r in results]
    latency = {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
               "mean": math.fsum(latencies) / len(latencies) if latencies else None,
               "max": max(latencies) if latencies else None}
    return Summary(ks, rows, overall, latency)


def channel_hits(results: Sequence[QuestionResult], k: int) -> dict[str, int]:
    """How the evidence found in the first k memories was matched: by the dense channel only,
    the keyword channel only, both, or neither reported (e.g. an older server)."""
    counts = {"dense": 0, "keyword": 0, "both": 0, "": 0}
    for result in results:
        wanted = set(result.evidence)
        for rank, ids in enumerate(result.ranking[:k]):
            hits = len(wanted.intersection(ids))
            if hits:
                channel = result.channels[rank] if rank < len(result.channels) else ""
                counts[channel if channel in counts else ""] += hits
                wanted.difference_update(ids)
    return counts

"""Recall's ranking, pure: the two channels' candidates fused, their similarity, MMR
de-duplication and the tie-breaks. No I/O; tested alone (tests/domain/test_recall_ranking*.py).

The formula these functions serve is in ``_recall``'s docstring.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from memoryd.domain import (
    KeywordHit,
    Memory,
    ScoreParts,
)


DENSE_WEIGHT = 0.5


MMR_LAMBDA = 0.7


DUPLICATE_COSINE = 0.9


@dataclass
class Candidate:
    memory_id: str
    dense_rank: int = 0
    keyword_rank: int = 0
    cosine: float | None = None
    bm25: float = 0.0
    keyword_relevance: float = 0.0
    vector: list[float] | None = None
    margin: float | None = None  # the cosine over the query's baseline (``_relevance``)
    relevance: float = 0.0  # absolute, from margin and keyword relevance (``_relevance``)


def fuse(dense: list[tuple[str, float, list[float]]], keyword: list[KeywordHit]) -> dict[str, Candidate]:
    """The union of the two channels' candidates, with each channel's rank and raw score."""
    candidates: dict[str, Candidate] = {}
    for rank, (memory_id, cosine, vector) in enumerate(dense, start=1):
        c = candidates.setdefault(memory_id, Candidate(memory_id))
        c.dense_rank, c.cosine, c.vector = rank, cosine, vector
    for rank, hit in enumerate(keyword, start=1):
        c = candidates.setdefault(hit.memory_id, Candidate(hit.memory_id))
        c.keyword_rank, c.bm25, c.keyword_relevance = rank, hit.score, hit.relevance
    return candidates


def similarities(candidates: list[Candidate], *, dense_weight: float = DENSE_WEIGHT) -> dict[str, float]:
    """Each candidate's closeness to the query in [0, 1], relative to the other candidates: a
    convex combination of its margin (its cosine over the query's baseline for the memory's
    script, ``_relevance``), min-max normalised over the candidates, and its BM25 score over
    the best one.

    Measured on LoCoMo (bench/RESULTS.md), this beats reciprocal rank fusion by about six
    points of recall@10: ranks alone throw away how much better the best matches are. Within
    one script the margin orders as the cosine does; across scripts it lifts an English
    memory above Chinese ones that only share the question's language (issue 15). A channel
    that has nothing (no keyword hit, or no dense channel) contributes nothing.
    """
    margins = [c.margin for c in candidates if c.margin is not None]
    low, high = (min(margins), max(margins)) if margins else (0.0, 0.0)
    best_bm25 = max((c.bm25 for c in candidates), default=0.0)
    has_dense, has_keyword = bool(margins), best_bm25 > 0
    weight = dense_weight if has_dense and has_keyword else (1.0 if has_dense else 0.0)
    out = {}
    for c in candidates:
        dense = 0.0 if c.margin is None else (1.0 if high == low else (c.margin - low) / (high - low))
        keyword = c.bm25 / best_bm25 if has_keyword else 0.0
        out[c.memory_id] = weight * dense + (1 - weight) * keyword
    return out


def unit_sum(vectors: list[list[float]]) -> list[float]:
    """The sum of ``vectors`` each made unit length, made unit length."""
    matrix = np.asarray(vectors, dtype=np.float64)
    total = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).sum(axis=0)
    out: list[float] = (total / (np.linalg.norm(total) or 1.0)).tolist()
    return out


Tie = Callable[[Memory], Any]


def by_id(m: Memory) -> str:
    """The tie-break of a caller that may see every field."""
    return m.id


def once_per_memory(tie: Tie) -> Tie:
    """``tie``, remembered by memory id for one recall (the guard's serializes the memory)."""
    known: dict[str, Any] = {}

    def remembered(m: Memory) -> Any:
        if m.id not in known:
            known[m.id] = tie(m)
        return known[m.id]
    return remembered


Item = TypeVar("Item")


def tie_sorted(items: Iterable[Item], key: Callable[[Item], Any], then: Callable[[Item], Any]) -> list[Item]:
    """``items`` sorted by ``(key(item), then(item))``, with ``then`` asked only of items whose
    ``key`` equals another's: the guard's tie-break serialises what the caller receives of a
    memory (tens of µs), and scores rarely tie, so a Recall asks it of a few memories, not ~75."""
    ordered = sorted(items, key=key)
    out: list[Item] = []
    for _, group in itertools.groupby(ordered, key=key):
        equal = list(group)
        out.extend(sorted(equal, key=then) if len(equal) > 1 else equal)
    return out


def _tied(tie: Tie, kept: dict[str, Memory], attribute: str, c: Candidate) -> tuple[Any, int]:
    return tie(kept[c.memory_id]), getattr(c, attribute)


def renumber(candidates: dict[str, Candidate], kept: dict[str, Memory], tie: Tie = by_id) -> None:
    """Each channel's ranks counted among the ``kept`` candidates only (those the exact
    re-read returned): a candidate dropped there must not show up as a gap in the ranks.
    Candidates a channel scored equal (the same text and key) are ranked by ``tie``."""
    raw: dict[str, Callable[[Candidate], float]] = {"dense_rank": lambda c: -(c.cosine or 0.0),
                                                    "keyword_rank": lambda c: -c.bm25}
    for attribute in ("dense_rank", "keyword_rank"):
        ranked = tie_sorted((c for i, c in candidates.items() if i in kept and getattr(c, attribute)),
                            raw[attribute], functools.partial(_tied, tie, kept, attribute))
        for c in candidates.values():
            setattr(c, attribute, 0)
        for rank, c in enumerate(ranked, start=1):
            setattr(c, attribute, rank)


def mmr(items: list[tuple[Memory, ScoreParts, list[float] | None]], limit: int,
        lam: float = MMR_LAMBDA, *, by_text: bool = True) -> list[tuple[Memory, ScoreParts]]:
    """The first ``limit`` items in maximal-marginal-relevance order (``diverse``)."""
    return list(itertools.islice(diverse(items, lam, by_text=by_text), limit))


def diverse(items: list[tuple[Memory, ScoreParts, list[float] | None]], lam: float = MMR_LAMBDA, *,
            by_text: bool = True) -> Iterator[tuple[Memory, ScoreParts]]:
    """Maximal marginal relevance: prefer high scores, penalise closeness to what is chosen.

    Near-duplicates (cosine above DUPLICATE_COSINE with a chosen memory) sink below distinct
    memories. Without vectors, identical texts count as duplicates. Lazy: each item taken
    costs one pass over the candidates, so a caller that stops at top_k pays for top_k picks.
    """
    n = len(items)
    if n <= 1:  # nothing to be diverse from (a keyed lookup of one memory, say)
        yield from ((m, parts) for m, parts, _ in items)
        return
    dim = next((len(v) for _, _, v in items if v is not None), 0)
    has_vector = np.array([v is not None and len(v) == dim for _, _, v in items], dtype=bool)
    matrix = np.zeros((n, max(dim, 1)), dtype=np.float32)
    if has_vector.any():
        matrix[has_vector] = np.array([v for (_, _, v), ok in zip(items, has_vector, strict=True) if ok],
                                      dtype=np.float32)
    # Without ``by_text`` (the caller's view hides text) every item counts as distinct.
    texts = ([m.text.strip().casefold() if by_text else str(i) for i, (m, _, _) in enumerate(items)]
             if not has_vector.all() else [])

    def closeness(chosen: int) -> np.ndarray:
        # Closeness counts only near-duplicates: the embedding model puts unrelated texts at a
        # cosine of 0.75-0.85 already, so raw cosines would barely separate a paraphrase from a
        # distinct memory. Above DUPLICATE_COSINE the penalty rises to its full weight.
        row: np.ndarray = np.clip((matrix @ matrix[chosen] - DUPLICATE_COSINE) / (1 - DUPLICATE_COSINE), 0.0, 1.0)
        if texts:
            by_words = np.array([1.0 if t == texts[chosen] else 0.0 for t in texts], dtype=np.float32)
            compare_text = ~(has_vector & has_vector[chosen])
            row = np.where(compare_text, by_words, row)
        return row

    relevance = np.array([parts.score for _, parts, _ in items], dtype=np.float32)
    nearest_chosen = np.zeros(n, dtype=np.float32)
    remaining = np.ones(n, dtype=bool)
    for _ in range(n):
        value = lam * relevance - (1 - lam) * nearest_chosen
        value[~remaining] = -np.inf
        best = int(np.argmax(value))
        remaining[best] = False
        nearest_chosen = np.maximum(nearest_chosen, closeness(best))
        yield items[best][0], items[best][1]

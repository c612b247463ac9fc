"""The ranking pieces of recall, in process: fusion of the two channels and MMR."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from memoryd.domain import Category, Memory, Scope, ScoreParts, SourceKind, Stability, Status
from memoryd.server.recall._ranking import Candidate, mmr, similarities

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def memory(text: str) -> Memory:
    return Memory(id=text, subject="alice", scope=Scope.SUBJECT, session_id="", category=Category.EVENT, key="",
                  text=text, data=None, importance=0.5, confidence=1.0, stability=Stability.STABLE, pinned=False,
                  tags=(), valid_from=None, valid_until=None, agent="a", source_kind=SourceKind.INPUT,
                  source_turn_ids=(), version=1, status=Status.ACTIVE, created_at=NOW, updated_at=NOW)


def unit(*values: float) -> list[float]:
    v = np.array(values, dtype=float)
    return (v / np.linalg.norm(v)).tolist()


def test_similarity_mixes_normalised_margin_and_bm25_evenly():
    sims = similarities([
        Candidate("both-best", margin=0.50, bm25=8.0),
        Candidate("dense-only", margin=0.35),
        Candidate("keyword-only", bm25=4.0),
        Candidate("worst-dense", margin=0.20, bm25=2.0),
    ])
    assert sims["both-best"] == pytest.approx(1.0)
    assert sims["dense-only"] == pytest.approx(0.25)
    assert sims["keyword-only"] == pytest.approx(0.25)
    assert sims["worst-dense"] == pytest.approx(0.125)


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        ([Candidate("a", bm25=3.0), Candidate("b", bm25=1.5)], {"a": 1.0, "b": 0.5}),
        ([Candidate("a", margin=0.4), Candidate("b", margin=0.1)], {"a": 1.0, "b": 0.0}),
    ],
    ids=["keywords-only-when-dense-is-down", "dense-only-when-no-keyword-hits"],
)
def test_a_missing_channel_leaves_the_other_with_full_weight(candidates, expected):
    assert similarities(candidates) == pytest.approx(expected)


def test_mmr_lets_a_distinct_memory_past_near_duplicates():
    tea = unit(1, 0, 0)
    items = [
        (memory("loves green tea"), ScoreParts(0.65, 0.65 / 0.65, 0, 0), tea),
        (memory("really loves green tea"), ScoreParts(0.62, 0, 0, 0), unit(1, 0.05, 0)),
        (memory("loves green tea a lot"), ScoreParts(0.61, 0, 0, 0), unit(1, 0, 0.05)),
        (memory("allergic to peanuts"), ScoreParts(0.40, 0, 0, 0), unit(0.8, 0.6, 0)),
    ]
    ranked_by_score = [m.text for m, _, _ in items[:2]]
    assert ranked_by_score == ["loves green tea", "really loves green tea"]

    chosen = [m.text for m, _ in mmr(items, 2)]

    assert chosen == ["loves green tea", "allergic to peanuts"]


def test_mmr_keeps_the_score_order_of_distinct_memories():
    items = [(memory(f"m{i}"), ScoreParts(1.0 - i / 10, 0, 0, 0), unit(*(1.0 if j == i else 0.0 for j in range(4))))
             for i in range(4)]
    assert [m.text for m, _ in mmr(items, 4)] == ["m0", "m1", "m2", "m3"]


def test_mmr_without_vectors_treats_identical_texts_as_duplicates():
    items = [(memory("same"), ScoreParts(0.9, 0, 0, 0), None), (memory(" SAME "), ScoreParts(0.8, 0, 0, 0), None),
             (memory("other"), ScoreParts(0.5, 0, 0, 0), None)]
    assert [m.text for m, _ in mmr(items, 2)] == ["same", "other"]

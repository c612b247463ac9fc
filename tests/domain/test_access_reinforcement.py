"""Access reinforcement: recalling a memory refreshes its recency (scoring is pure, so the
clock here is the test's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memoryd.domain import last_use, recency_at

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def test_recency_counts_from_the_last_recall_when_it_is_later_than_the_last_change():
    changed = NOW - timedelta(days=60)
    assert recency_at(NOW, changed, None, 30.0) == pytest.approx(0.25)
    assert recency_at(NOW, changed, NOW - timedelta(days=30), 30.0) == pytest.approx(0.5)
    assert recency_at(NOW, changed, NOW, 30.0) == pytest.approx(1.0)


def test_an_older_recall_does_not_age_a_recent_change():
    assert last_use(NOW, NOW - timedelta(days=5)) == NOW
    assert recency_at(NOW, NOW, NOW - timedelta(days=5), 30.0) == pytest.approx(1.0)


@pytest.mark.parametrize("half_life, pinned", [(None, False), (30.0, True)], ids=["never-decays", "pinned"])
def test_pinned_memories_and_categories_without_half_life_never_decay(half_life, pinned):
    assert recency_at(NOW, NOW - timedelta(days=3650), None, half_life, pinned) == 1.0

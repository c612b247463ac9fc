"""Consolidation's pure parts: grouping fragments by topic, and reading the model's answer."""

from __future__ import annotations

import json
import math

import pytest

from memoryd.domain import DEFAULT_SIMILARITY, Category, topic_groups
from memoryd.server.ingest._chat import answer_document
from memoryd.server.ingest._chat_errors import ExtractionParseError
from memoryd.server.ingest._consolidation_llm import parse_profile as parse_document


def at(degrees: float) -> list[float]:
    """A 2-d vector at ``degrees``; cos(a - b) is the cosine of two of them."""
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_the_default_threshold_is_the_documented_measured_value():
    assert DEFAULT_SIMILARITY == 0.88


def test_close_vectors_group_together_and_far_ones_apart():
    # cos 10° ≈ 0.985, cos 90° = 0
    vectors = [at(0), at(90), at(5), at(95), at(10), at(200)]
    assert topic_groups(vectors, 0.9) == [[0, 2, 4], [1, 3], [5]]


def test_a_fragment_joins_only_if_close_to_every_member_so_topics_do_not_drift():
    # 0 → 20 → 40: each step is cos 20° ≈ 0.94, but 0 and 40 are only cos 40° ≈ 0.77 apart.
    assert topic_groups([at(0), at(20), at(40)], 0.9) == [[0, 1], [2]]


def test_a_fragment_close_to_two_groups_joins_the_closer_one():
    # Groups {0°} and {30°} (cos 30° ≈ 0.87 < 0.9); 20° is closer to 30° (cos 10°) than to 0° (cos 20°).
    assert topic_groups([at(0), at(30), at(20)], 0.9) == [[0], [1, 2]]


def test_length_does_not_matter_only_direction():
    assert topic_groups([[1.0, 0.0], [5.0, 0.1], [0.0, 0.0]], 0.9) == [[0, 1], [2]]


def test_nothing_to_group():
    assert topic_groups([], 0.9) == []


def answer(content: object) -> bytes:
    text = content if isinstance(content, str) else json.dumps(content)
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()


def parse_profile(raw: bytes):
    return parse_document(answer_document(raw))


PROFILE = {"skip": False, "category": "preference", "key": "exercise_habit", "text": "Alice runs most mornings.",
           "importance": 0.7, "confidence": 0.9}


def test_a_profile_answer_is_read():
    item = parse_profile(answer(PROFILE))
    assert item is not None
    assert (item.category, item.key, item.text, item.importance, item.confidence) == (
        Category.PREFERENCE, "exercise_habit", "Alice runs most mornings.", 0.7, 0.9)


@pytest.mark.parametrize("content", [{"skip": True}, {**PROFILE, "skip": True, "category": ""}],
                         ids=["bare", "with-empty-fields"])
def test_a_skip_is_none(content):
    assert parse_profile(answer(content)) is None


@pytest.mark.parametrize("content", [
    "not json",
    ["a list"],
    {**PROFILE, "category": "event"},
    {**PROFILE, "category": "mood"},
    {**PROFILE, "key": ""},
    {**PROFILE, "text": "  "},
    {**PROFILE, "confidence": 1.5},
    {**PROFILE, "skip": "no"},
], ids=["not-json", "not-object", "episodic", "unknown-category", "no-key", "no-text", "confidence-out-of-range",
        "skip-not-bool"])
def test_anything_else_is_a_parse_failure(content):
    with pytest.raises(ExtractionParseError):
        parse_profile(answer(content))

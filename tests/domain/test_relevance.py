"""Absolute relevance (``memoryd.server.recall._relevance``): the baseline per script and the mix."""

from __future__ import annotations

import numpy as np
import pytest

from memoryd.domain import cjk_share
from memoryd.domain import MIN_RELEVANCE
from memoryd.server.recall._relevance import (
    BACKGROUND,
    BACKGROUND_LATIN,
    CHATTER_SLACK,
    CONVERSATION_AT_MINIMUM,
    CONVERSATION_SPAN,
    CROSS_SCRIPT_SCALE,
    REFERENCE,
    SAME_SCRIPT_SCALE,
    Baseline,
    QueryBaseline,
    relevance,
)


@pytest.mark.parametrize(("text", "share"), [
    ("Prefers oolong tea", 0.0), ("喜欢喝茉莉花茶", 1.0), ("Ethan 的 piano 比赛", 3 / 13), ("42 / !", 0.0), ("", 0.0),
    ("ひらがなとカタカナ", 1.0), ("한국어", 1.0),
])
def test_cjk_share_counts_letters_only(text: str, share: float) -> None:
    assert cjk_share(text) == pytest.approx(share)


def test_the_baseline_is_the_mean_cosine_to_the_background_of_each_script() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(len(REFERENCE), 8))
    query = rng.normal(size=8)
    baseline = Baseline.of(vectors.tolist()).of_query(query.tolist(), 0.0)

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit @ (query / np.linalg.norm(query))
    latin, background = len(BACKGROUND_LATIN), len(BACKGROUND)
    assert baseline.latin == pytest.approx(cosines[:latin].mean())
    assert baseline.cjk == pytest.approx(cosines[latin:background].mean())
    # Small talk: the closest of its sentences, as a margin over the query's own script's baseline.
    assert baseline.chatter == pytest.approx(baseline.margin(cosines[background:].max(), 0.0))


def test_a_reference_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ValueError):
        Baseline.of([[1.0, 0.0]] * (len(REFERENCE) - 1))


def test_the_margin_is_measured_against_the_memorys_script() -> None:
    baseline = QueryBaseline(latin=0.76, cjk=0.84)
    # An English memory at 0.80 is further above its baseline than a Chinese one at 0.85.
    assert baseline.margin(0.80, 0.0) == pytest.approx(0.04 / 0.24)
    assert baseline.margin(0.85, 1.0) == pytest.approx(0.01 / 0.16)
    assert baseline.margin(0.80, 0.0) > baseline.margin(0.85, 1.0)
    assert baseline.margin(0.80, 0.5) == pytest.approx((0.80 - 0.80) / 0.20)


def test_relevance_mixes_margin_and_keywords_in_one_script() -> None:
    assert relevance(SAME_SCRIPT_SCALE, 0.0, 0.0) == pytest.approx(0.5)
    assert relevance(SAME_SCRIPT_SCALE, 1.0, 0.0) == pytest.approx(1.0)
    assert relevance(SAME_SCRIPT_SCALE / 2, 0.5, 0.0) == pytest.approx(0.5)
    assert relevance(-0.2, 0.0, 0.0) == 0.0 and relevance(5.0, 1.0, 0.0) == 1.0


def test_across_scripts_the_margin_decides_alone_on_its_own_scale() -> None:
    # Words cannot match across languages: a keyword score there is ignored, not counted as 0.
    assert relevance(CROSS_SCRIPT_SCALE, 0.0, 1.0) == pytest.approx(1.0)
    assert relevance(CROSS_SCRIPT_SCALE / 2, 0.9, 1.0) == pytest.approx(0.5)


def test_without_the_dense_channel_the_keywords_decide() -> None:
    assert relevance(None, 0.42, 0.0) == pytest.approx(0.42)
    assert relevance(None, 0.0, 1.0) == 0.0


def test_a_question_more_like_small_talk_than_like_the_memory_gets_nothing_from_its_cosine() -> None:
    margin = SAME_SCRIPT_SCALE / 2
    assert relevance(margin, 0.0, 0.0, chatter=margin + CHATTER_SLACK - 0.01) == pytest.approx(0.25)
    assert relevance(margin, 0.0, 0.0, chatter=margin + CHATTER_SLACK + 0.01) == 0.0
    assert relevance(margin, 0.6, 0.0, chatter=1.0) == pytest.approx(0.3)  # its keywords still count


@pytest.mark.parametrize(("chinese", "crossing"), [(False, False), (True, False), (False, True), (True, True)])
def test_a_conversation_is_judged_against_its_closeness_to_small_talk(chinese: bool, crossing: bool) -> None:
    at = CONVERSATION_AT_MINIMUM[chinese, crossing]
    share, cross = float(chinese), float(crossing)
    # At the point chosen for its scripts, exactly the default minimum; the keywords do not count.
    assert relevance(0.1 + at, 0.0, cross, chatter=0.1, conversation=True, query_share=share) == \
        pytest.approx(MIN_RELEVANCE)
    assert relevance(0.1 + at, 1.0, cross, chatter=0.1, conversation=True, query_share=share) == \
        pytest.approx(MIN_RELEVANCE)
    # CONVERSATION_SPAN further toward the memory is as far again above it, and it stays in [0, 1].
    assert relevance(0.1 + at + CONVERSATION_SPAN / 3, 0.0, cross, chatter=0.1, conversation=True,
                     query_share=share) == pytest.approx(MIN_RELEVANCE + 1 / 3)
    assert relevance(at - 1.0, 0.0, cross, chatter=0.0, conversation=True, query_share=share) == 0.0
    assert relevance(at + 1.0, 0.0, cross, chatter=0.0, conversation=True, query_share=share) == 1.0


def test_chinese_conversations_need_more_than_english_ones() -> None:
    # The same margins: an English conversation passes the default minimum, a Chinese one not.
    english = relevance(0.1, 0.0, 0.0, chatter=0.2, conversation=True, query_share=0.0)
    chinese = relevance(0.1, 0.0, 0.0, chatter=0.2, conversation=True, query_share=1.0)
    assert english > MIN_RELEVANCE > chinese

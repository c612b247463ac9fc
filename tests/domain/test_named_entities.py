"""The entities a query names (``domain.named_spans``), the query without them
(``domain.without_names``) and what naming one adds to a score (``domain.lifted``)."""

from __future__ import annotations

import pytest

from memoryd.domain import ScoreParts, ScoreWeights, entity_tag, lifted, named_spans, without_names
from memoryd.domain._entities import MAX_NAMES


def test_a_name_proposes_the_tag_its_words_give_with_where_it_is():
    query = "What do Melanie's kids like?"
    spans = named_spans(query)

    assert spans["entity:melanie"] == [(8, 15)]
    assert query[8:15] == "Melanie" and entity_tag("Melanie") == "entity:melanie"
    assert "entity:kids" in spans and "entity:melanie-s" not in spans  # possessive: not a name


def test_names_of_several_words_and_with_accents_and_dots_match_their_tags():
    assert "entity:ana-lima" in named_spans("Where did Ana Lima move?")
    assert "entity:zoe" in named_spans("Is Zoë coming?")
    assert "entity:dr.-seuss" in named_spans("Which book by Dr. Seuss?")
    # At most three Latin words a name.
    assert "entity:where-did-ana-lima" not in named_spans("Where did Ana Lima move?")


def test_cjk_names_are_runs_of_characters_written_together():
    spans = named_spans("张伟喜欢什么？")
    assert spans["entity:张伟"] == [(0, 2)] and "entity:张伟喜欢什么" in spans
    # Characters apart are no name, nor a run mixing CJK and Latin words.
    assert "entity:张伟" not in named_spans("张 伟")
    assert not any(":" in tag[7:] for tag in named_spans("Ana张伟"))


def test_a_query_proposes_at_most_max_names():
    assert len(named_spans(" ".join(f"w{i}" for i in range(400)))) == MAX_NAMES


def test_the_query_without_names_drops_the_possessive_and_keeps_the_rest():
    query = "What do Melanie's kids like?"
    assert without_names(query, named_spans(query)["entity:melanie"]) == "What do kids like?"
    # Overlapping spans (a name inside a longer one) are taken out once.
    query = "Where did Ana Lima move?"
    spans = named_spans(query)
    assert without_names(query, spans["entity:ana"] + spans["entity:ana-lima"]) == "Where did move?"
    # A query that is only names stays as it is: there would be nothing left to embed.
    assert without_names("Melanie", [(0, 7)]) == "Melanie"
    assert without_names("Melanie's?", [(0, 7)]) == "Melanie's?"
    assert without_names("张伟喜欢什么", [(0, 2)]) == "喜欢什么"
    assert without_names("no names", []) == "no names"


def test_a_lift_adds_to_similarity_in_the_score_and_a_credit_to_relevance_up_to_one():
    weights = ScoreWeights(similarity=0.65, recency=0.25, importance=0.1, pinned_boost=0.2)
    parts = ScoreParts(score=0.5, similarity=0.4, recency=1.0, importance=0.0, relevance=0.35)

    up = lifted(parts, weights, 0.3, 0.1, "entity:ana")

    assert up.score == pytest.approx(0.5 + 0.65 * 0.3)
    assert (up.similarity, up.entity_lift, up.named_entity) == (0.4, 0.3, "entity:ana")
    assert up.relevance == pytest.approx(0.45)
    assert lifted(ScoreParts(0.5, 0.4, 1.0, 0.0, relevance=0.95), weights, 0.3, 0.1, "entity:ana").relevance == 1.0

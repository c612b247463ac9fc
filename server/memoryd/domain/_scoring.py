"""Recall scoring: the parts of a score, decay, token estimates and the budget cut."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import NamedTuple, TypeVar

T = TypeVar("T")

# CJK ideographs, kana and hangul: roughly one token each (other text about four characters a
# token: an estimate, deliberately on the generous side), and the script recall's relevance
# tells apart from the rest (``cjk_share``).
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass(frozen=True)
class ScoreWeights:
    similarity: float
    recency: float
    importance: float
    pinned_boost: float


@dataclass(frozen=True)
class ScoreMask:
    """Which stored fields may shape a score, an order or a budget: a field the caller's view
    hides must not, or the answer would tell what it holds (``memoryd.server.guard``)."""

    importance: bool = True
    pinned: bool = True
    recency: bool = True  # updated_at and the category's half-life
    access: bool = True  # last_access_at: recalls by anyone refresh recency
    text: bool = True  # de-duplication by text and the token budget
    turns: bool = True  # the source turn, creation, category, scope and session: neighbouring turns
    entities: bool = True  # tags: the entities a query names (``entity:`` tags) lift and are matched


@dataclass(frozen=True)
class ScoreParts:
    score: float
    similarity: float
    recency: float
    importance: float
    keyword_rank: int = 0
    dense_rank: int = 0
    relevance: float = 1.0  # absolute, comparable between queries (1: an exact key match)
    cosine: float | None = None  # to the query's embedding; None without the dense channel
    keyword_relevance: float = 0.0  # KeywordHit.relevance; 0 without a keyword match
    neighbour_of: str = ""  # the recalled memory it was written next to, if ranked for that
    entity_lift: float = 0.0  # added to similarity in the score when the query names named_entity
    named_entity: str = ""  # the memory's ``entity:`` tag the query names, if any


class KeywordHit(NamedTuple):
    """A keyword channel hit: its BM25 score, and that score as a share of the query's whole
    term weight in [0, 1] (comparable between queries and collections)."""

    memory_id: str
    score: float
    relevance: float


def recency(age_days: float, half_life_days: float | None, pinned: bool = False) -> float:
    """0.5^(age / half_life); 1 for categories that never decay and for pinned memories."""
    if pinned or half_life_days is None:
        return 1.0
    return math.pow(0.5, max(age_days, 0.0) / half_life_days)


def last_use(updated_at: datetime, last_access_at: datetime | None) -> datetime:
    """When a memory was last changed or recalled, whichever is later: recalling a memory
    refreshes its recency (access reinforcement)."""
    return updated_at if last_access_at is None else max(updated_at, last_access_at)


def recency_at(now: datetime, updated_at: datetime, last_access_at: datetime | None, half_life_days: float | None,
               pinned: bool = False) -> float:
    """``recency`` of a memory at ``now``, its age counted from its last use."""
    age_days = (now - last_use(updated_at, last_access_at)).total_seconds() / 86400
    return recency(age_days, half_life_days, pinned)


def score(weights: ScoreWeights, similarity: float, recency_part: float, importance: float, pinned: bool,
          keyword_rank: int = 0, dense_rank: int = 0, *, relevance: float = 1.0, cosine: float | None = None,
          keyword_relevance: float = 0.0) -> ScoreParts:
    total = weights.similarity * similarity + weights.recency * recency_part + weights.importance * importance
    if pinned:
        total += weights.pinned_boost
    return ScoreParts(total, similarity, recency_part, importance, keyword_rank, dense_rank, relevance, cosine,
                      keyword_relevance)


def lifted(parts: ScoreParts, weights: ScoreWeights, lift: float, credit: float, tag: str) -> ScoreParts:
    """``parts`` of a memory tagged with an entity the query names (``tag``): ``lift`` is
    added to its similarity in the score, and shown beside it (similarity stays in [0, 1]);
    ``credit`` is added to its relevance, up to 1."""
    return replace(parts, score=parts.score + weights.similarity * lift, entity_lift=lift, named_entity=tag,
                   relevance=min(1.0, parts.relevance + credit))


def estimate_tokens(text: str) -> int:
    wide = len(_WIDE.findall(text))
    return wide + math.ceil((len(text) - wide) / 4)


def cjk_share(text: str) -> float:
    """The share of a text's letters that are CJK ideographs, kana or hangul (0 without letters)."""
    if text.isascii():  # most memories: no need to look at each character
        return 0.0
    letters = sum(map(str.isalpha, text))
    return len(_WIDE.findall(text)) / letters if letters else 0.0


def fit_budget(items: Iterable[T], limit: int, budget: int, text_of: Callable[[T], str]) -> list[T]:
    """At most ``limit`` items in rank order whose estimated tokens fit ``budget`` (0: no budget).

    An item too long for what is left is skipped, so shorter ones ranked below it can still
    fill the answer up to ``limit``.
    """
    kept: list[T] = []
    used = 0
    if limit <= 0:
        return kept
    for item in items:  # may be lazy (recall's MMR order): nothing past the last kept is drawn
        cost = estimate_tokens(text_of(item)) if budget > 0 else 0
        if used + cost <= budget or budget <= 0:
            kept.append(item)
            used += cost
            if len(kept) == limit:
                break
    return kept

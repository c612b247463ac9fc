"""Absolute relevance of a recalled memory, comparable between queries, languages and tenants.

A cosine alone says little: with the bundled multilingual-e5-small, unrelated texts sit at
0.75–0.85 and related ones at 0.85–0.9, and a Chinese question is closer to *any* Chinese
memory (~0.84) than to the English memory that answers it (~0.80). So a cosine is measured
against what the model gives the same query for unrelated text of the memory's script: a
fixed background of everyday sentences in English and in Chinese, embedded once per model.
Its mean cosine to the query, per script, is the query's baseline, and

    margin = (cosine − baseline) / (1 − baseline)

with the baseline mixed by the memory's share of CJK characters. Within one script the margin
is an affine function of the cosine, so it orders a query's candidates as the cosine does;
across scripts it removes the model's pull toward the query's own language.

``relevance`` in [0, 1] mixes the margin with the keyword channel's share of the query's
term weight (``KeywordHit.relevance``), weighting the keywords less the more the memory's
script differs from the query's — words cannot match across languages, so there the margin
alone decides, on its own scale. The constants were chosen on LoCoMo and on the bilingual
set of ``memoryd bench bilingual`` (bench/RESULTS.md, issue 15).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The margin counted as fully relevant, for a memory in the query's script and in the other
# one (cross-language margins run lower with the same meaning).
SAME_SCRIPT_SCALE = 0.6
CROSS_SCRIPT_SCALE = 0.35
# The keyword channel's share of a same-script relevance.
KEYWORD_SHARE = 0.5

# Everyday sentences about nobody in particular: what a query's cosine to unrelated text is.
BACKGROUND_LATIN = (
    "Went to the supermarket on Saturday morning", "The meeting was moved to Thursday afternoon",
    "Bought a new pair of running shoes", "The train was delayed by twenty minutes",
    "Called the plumber about the leaking kitchen tap", "Finished reading a book about Roman history",
    "Her brother is studying medicine in Toronto", "Planted tomatoes and basil on the balcony",
    "Paid the electricity bill online", "Watched a documentary about whales",
    "The printer at the office ran out of toner", "Had lunch with an old school friend",
    "Signed up for a pottery class in the spring", "The car needs new tyres before winter",
    "Prefers to work from home on Fridays", "Lost the spare key to the garage",
    "Sent a birthday card to his aunt", "The neighbours are renovating their kitchen",
    "Is learning to play the violin", "Booked a table for four at an Italian restaurant",
    "The laptop battery drains quickly", "Walked the dog in the park after dinner",
    "Wants to visit Iceland next summer", "Keeps a journal every evening",
)
BACKGROUND_CJK = (
    "周六上午去超市买了东西", "会议改到了周四下午", "买了一双新的跑步鞋", "火车晚点了二十分钟",
    "给水管工打电话说厨房水龙头漏水", "读完了一本关于罗马历史的书", "她哥哥在多伦多读医学",
    "在阳台上种了番茄和罗勒", "在网上交了电费", "看了一部关于鲸鱼的纪录片", "办公室的打印机没墨了",
    "和老同学一起吃了午饭", "报名了春季的陶艺课", "冬天之前车子要换新轮胎", "周五喜欢在家办公",
    "车库的备用钥匙丢了", "给姑姑寄了一张生日卡", "邻居家在装修厨房", "正在学拉小提琴",
    "在一家意大利餐厅订了四个人的位子", "笔记本电脑的电池掉电很快", "晚饭后在公园遛狗", "明年夏天想去冰岛",
    "每天晚上写日记",
)
BACKGROUND = BACKGROUND_LATIN + BACKGROUND_CJK


@dataclass(frozen=True)
class Baseline:
    """One model's background vectors, by script."""

    latin: np.ndarray
    cjk: np.ndarray

    @classmethod
    def of(cls, vectors: Sequence[Sequence[float]]) -> Baseline:
        """From the vectors of ``BACKGROUND``, in its order."""
        matrix = np.asarray(vectors, dtype=np.float64)
        if matrix.shape[0] != len(BACKGROUND):
            raise ValueError(f"expected {len(BACKGROUND)} background vectors, got {matrix.shape[0]}")
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        return cls(matrix[:len(BACKGROUND_LATIN)], matrix[len(BACKGROUND_LATIN):])

    def of_query(self, vector: Sequence[float]) -> QueryBaseline:
        q = np.asarray(vector, dtype=np.float64)
        q = q / (np.linalg.norm(q) or 1.0)
        return QueryBaseline(float((self.latin @ q).mean()), float((self.cjk @ q).mean()))


@dataclass(frozen=True)
class QueryBaseline:
    """A query's mean cosine to unrelated text, per script."""

    latin: float
    cjk: float

    def margin(self, cosine: float, share: float) -> float:
        """How far ``cosine`` is above the baseline of a text with CJK share ``share``, as a
        fraction of the way from the baseline to 1."""
        base = share * self.cjk + (1 - share) * self.latin
        return (cosine - base) / (1 - base) if base < 1 else 0.0


def relevance(margin: float | None, keyword_relevance: float, crossing: float) -> float:
    """Absolute relevance in [0, 1]. ``crossing`` is how far the memory's script is from the
    query's (the difference of their CJK shares, 0 to 1); ``margin`` is None without the dense
    channel, and then the keyword channel decides alone."""
    if margin is None:
        return keyword_relevance
    scale = SAME_SCRIPT_SCALE * (1 - crossing) + CROSS_SCRIPT_SCALE * crossing
    dense = min(1.0, max(0.0, margin / scale))
    keyword_share = KEYWORD_SHARE * (1 - crossing)
    return (1 - keyword_share) * dense + keyword_share * keyword_relevance

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
from dataclasses import dataclass, replace

import numpy as np

from memoryd.domain import MIN_RELEVANCE

# The margin counted as fully relevant, for a memory in the query's script and in the other
# one (cross-language margins run lower with the same meaning).
SAME_SCRIPT_SCALE = 0.6
CROSS_SCRIPT_SCALE = 0.35
# The keyword channel's share of a same-script relevance.
KEYWORD_SHARE = 0.5
# A conversation's relevance (``relevance``) is its margin toward a memory less its margin
# toward small talk, on a scale of CONVERSATION_SPAN that puts the default minimum (MIN_RELEVANCE) at
# CONVERSATION_AT_MINIMUM, by the query's script and the memory's: Chinese small talk is closer
# to Chinese memories (up to ~0.03) than English small talk is to English ones (up to ~-0.15),
# and MADial's Chinese dialogues are closer to their best memory than its English ones (3rd
# percentile 0.05 against -0.16); across languages an English dialogue's best Chinese memory
# is furthest (-0.28; a Chinese one's best English memory -0.09), and English small talk
# stays below -0.32 toward Chinese memories. Chosen on MADial-Bench and bench/madial/small_talk.json
# (bench/RESULTS.md, issue 40).
CONVERSATION_AT_MINIMUM = {  # (query in Chinese, memory in the other script) → the difference
    (False, False): -0.2, (True, False): 0.0, (False, True): -0.3, (True, True): -0.12,
}
CONVERSATION_SPAN = 0.6
# Small talk: a query whose margin over the everyday background is at least this much
# higher toward ``CHATTER`` than toward a memory is talk about nothing, not about that memory
# ("Hi! How are you?" is ~0.3 more like chatter than like any memory; MADial's dialogues
# 0.1 less to 0.2 more like their best memory than like chatter).
CHATTER_SLACK = 0.2

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
# Small talk, in both languages: what a query that asks for nothing looks like.
CHATTER = (
    "Hello!", "Hi there, how are you?", "Good morning!", "Good night, see you tomorrow.", "Thanks a lot!",
    "Thank you, that's all.", "OK, sounds good.", "Bye!", "Haha, that's funny.", "Yes.", "No, never mind.",
    "Sure, no problem.", "I'm fine, thanks. And you?", "Nice to meet you.", "Sorry, I didn't catch that.",
    "Are you there?", "Cool.", "Got it.",
    "你好！", "嗨，最近怎么样？", "早上好！", "晚安，明天见。", "非常感谢！", "谢谢，就这些。", "好的，没问题。", "再见！",
    "哈哈，真好笑。", "是的。", "不用了，没事。", "当然可以。", "我很好，谢谢，你呢？", "很高兴认识你。", "抱歉，我没听清。",
    "你在吗？", "好吧。", "明白了。",
)
REFERENCE = BACKGROUND + CHATTER  # what a model embeds once (``Baseline.of``)


@dataclass(frozen=True)
class Baseline:
    """One model's background and small-talk vectors."""

    latin: np.ndarray
    cjk: np.ndarray
    chatter: np.ndarray

    @classmethod
    def of(cls, vectors: Sequence[Sequence[float]]) -> Baseline:
        """From the vectors of ``REFERENCE``, in its order."""
        matrix = np.asarray(vectors, dtype=np.float64)
        if matrix.shape[0] != len(REFERENCE):
            raise ValueError(f"expected {len(REFERENCE)} reference vectors, got {matrix.shape[0]}")
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        latin, cjk = len(BACKGROUND_LATIN), len(BACKGROUND)
        return cls(matrix[:latin], matrix[latin:cjk], matrix[cjk:])

    def of_query(self, vector: Sequence[float], share: float) -> QueryBaseline:
        """``share``: the query's share of CJK characters."""
        q = np.asarray(vector, dtype=np.float64)
        q = q / (np.linalg.norm(q) or 1.0)
        known = QueryBaseline(float((self.latin @ q).mean()), float((self.cjk @ q).mean()))
        return replace(known, chatter=known.margin(float((self.chatter @ q).max()), share))


@dataclass(frozen=True)
class QueryBaseline:
    """A query's mean cosine to unrelated text, per script."""

    latin: float
    cjk: float
    chatter: float = 0.0  # the query's margin toward small talk (``CHATTER``)

    def margin(self, cosine: float, share: float) -> float:
        """How far ``cosine`` is above the baseline of a text with CJK share ``share``, as a
        fraction of the way from the baseline to 1."""
        base = share * self.cjk + (1 - share) * self.latin
        return (cosine - base) / (1 - base) if base < 1 else 0.0


def relevance(margin: float | None, keyword_relevance: float, crossing: float, *, chatter: float = 0.0,
              conversation: bool = False, query_share: float = 0.0) -> float:
    """Absolute relevance in [0, 1]. ``crossing`` is how far the memory's script is from the
    query's (the difference of their CJK shares, 0 to 1); ``margin`` is None without the dense
    channel, and then the keyword channel decides alone. ``chatter`` is the query's margin
    toward small talk. A question's relevance is its margin on an absolute scale, mixed with the
    keywords', and none from the margin when the question is CHATTER_SLACK more like small talk
    than like the memory. A conversation's (``conversation``) is how much more like the memory
    than like small talk it is, on a scale of its own (CONVERSATION_AT_MINIMUM): its many
    turns put it further from any one memory than a question, in a way its closeness to small
    talk measures, and its many words make a small share for any memory (measured on
    MADial-Bench, bench/RESULTS.md, issue 40); ``query_share`` is the query's share of CJK
    characters."""
    if margin is None:
        return keyword_relevance
    if conversation:
        same, other = ((1 - query_share) * CONVERSATION_AT_MINIMUM[False, x] + query_share * CONVERSATION_AT_MINIMUM[True, x]
                       for x in (False, True))
        at = (1 - crossing) * same + crossing * other
        return min(1.0, max(0.0, MIN_RELEVANCE + (margin - chatter - at) / CONVERSATION_SPAN))
    if margin < chatter - CHATTER_SLACK:
        margin = 0.0
    scale = SAME_SCRIPT_SCALE * (1 - crossing) + CROSS_SCRIPT_SCALE * crossing
    dense = min(1.0, max(0.0, margin / scale))
    keyword_share = KEYWORD_SHARE * (1 - crossing)
    return (1 - keyword_share) * dense + keyword_share * keyword_relevance

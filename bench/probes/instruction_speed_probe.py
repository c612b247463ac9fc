"""What ``instruction_like`` costs on 8 KiB of real dialogue (bench/RESULTS.md, issue 38 item 2).

8 KiB (UTF-8) of LoCoMo turns (English) and of MADial-Bench's Chinese lines, joined by spaces, judged as
one text; best of 5 runs of 20 calls, in ms per call. Pure CPU, no server.

    .venv/bin/python bench/probes/instruction_speed_probe.py [shared/datasets]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from pathlib import Path

from memoryd.bench.injections._filter_bench import locomo_turns, madial_turns
from memoryd.server import instruction_like


def _text(turns: Iterable[str], size: int = 8192) -> str:
    out = ""
    for turn in turns:
        if len((out + turn + " ").encode()) > size:
            break
        out += turn + " "
    return out


def _best_ms(text: str, runs: int = 5, calls: int = 20) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            instruction_like(text)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1000


def main() -> None:
    datasets = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/datasets")
    en = _text(locomo_turns(datasets / "locomo" / "locomo10.json"))
    zh = _text(madial_turns(datasets / "madial-bench", "zh"))
    print(f"en, {len(en.encode())} bytes: {_best_ms(en):.1f} ms; zh, {len(zh.encode())} bytes: {_best_ms(zh):.1f} ms")


if __name__ == "__main__":
    main()

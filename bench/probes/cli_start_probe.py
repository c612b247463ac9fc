"""Probe: what starting a `memoryd` command costs before it does anything.

`memoryd health` is the containers' health probe (the Dockerfile's HEALTHCHECK every 15 s, the
Kubernetes exec probes): each probe is a new process, so its start-up is paid again and again.
This runs each command REPEATS times as a child process and prints the median wall time and
the median CPU time (user + system) of the child. The commands do no work worth timing:
`--help`, and `health` and `write` against a port nobody listens on (they fail at once). Asserts nothing.

    .venv/bin/python bench/probes/cli_start_probe.py [--repeats 8]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = (
    ("health", "--addr", "127.0.0.1:1", "--timeout", "0.2"),
    ("recall", "--help"),
    ("lifecycle", "sweep", "--help"),
    # Builds its request (a proto<->domain enum map) before it finds nobody listening.
    ("write", "--addr", "127.0.0.1:1", "--token", "x", "--subject", "s", "--text", "x"),
)


def _run_once(command: tuple[str, ...]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memoryd.cli", *command], capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8, help="runs per command (default 8)")
    args = parser.parse_args()
    for command in COMMANDS:
        runs = [_run_once(command) for _ in range(args.repeats)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"memoryd {' '.join(command):45} wall {wall:.2f} s  cpu {cpu:.2f} s  (median of {args.repeats})")


if __name__ == "__main__":
    main()

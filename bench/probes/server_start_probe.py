"""Probe: what starting `memoryd serve` costs, to the moment it listens and in all.

A replica restart, a rolling upgrade and every server the test suite starts pay this. The probe
starts `memoryd serve` on the embedded default under one data dir (the first start, which
creates the stores, is not counted), waits for "memoryd listening", stops it with SIGTERM and
records the time to listening and the child's whole CPU time (user + system, from wait4). It
prints the medians of REPEATS starts. The embedded PostgreSQL is a process of its own, not
counted. Asserts nothing.

    .venv/bin/python bench/probes/server_start_probe.py [--repeats 6] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def _start_once(data_dir: str) -> tuple[float, float]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")},
           "MEMORYD_DATA_DIR": data_dir, "MEMORYD_ADDR": "127.0.0.1:0", "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "memoryd.cli", "serve"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if "memoryd listening" in line:
            break
    else:
        raise SystemExit(f"memoryd serve exited with {process.wait()} before listening")
    listening = time.perf_counter() - start
    process.send_signal(signal.SIGTERM)
    process.stdout.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return listening, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6, help="counted starts (default 6)")
    parser.add_argument("--data-dir", default="", help="the embedded default's data dir (default: a new temp dir)")
    args = parser.parse_args()
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="memoryd-start-probe-")
    _start_once(data_dir)  # creates the stores and keys
    runs = [_start_once(data_dir) for _ in range(args.repeats)]
    print(f"memoryd serve: listening after {statistics.median(r[0] for r in runs):.2f} s, "
          f"cpu {statistics.median(r[1] for r in runs):.2f} s in all  (median of {args.repeats}; {data_dir})")


if __name__ == "__main__":
    main()

"""`memoryd bench watch`, the short version, against the suite's server: every visible write
reaches every stream that should see it once, no hidden one reaches a stream, and the JSON says
so. Nothing is timed here: the latency is measured by `make bench-watch` (bench/RESULTS.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memoryd.bench import add_bench_commands

from ..support import ServerProcess


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def test_a_short_watch_run_delivers_every_visible_write_once_and_no_hidden_one(
        server: ServerProcess, key_file: Path, tmp_path: Path):
    out = tmp_path / "watch.json"
    args = _parser().parse_args(["bench", "watch", "--addr", server.target, "--key-file", str(key_file),
                                 "--streams", "8", "--subjects", "2", "--rate", "10", "--duration", "2",
                                 "--drain", "30", "--json", str(out), "--no-progress"])
    assert args.run(args) == 0
    report = json.loads(out.read_text())
    assert report["writes"] == 20 and report["failed_writes"] == 0
    # 8 streams: the four readers on each of two subjects. Writes 0-17 are three blocks of six
    # (every category and key kind) to one subject each: 6 + 3 + 2 + 1 deliveries a block; write 18,
    # a public fact, reaches all four readers of its subject, write 19, a private preference, one.
    assert report["expected"] == 3 * 12 + 4 + 1
    assert report["hidden_pairs"] == 20 * 4 - report["expected"]
    assert report["delivered"] == report["expected"]
    assert (report["missing"], report["duplicates"], report["leaks"]) == (0, 0, 0)
    assert report["kinds"].get("created", 0) >= report["delivered"]
    assert report["stream_errors"] == {} and report["ok"] is True

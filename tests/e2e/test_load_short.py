"""`memoryd bench load`, the short version: a bounded closed-loop run (80 % Recall, 15 % Write,
5 % MemoryView/Erase) against the suite's server, with zero errors and zero lost writes.

Nothing here is timed: speed is measured by `make bench-load` (bench/RESULTS.md); this file
only checks that the load neither fails a call nor loses an acknowledged write, and that the
lost-write check itself finds a write that was taken away behind the generator's back.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import pytest

from memoryd.bench import BenchError, LoadOptions, run_load
from memoryd.bench.load._load import MIX, OPERATIONS, _Run
from memoryd.bench import add_bench_commands
from memoryd.bench.plots import figure
from memoryd.v1 import memory_service_pb2 as svc

from ..support import ServerProcess, wait_until

SVG = "{http://www.w3.org/2000/svg}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def test_the_lost_write_check_finds_a_write_erased_behind_its_back(server: ServerProcess, key_file: Path):
    options = LoadOptions(addrs=(server.target,), key_file=key_file, tenants=1, subjects=2, seed_memories=3)
    with grpc.insecure_channel(server.target) as channel:
        run = _Run(options, [channel], key_file)
        tenant = run.tenants[0]
        run.setup_tenant(tenant, random.Random(1))
        assert run.verify() == ([], 0)
        victim = tenant.live["user-1"][1]
        tenant.client.erase(subject="user-1", ids=svc.MemoryIds(ids=[victim]), mode=svc.ERASE_MODE_PURGE, timeout=30)
        # Erased by somebody else: the generator did not erase it, so it counts as lost.
        assert run.verify() == ([(tenant.name, "user-1", victim)], 0)


class _CountingCalls(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Counts the calls made through one channel, by method."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.calls[details.method.rsplit("/", 1)[1]] += 1
        return continuation(details, request)


def test_each_measured_call_goes_to_the_server_it_is_counted_against(server: ServerProcess, key_file: Path):
    # `bench load --addr A --addr B` reports calls per address; its Writes once all went through
    # the first address while being counted against the one whose turn it was. Two channels to
    # the suite's server, each counting what really goes through it.
    options = LoadOptions(addrs=(server.target, server.target), key_file=key_file, tenants=2, subjects=2,
                          seed_memories=2)
    counters = [_CountingCalls(), _CountingCalls()]
    with grpc.insecure_channel(server.target) as first, grpc.insecure_channel(server.target) as second:
        channels = [grpc.intercept_channel(c, counter) for c, counter in zip((first, second), counters)]
        run = _Run(options, channels, key_file)
        for tenant in run.tenants:
            run.setup_tenant(tenant, random.Random(2))
        for counter in counters:
            counter.calls.clear()  # set-up goes through the first channel; what follows is measured
        run.worker(0, time.monotonic() + 3, threading.Event(), lambda: None)
        assert [sum(c.calls.values()) for c in counters] == run.calls_by_replica
        assert counters[0].calls["Write"] > 0 and counters[1].calls["Write"] > 0
        assert run.verify() == ([], 0)


def test_a_short_load_run_has_no_errors_and_loses_no_writes(server: ServerProcess, key_file: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "load.json"
    args = _parser().parse_args([
        "bench", "load", "--addr", server.target, "--key-file", str(key_file), "--tenants", "30",
        "--concurrency", "4", "--duration", "20", "--seed", "3", "--json", str(out), "--markdown", "--quiet"])
    code = args.run(args)
    printed = capsys.readouterr()
    document = json.loads(out.read_text())
    assert document["errors"] == {}, printed.out
    assert document["writes"]["lost"] == 0, document["writes"]["lost_ids"]
    assert document["erase_mismatches"] == 0
    assert code == 0
    assert document["options"]["tenants"] == 30 and document["options"]["mix"] == dict(MIX)
    calls = {op: document["operations"][op]["calls"] for op in OPERATIONS}
    assert calls["Recall"] > calls["Write"] > 0 and calls["MemoryView"] + calls["Erase"] > 0
    # Every tenant was seeded, and the run's own erases are accounted for, not counted as lost.
    assert document["writes"]["acknowledged"] >= 30 * 2 * 5
    assert "| Recall |" in printed.out and "lost writes: 0" in printed.out


def test_a_load_curve_runs_each_concurrency_on_the_server_and_plots_it(server: ServerProcess, key_file: Path,
                                                                       tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]):
    out, plot = tmp_path / "load.json", tmp_path / "load.svg"
    args = _parser().parse_args([
        "bench", "load", "--addr", server.target, "--key-file", str(key_file), "--tenants", "3",
        "--concurrency", "2,1", "--duration", "3", "--seed", "4", "--json", str(out), "--plot", str(plot), "--quiet"])
    assert args.run(args) == 0
    printed = capsys.readouterr()
    document = json.loads(out.read_text())
    assert [p["workers"] for p in document["curve"]] == [1, 2]  # in rising order, whatever the order asked
    assert all(p["calls_per_second"] > 0 and p["errors"] == 0 and p["lost"] == 0 for p in document["curve"])
    assert document["options"]["concurrency"] == 2 and len(document["samples_ms"]["Recall"]) > 0
    assert printed.out.count("Load test (closed loop, loopback)") == 2
    assert "throughput curve (closed-loop workers: calls/s, Recall p99): 1: " in printed.out
    assert f"plot written to {plot}" in printed.err
    # The figure is the JSON's: `memoryd bench plot` redraws the same bytes from the kept file.
    assert plot.read_text() == figure(document)
    root = ET.fromstring(plot.read_text())
    assert {"Mixed load 80/15/5: throughput", "Latency by operation (CDF)"} <= {t.text for t in root.iter(f"{SVG}text")}


def test_several_addresses_share_the_load_round_robin(server: ServerProcess, key_file: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]):
    # Two addresses of the suite's one server (by IP and by name): two channels, so the calls
    # really are spread over two connections; replicas of a deployment are dialled the same way.
    port = server.target.rsplit(":", 1)[1]
    first, second = f"127.0.0.1:{port}", f"localhost:{port}"
    out = tmp_path / "load.json"
    args = _parser().parse_args([
        "bench", "load", "--addr", first, "--addr", second, "--key-file", str(key_file), "--tenants", "4",
        "--concurrency", "3", "--duration", "4", "--seed", "5", "--json", str(out), "--quiet"])
    assert args.run(args) == 0
    printed = capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["server"]["addrs"] == [first, second]
    calls = document["calls_by_addr"]
    assert set(calls) == {first, second} and sum(calls.values()) == sum(
        document["operations"][op]["calls"] for op in OPERATIONS)
    assert abs(calls[first] - calls[second]) <= 3  # one worker's turn apart at most
    assert document["writes"]["lost"] == 0 and document["errors"] == {}
    assert f"spread over 2 servers: {first} {calls[first]} calls, {second} {calls[second]} calls" in printed
    with pytest.raises(BenchError, match="given twice"):
        run_load(LoadOptions(addrs=(first, first), key_file=key_file, duration=1))


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_sigterm_stops_the_embedded_server_it_started(tmp_path: Path):
    # A benchmark stopped by SIGTERM (a CI timeout, `kill`) must not leave its throw-away
    # server and database running: it unwinds as on Ctrl-C. Its workers' calls in flight end
    # before their channel is closed: closing a gRPC channel under calls blocked on it can
    # deadlock (grpc/grpc#19973, #20026), and once did here — the benchmark hung and its
    # server never got the SIGTERM.
    bench = subprocess.Popen([sys.executable, "-m", "memoryd.cli", "bench", "load", "--tenants", "2",
                              "--duration", "300"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert bench.stderr is not None
        for line in bench.stderr:
            if "running" in line:  # set up: the server is serving the load
                break
        servers = _children(bench.pid)
        assert servers, "the benchmark started no server"
        server_log = Path(f"/proc/{servers[0]}/fd/2")  # the server's stderr: its log file
        wait_until(lambda: "MemoryService/Recall" in server_log.read_text(errors="replace"), timeout=60,
                   what="the load is under way (set-up makes no Recall)")
        bench.send_signal(signal.SIGTERM)
        # A few seconds alone; once over 60 s in a CI run beside another xdist worker.
        bench.wait(timeout=180)
        said = bench.stderr.read()
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        assert bench.stderr is not None
        bench.stderr.close()
    for pid in servers:
        assert not Path(f"/proc/{pid}").exists(), f"the embedded server {pid} was left running"
    assert re.search(r"^interrupted: letting the calls of \d workers end \(up to 30 s\), then stopping$", said, re.M), said
    assert "still in a call" not in said, said

"""The load benchmark's pure parts: the request mix, the server-log warning counts, the loopback-only
addresses (the short load run itself: tests/e2e/test_load_short.py)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from memoryd.bench import BenchError, LoadOptions, run_load
from memoryd.bench.load._load import MIX, OPERATIONS, choose_op, is_loopback, log_warnings


def test_the_mix_is_80_15_5():
    assert sum(MIX.values()) == pytest.approx(1.0)
    assert MIX["Recall"] == 0.80 and MIX["Write"] == 0.15
    assert MIX["MemoryView"] + MIX["Erase"] == pytest.approx(0.05)
    rng = random.Random(7)
    draws = Counter(choose_op(rng) for _ in range(100_000))
    assert set(draws) == set(OPERATIONS)
    for op, share in MIX.items():
        assert draws[op] / 100_000 == pytest.approx(share, abs=0.005)


def test_the_server_logs_warnings_are_counted_with_ids_and_numbers_masked(tmp_path: Path):
    log = tmp_path / "server.log"
    log.write_text(
        "2026-12-02 02:00:00,001 INFO memoryd.server: listening on 127.0.0.1:5\n"
        "2026-12-02 02:00:01,002 WARNING memoryd.storage.memories: a purge gave up waiting for 2 index row(s) in flight\n"
        "2026-12-02 02:00:02,003 WARNING memoryd.storage.memories: a purge gave up waiting for 1 index row(s) in flight\n"
        "2026-12-02 02:00:03,004 ERROR memoryd.storage.outbox: outbox: memory 0b7e2a9c-4f7e-4c61-9d5e-2f4a8b1c3d5e "
        "of tenant t-3 dead-lettered after 8 attempts: boom\n")
    assert log_warnings(log) == Counter({
        "WARNING memoryd.storage.memories: a purge gave up waiting for # index row(s) in flight": 2,
        "ERROR memoryd.storage.outbox: outbox: memory # of tenant t-# dead-lettered after # attempts: boom": 1,
    })
    assert log_warnings(tmp_path / "missing.log") == Counter()


def test_only_loopback_addresses_are_accepted(tmp_path: Path):
    for addr in ("127.0.0.1:50051", "localhost:50051", "[::1]:50051", "127.5.6.7:1"):
        assert is_loopback(addr), addr
    for addr in ("10.0.0.1:50051", "8.8.8.8:443", "0.0.0.0:50051", ":50051", "no-such-host.invalid:1"):
        assert not is_loopback(addr), addr
    key = tmp_path / "signing.pem"
    key.write_text("not used")
    with pytest.raises(BenchError, match="only runs against loopback"):
        run_load(LoadOptions(addrs=("192.0.2.1:50051",), key_file=key, duration=1))
    with pytest.raises(BenchError, match="only runs against loopback"):  # every one of several
        run_load(LoadOptions(addrs=("127.0.0.1:50051", "192.0.2.1:50051"), key_file=key, duration=1))
    with pytest.raises(BenchError, match="needs --key-file"):
        run_load(LoadOptions(addrs=("127.0.0.1:50051",), key_file=None, duration=1))

"""The size lists `memoryd bench scale` and `bench quick` take (the runs: tests/e2e/test_bench_scale.py)."""

from __future__ import annotations

from memoryd.bench.load._cli_scale import parse_sizes


def test_sizes_accept_k_and_m_suffixes_and_drop_zero():
    assert parse_sizes("1k,10k,100") == (100, 1_000, 10_000)
    assert parse_sizes("1m") == (1_000_000,)
    assert parse_sizes("0") == ()

"""Probe: what matching a view's key globs costs at the contract's limits (issue 37).

Keys and key patterns are at most 128 bytes; a view has at most 64 rules of 32 patterns, so a
category may hold 2,048 globs. This times one match of ``memoryd.domain.Glob`` on the worst
patterns and keys (best of ``--repeats`` runs of 1,000), the regular expression it replaced
(``".*".join(re.escape(piece))``, DOTALL, fullmatch) on the same, stopped after
``--regex-seconds``, and what a request can ask at those limits: one key against 2,048 globs
(a guard decision) and 100 keys against them (a Recall by keys, a Write of 100 items).
Prints a table; asserts nothing. Starts nothing: pure CPU, in this process.

    .venv/bin/python bench/probes/glob_match_probe.py [--repeats 5] [--regex-seconds 10]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import time
from collections.abc import Callable

from memoryd.domain import CONTRACT, Category, Glob, View, ViewRule

MAX = CONTRACT.key.max_bytes
CASES = [
    ("*a*a*…*a*b (64 pieces), key a×128", "*" + "a*" * 63 + "b", "a" * MAX),
    ("*a*a*…*a*z*b, key a×127 b", "*a" * 62 + "*z*b", "a" * (MAX - 1) + "b"),
    ("a*a*…*ab, key a×128", "a*" * 63 + "ab", "a" * MAX),
    ("*a×62b*a×62b, key a×128", "*" + "a" * 62 + "b*" + "a" * 62 + "b", "a" * MAX),
    ("*ab*ab*…*c, key (ab)×64", "*" + "ab*" * 42 + "c", "ab" * (MAX // 2)),
    ("billing_*, key billing_address", "billing_*", "billing_address"),
]


def best_us(repeats: int, fn: Callable[[], object], number: int = 1000) -> float:
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(number):
            fn()
        timings.append((time.perf_counter() - began) / number)
    return min(timings) * 1e6


class Expired(Exception):
    pass


def regex_ms(pattern: str, key: str, limit: float) -> str:
    """One fullmatch of the old regular expression, or how long it ran before it was stopped."""
    regex = re.compile(".*".join(re.escape(piece) for piece in pattern.split("*")), re.DOTALL)

    def expire(signum: int, frame: object) -> None:
        raise Expired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    began = time.perf_counter()
    try:
        regex.fullmatch(key)
        return f"{(time.perf_counter() - began) * 1000:.3f}"
    except Expired:
        return f"> {limit * 1000:.0f} (stopped)"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def worst_view() -> View:
    """2,048 globs of 128 bytes in one category that no probe key matches but the last, ``a*``
    (stored views sort their patterns, and '*' sorts before letters)."""
    letters = ("".join(p) for p in itertools.product("ABCDEFGHIJKLMNOPQRSTUVWXYZ", repeat=3))
    patterns = tuple(sorted({"*a" * 61 + f"*{x}*b" for x in itertools.islice(letters, 2047)} | {"a*"}))
    rule = ViewRule(Category.FACT, patterns)
    return View("probe", (rule,), (rule,), False, frozenset())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--regex-seconds", type=float, default=10.0)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"  {'pattern, key':<40} {'Glob µs':>8} {'old regex ms':>16}")
    for label, pattern, key in CASES:
        glob = Glob(pattern)
        print(f"  {label:<40} {best_us(args.repeats, lambda: glob.matches(key)):8.2f} "  # noqa: B023 (called at once)
              f"{regex_ms(pattern, key, args.regex_seconds):>16}", flush=True)
    view = worst_view()
    keys = [("a" * MAX)[:MAX - 8] + f"{i:07d}b" for i in range(100)]
    one = best_us(args.repeats, lambda: view.may_read(Category.FACT, keys[0]), number=3)
    hundred = best_us(args.repeats, lambda: [view.may_read(Category.FACT, k) for k in keys], number=1)
    print(f"  one key against 2,048 worst globs: {one / 1000:.1f} ms; 100 keys: {hundred / 1000:.0f} ms")


if __name__ == "__main__":
    main()

"""Probe: what a view's key glob costs a read now that keys are stored only as labels.

A glob (``billing_*``) is resolved per read to the exact labels of the subject's key names it
matches (``memoryd.storage.memories._labels``): one more query over the subject's keyed memories and
one AES-GCM open per distinct key. This times a keyed read (``recall_keys``) and a listing
through a view of ``*`` rules (no resolution) and through a view with globs, for a subject
with N distinct keys. Prints timings; asserts nothing. Starts its own embedded PostgreSQL in a
temporary directory (nothing is left behind), or ``--dsn`` uses a migrated database.

    .venv/bin/python bench/probes/glob_probe.py [--keys 100,1000,5000] [--repeats 200] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from datetime import UTC, datetime

import psycopg

from memoryd.domain import Category, Draft, Page, ReadFilter
from memoryd.storage import LocalKeyProvider, Postgres, PostgresSettings, Stores
from _probe_db import run_probe  # bench/, the folder of this script
from memoryd.storage.keywords._keywords import TermHasher

EVERYTHING = tuple((c, ("*",)) for c in Category)
GLOBS = ((Category.PREFERENCE, ("billing_*", "*_address")), (Category.FACT, ("home_*",)))


async def timed(repeats: int, call) -> tuple[float, float]:
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        await call()
        timings.append((time.perf_counter() - began) * 1000)
    timings.sort()
    return statistics.median(timings), timings[int(0.95 * (len(timings) - 1))]


async def probe(owner_dsn: str, sizes: list[int], repeats: int) -> None:
    db = Postgres(PostgresSettings(owner_dsn, pool_max=2))
    await db.open()
    store = Stores(db, TermHasher(b"probe-secret-0123456789abcdef"), LocalKeyProvider(os.urandom(32)))
    print(f"{'keys':>6} {'read':<28} {'median ms':>10} {'p95 ms':>8}")
    for size in sizes:
        tenant = f"probe-{uuid.uuid4().hex[:8]}"
        session = store.session(tenant, "probe")
        names = [f"{('billing', 'home', 'misc', 'travel')[n % 4]}_{n}" for n in range(size)]
        for start in range(0, size, 250):
            drafts = [Draft(Category.FACT if names[n].startswith("home") else Category.PREFERENCE, f"value {n}",
                            key=names[n])
                      for n in range(start, min(start + 250, size))]
            await session.write("probed", drafts)
        async with await psycopg.AsyncConnection.connect(owner_dsn, autocommit=True) as owner:
            await owner.execute("VACUUM ANALYZE memories")
        now, page = datetime.now(UTC), Page(size=20)
        every, globbed = ReadFilter(subject="probed", rules=EVERYTHING), ReadFilter(subject="probed", rules=GLOBS)
        resolved = await session.labelled(globbed)
        for label, call in (
            ("recall_keys, view *", lambda: session.recall_keys(every, ["billing_1", "home_2"], now)),  # noqa: B023 (called at once)
            ("recall_keys, view with globs", lambda: session.recall_keys(globbed, ["billing_1", "home_2"], now)),  # noqa: B023 (called at once)
            ("list 20, view *", lambda: session.list(every, page)),  # noqa: B023 (called at once)
            ("list 20, view with globs", lambda: session.list(globbed, page)),  # noqa: B023 (called at once)
            ("list 20, globs resolved", lambda: session.list(resolved, page)),  # noqa: B023 (called at once)
            ("resolve the globs alone", lambda: session.labelled(globbed)),  # noqa: B023 (called at once)
        ):
            median, p95 = await timed(repeats, call)
            print(f"{size:>6} {label:<28} {median:>10.2f} {p95:>8.2f}")
    await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="100,1000,5000", help="distinct keys of the probed subject")
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per read")
    parser.add_argument("--dsn", default="", help="owner DSN of a migrated database (default: embedded)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.keys.split(",")]
    run_probe(args.dsn, "glob-probe-", lambda dsn: probe(dsn, sizes, args.repeats))


if __name__ == "__main__":
    main()

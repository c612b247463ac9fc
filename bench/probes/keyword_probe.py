"""Probe: how long one BM25 keyword search takes for a subject with 5,000 memories.

Each query is timed twice: with N and avgdl from the counts the writes keep (what Recall
does) and counted by a scan of the subject (what reads narrowed by keys, tags or time do).
Prints timings and the query plan; asserts nothing. By default starts its own embedded
PostgreSQL in a temporary directory (nothing is left behind); ``--dsn`` uses an existing,
migrated database instead (owner DSN; the probe writes into a fresh tenant of its own).

    .venv/bin/python bench/probes/keyword_probe.py [--memories 5000] [--other-subjects 9] [--dsn DSN]

Other subjects of the same tenant get as many memories with the same vocabulary, so the
postings of a term are not only the probed subject's.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid
from datetime import UTC, datetime

import psycopg

from memoryd.domain import Category, Draft, ReadFilter
from memoryd.storage import LocalKeyProvider, Postgres, PostgresSettings, Stores
from _probe_db import run_probe  # bench/, the folder of this script
from memoryd.storage.keywords._bm25 import bm25_statement, keyword_search
from memoryd.storage.keywords._keywords import TermHasher, tokenize, warm_up

EVERYTHING = tuple((c, ("*",)) for c in Category)
ENGLISH = (
    "customer asked refund order shipping delivery invoice billing account password reset email phone "
    "address moved city prefers morning meetings vegetarian allergic peanuts coffee tea python rust golang "
    "project deadline launch budget review contract renewal discount premium plan support ticket escalated "
    "travel flight hotel conference berlin tokyo london paris birthday anniversary gift daughter son school "
    "doctor appointment insurance claim laptop monitor keyboard subscription cancel upgrade downgrade"
).split()
CHINESE = ["上海", "出差", "北京", "会议", "咖啡", "喜欢", "编程", "退款", "订单", "过敏", "花生", "生日", "礼物", "航班", "酒店"]
QUERIES = {
    "one rare word": "kumquat",
    "one common word": "customer",
    "three words": "refund order invoice",
    "six words": "allergic peanuts vegetarian coffee morning meetings",
    "chinese": "我下个月要去上海出差",
}


def sentence(rng: random.Random) -> str:
    """A memory-like sentence; word choice is Zipf-like, so some words are common, most rare."""
    weights = [1 / (rank + 1) for rank in range(len(ENGLISH))]
    words = rng.choices(ENGLISH, weights=weights, k=rng.randint(6, 18))
    if rng.random() < 0.15:
        words += rng.sample(CHINESE, 3)
    if rng.random() < 0.05:
        words.append(str(rng.randint(1000, 9999)))
    return " ".join(words)


async def load(store: Stores, tenant: str, subject: str, count: int, rng: random.Random) -> None:
    """Write ``count`` memories through the store, whose write path indexes their terms."""
    for start in range(0, count, 250):
        drafts = [Draft(Category.EVENT, f"{sentence(rng)} #{start + i}") for i in range(min(250, count - start))]
        await store.session(tenant, "probe").write(subject, drafts)


async def probe(owner_dsn: str, memories: int, others: int, repeats: int) -> None:
    db = Postgres(PostgresSettings(owner_dsn, pool_max=2))
    await db.open()
    store = Stores(db, TermHasher(b"probe-secret-0123456789abcdef"), LocalKeyProvider(os.urandom(32)))
    tenant, rng = f"probe-{uuid.uuid4().hex[:8]}", random.Random(7)
    began = time.perf_counter()
    warm_up()
    print(f"jieba dictionary loaded in {time.perf_counter() - began:.2f} s")
    began = time.perf_counter()
    for subject in ["probed", *(f"other-{i}" for i in range(others))]:
        await load(store, tenant, subject, memories, rng)
    # As autovacuum would: planner statistics, and the visibility map for index-only scans.
    async with await psycopg.AsyncConnection.connect(owner_dsn, autocommit=True) as owner:
        await owner.execute("VACUUM ANALYZE memories")
        await owner.execute("VACUUM ANALYZE memory_terms")
    print(f"loaded {memories} memories x {others + 1} subjects in {time.perf_counter() - began:.1f} s")
    # The probed subject gets one memory with the rare word.
    session = store.session(tenant, "probe")
    await session.write("probed", [Draft(Category.EVENT, "bought a kumquat tree for the customer")])
    hasher = session.hasher
    flt, now = await session.labelled(ReadFilter(subject="probed", rules=EVERYTHING)), datetime.now(UTC)
    # N and avgdl from the counts the writes keep (what Recall does), and by a scan of the
    # subject's memories (what reads narrowed by keys, tags or time do).
    print(f"{'query':<18} {'N, avgdl':<9} {'terms':>5} {'hits':>5} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    for name, query in QUERIES.items():
        for kept in (True, False):
            timings, hits = [], 0
            for _ in range(repeats):
                async with db.tenant_tx(tenant) as conn:
                    began = time.perf_counter()
                    hits = len(await keyword_search(conn, flt, query, hasher, 20, now, kept=kept))
                    timings.append((time.perf_counter() - began) * 1000)
            timings.sort()
            p95 = timings[int(0.95 * (len(timings) - 1))]
            print(f"{name:<18} {'kept' if kept else 'scanned':<9} {len(set(tokenize(query))):>5} {hits:>5} "
                  f"{statistics.median(timings):>10.2f} {p95:>8.2f} {timings[-1]:>8.2f}")
    async with db.tenant_tx(tenant) as conn:
        statement, params = bm25_statement(conn, flt, hasher.counts(tokenize(QUERIES["three words"])), 20, now)
        cur = await conn.execute(b"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement.as_bytes(conn.conn), params)
        print("\nplan of 'three words':")
        print("\n".join(row["QUERY PLAN"] for row in await cur.fetchall()))
    await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=5000, help="memories per subject")
    parser.add_argument("--other-subjects", type=int, default=9, help="further subjects in the tenant")
    parser.add_argument("--repeats", type=int, default=50, help="timed searches per query")
    parser.add_argument("--dsn", default="", help="owner DSN of a migrated database (default: embedded)")
    args = parser.parse_args()
    run_probe(args.dsn, "keyword-probe-", lambda dsn: probe(dsn, args.memories, args.other_subjects, args.repeats))


if __name__ == "__main__":
    main()

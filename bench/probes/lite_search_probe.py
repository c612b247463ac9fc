"""What one tenant's vector search costs in Milvus Lite, by the size of its partition (issue 41,
item 5: where Milvus Lite stops being a good choice).

``MilvusIndex`` on a Milvus Lite file of this process, one tenant partition of random unit
vectors (384 dimensions, written 1,000 at a time as the outbox writes them, unsealed, then
sealed once), and at each size 30 searches of top 30 with Recall's filter expression (a full
view: every category, one subject), measured twice:

- right after sealing: Lite compacts the new segments into larger ones and builds each merged
  segment's vector index (HNSW, with faiss) on a background thread; until then a search of that
  segment filters and scans it in Python;
- once that background work is done (how long it took is printed): the steady state.

A search that passes Recall's budget for the index (3.5 s) is counted at the time it gave up.

    .venv/bin/python bench/probes/lite_search_probe.py 10000 30000 50000 100000
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime

from memoryd.domain import Category, FilterLabels, ReadFilter, Unavailable
from memoryd.storage import IndexedMemory, MilvusIndex
from memoryd.storage.vectors._lite_compaction import lite_collection

DIM = 384
SEARCHES = 30
TOP = 30


def unit_vector(rng: random.Random) -> list[float]:
    vector = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector]


async def measure(index: MilvusIndex, flt: ReadFilter, rng: random.Random, now: datetime) -> tuple[float, float]:
    """p50 and p90 (ms) of SEARCHES searches, after 3 that warm up."""
    times = []
    for n in range(3 + SEARCHES):
        started = time.perf_counter()
        try:
            await index.partition("t").search(flt, unit_vector(rng), TOP, now)
        except Unavailable:
            pass  # gave up at Recall's budget: counted at the time it took
        if n >= 3:
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * len(times)) - 1]


async def main(sizes: list[int]) -> None:
    rng = random.Random(1)
    folder = tempfile.TemporaryDirectory(prefix="lite-search-probe-")  # removed at the end
    index = MilvusIndex(f"{folder.name}/memoryd.db", model_id="probe", dim=DIM)
    flt = ReadFilter(subject="s", rules=tuple((c, ("*",)) for c in Category),
                     labels=FilterLabels(rules=tuple((c, None) for c in Category)))
    now, stored = datetime.now(UTC), 0
    try:
        for size in sorted(sizes):
            while stored < size:
                n = min(1000, size - stored)
                items = [IndexedMemory(str(uuid.uuid4()), "s", "subject", "", "fact", "", (), now, None)
                         for _ in range(n)]
                await index.upsert_tenants({"t": (items, [unit_vector(rng) for _ in items])}, seal=False)
                stored += n
            await index.seal()
            fresh = await measure(index, flt, rng, now)
            started = time.perf_counter()
            collection = lite_collection(index.uri, index.collection)
            assert collection is not None
            await asyncio.to_thread(collection._wait_for_bg)  # Lite's background compaction and index builds
            waited = time.perf_counter() - started
            steady = await measure(index, flt, rng, now)
            print(f"{size:>7,} rows: right after sealing p50 {fresh[0]:.1f} ms, p90 {fresh[1]:.1f} ms; "
                  f"background work {waited:.1f} s; then p50 {steady[0]:.1f} ms, p90 {steady[1]:.1f} ms", flush=True)
    finally:
        await index.close()
        folder.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="+", help="partition sizes to measure, in rows")
    asyncio.run(main(parser.parse_args().sizes))

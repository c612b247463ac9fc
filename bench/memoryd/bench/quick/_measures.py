"""Small measurements of the quick run, pure or nearly: the rate of concurrent batches, the steps a tenant is filled in, and resident memory per stored memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from memoryd.v1 import memory_service_pb2 as svc

from ..load import (
    MAX_WRITE_BATCH,
    Loader,
    latency,
)


def concurrent_batches(loader: Loader, tenants: Sequence[str], batches: int) -> dict[str, float | None]:
    """Each tenant's writer sends ``batches`` Writes of 50 items (async) back to back, all writers
    at once; acknowledged items per second of wall time, and the acks' latency."""
    jobs = {tenant: [loader._drafts(tenant, MAX_WRITE_BATCH) for _ in range(batches)] for tenant in tenants}
    acks: list[float] = []
    lock = threading.Lock()

    def writer(tenant: str) -> None:
        for drafts in jobs[tenant]:
            t0 = time.perf_counter()
            loader.write(tenant, drafts, svc.CONSISTENCY_INDEX_ASYNC)
            with lock:
                acks.append((time.perf_counter() - t0) * 1000)

    started = time.perf_counter()
    with ThreadPoolExecutor(len(tenants)) as pool:
        for _ in pool.map(writer, tenants):
            pass
    seconds = time.perf_counter() - started
    items = len(tenants) * batches * MAX_WRITE_BATCH
    for tenant in tenants:
        loader.counts[tenant] = loader.counts.get(tenant, 0) + batches * MAX_WRITE_BATCH
    return {**latency(acks), "items": float(items), "seconds": seconds,
            "items_per_second": items / seconds if seconds > 0 else None}


def fill_steps(size: int, parts: int = 10) -> list[int]:
    """The sizes at which the fill stops for a resident-size sample: a first small step (the
    stores' first rows, connections, caches), then ``parts`` equal steps to ``size``."""
    first = min(MAX_WRITE_BATCH, size)
    steps = [first] + [max(first, size * i // parts) for i in range(1, parts + 1)]
    return sorted(set(steps))


def rss_growth(samples: Sequence[tuple[int, int | None]]) -> tuple[float | None, tuple[int, int | None],
                                                                    tuple[int, int | None]]:
    """Bytes of resident size per memory from the first sample (after the first small step: the
    stores' first rows and connections) to the last. At a few thousand memories this is an upper
    bound (caches still fill); None without two samples or if it did not grow measurably."""
    if not samples:
        return None, (0, None), (0, None)
    first, last = samples[0], samples[-1]
    if first[1] is None or last[1] is None or last[0] <= first[0] or last[1] <= first[1]:
        return None, first, last
    return (last[1] - first[1]) / (last[0] - first[0]), first, last

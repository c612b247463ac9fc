"""A warning, once per tenant per process, when a tenant outgrows Milvus Lite.

Milvus Lite searches a tenant's partition in this process, in Python: filtering it row by row
and, while the HNSW index of a freshly merged segment is being built, scanning it brute force.
Past ~30,000 memories in one tenant its search alone takes 20-50 ms on 2 cores with every index
built, and over 100 ms for the seconds to minutes each merge of segments leaves unindexed after
writes (``bench/probes/lite_search_probe.py``; docs/scaling.md, "Large tenants belong on a Milvus
server"). Recall keeps working, only slower; the fix is a Milvus server, so the operator is told
which tenant, how large, and what to set.

The size is the tenant's active memories as the writes keep them for BM25 (``keyword_stats``,
migration 0017: a sum over the tenant's few rows per group, never a scan of its memories). It
is read when the outbox worker first indexes a tenant's memories in this process, then again
only once the worker has indexed as many of them as were left before the limit: not on every
batch. A count that fails (Postgres away) is tried again with the tenant's next batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from memoryd.domain import MemorydError

from ..memories import Stores

_log = logging.getLogger("memoryd.storage.milvus")

_KEPT_COUNT = "SELECT COALESCE(sum(docs), 0) AS n FROM keyword_stats WHERE tenant_id = %s"


class LargeTenants:
    """Tells the operator, once per tenant, that a tenant has passed ``limit`` memories while
    its vectors are in Milvus Lite. Give it to the outbox worker only when the index is Lite."""

    def __init__(self, store: Stores, limit: int) -> None:
        self._store = store
        self.limit = limit
        # Per tenant checked and not past the limit: how many more it may gain before it can be.
        self._room: dict[str, int] = {}
        self.warned: set[str] = set()

    async def indexed(self, written: Mapping[str, int]) -> None:
        """The outbox worker has just written ``written[tenant]`` vectors of each tenant."""
        for tenant, count in written.items():
            if tenant in self.warned:
                continue
            room = self._room.get(tenant)
            if room is not None and count <= room:
                self._room[tenant] = room - count
                continue
            try:
                size = await self.size(tenant)
            except MemorydError as exc:
                self._room.pop(tenant, None)
                _log.debug("could not count the memories of tenant %s: %s", tenant, exc.message)
                continue
            if size <= self.limit:
                self._room[tenant] = self.limit - size
            elif tenant not in self.warned:  # another batch in flight may have just warned
                self.warned.add(tenant)
                self._room.pop(tenant, None)
                _log.warning(
                    "tenant %s has %d memories, more than %d (MEMORYD_LITE_TENANT_WARNING): Milvus Lite "
                    "searches a tenant's memories inside this process and slows down as they grow; "
                    "put large tenants on a Milvus server (MEMORYD_MILVUS_URI, docs/scaling.md: Large tenants "
                    "belong on a Milvus server)", tenant, size, self.limit)

    async def size(self, tenant: str) -> int:
        """The tenant's active memories, from the counts its writes keep."""
        async with self._store.db.tenant_tx(tenant) as conn:
            cur = await conn.execute(_KEPT_COUNT, (tenant,))
            row = await cur.fetchone()
        return int(row["n"]) if row else 0

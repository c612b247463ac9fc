"""The vector collections one process keeps and searches: one per embedding model.

``index_models`` in Postgres lists every model that has a collection and marks the one
Recall uses. Every process refreshes that list every few seconds, so a model registered by
``memoryd reindex`` starts receiving writes from every outbox worker (dual-write) before the
backfill begins, and Recall switches over when the reindex marks it active — without a
restart.

Outbox work belongs to every collection ``index_models`` lists, so a worker settles it only
when it can write them all (``writable``). Until then — no model registered yet (``memoryd
migrate`` registers none; a server registers its model when it starts), or a model whose
embedder this process lacks — the work stays queued, untried, for this process once it can,
or for another process that can: settling it would drop vectors no backfill looks for again.
While so blocked the list is re-read every ``BLOCKED_RETRY_SECONDS``, not every refresh.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from memoryd.domain import Embedder, Unavailable

from .._loops import periodic
from ..vectors import MilvusIndex
from ._outbox import IndexTarget
from ..postgres import Postgres

_log = logging.getLogger("memoryd.storage.indexes")
# How soon a process that cannot write every index re-reads the models (a server registering
# its model right after a worker started is the usual case; the next refresh is 10 s away).
BLOCKED_RETRY_SECONDS = 1.0
NOT_READ = "the embedding models have not been read yet"
NO_MODEL = "no embedding model is registered yet (a server registers its model when it starts)"


class IndexSet:
    def __init__(self, catalog: Postgres, embedder_for: Callable[[str], Embedder | None], *, milvus_uri: str,
                 milvus_token: str = "", routing: str = "partition", refresh_seconds: float = 10.0,
                 seal_writes: bool | None = None, blocked_retry_seconds: float = BLOCKED_RETRY_SECONDS) -> None:
        self._catalog = catalog
        self._embedder_for = embedder_for
        self._uri = milvus_uri
        self._token = milvus_token
        self._routing = routing
        self._seal = seal_writes
        self.refresh_seconds = refresh_seconds
        self._targets: dict[str, IndexTarget] = {}
        self._unavailable: set[str] = set()
        self.active_model: str = ""
        self.blocked_retry_seconds = blocked_retry_seconds
        self.blocked = NOT_READ  # why this process cannot write every index ("" when it can)
        self._looked_at = -blocked_retry_seconds

    def target(self, model_id: str, embedder: Embedder) -> IndexTarget:
        """The collection of ``model_id`` (opened on first use)."""
        existing = self._targets.get(model_id)
        if existing is None:
            index = MilvusIndex(self._uri, model_id=model_id, dim=embedder.dim, routing=self._routing,
                                token=self._token, seal_writes=self._seal)
            existing = self._targets[model_id] = IndexTarget(index, embedder)
        return existing

    async def refresh(self) -> None:
        self._looked_at = time.monotonic()
        async with self._catalog.catalog_tx() as conn:
            cur = await conn.execute("SELECT model_id, dim, active FROM index_models ORDER BY created_at")
            rows = await cur.fetchall()
        for row in rows:
            model_id = row["model_id"]
            if model_id in self._targets:
                continue
            embedder = self._embedder_for(model_id)
            if embedder is None or embedder.dim != row["dim"]:
                if model_id not in self._unavailable:
                    _log.warning("embedding model %s has a collection but no embedder here", model_id)
                    self._unavailable.add(model_id)
                continue
            self.target(model_id, embedder)
        self.active_model = next((r["model_id"] for r in rows if r["active"]), "")
        lacking = [r["model_id"] for r in rows if r["model_id"] not in self._targets]
        blocked = (NO_MODEL if not rows else
                   f"no embedder here for embedding model(s) {', '.join(lacking)}" if lacking else "")
        if blocked and blocked != self.blocked:  # logged when it changes, not on every look
            _log.warning("index work waits here (left queued, untried): %s", blocked)
        elif not blocked and self.blocked not in ("", NOT_READ):
            _log.info("index work resumes: every embedding model's collection can be written")
        self.blocked = blocked

    def targets(self) -> list[IndexTarget]:
        """Every collection to keep current (the active one and any being built)."""
        return list(self._targets.values())

    async def writable(self) -> list[IndexTarget]:
        """The collections every piece of outbox work belongs to, or [] while this process
        cannot write them all (``blocked`` says why); then the models are re-read, at most
        every ``blocked_retry_seconds``."""
        if self.blocked and time.monotonic() - self._looked_at >= self.blocked_retry_seconds:
            await self.refresh()
        return [] if self.blocked else self.targets()

    async def unanswered(self, timeout: float | None = None) -> str:
        """Ask each collection once (connecting and loading it if need be): "" when every one
        answered, else which one could not be reached and why (Unavailable, or no answer
        within ``timeout``). A refusal (Internal) is raised: at start-up it stops the server."""
        for target in self.targets():
            try:
                async with asyncio.timeout(timeout):
                    await target.index.ping()
            except TimeoutError:
                return f"{target.index.collection}: no answer within {timeout:.0f}s"
            except Unavailable as exc:
                return f"{target.index.collection}: {exc.message}"
        return ""

    def active(self) -> IndexTarget | None:
        """The collection Recall searches, if this process has its embedder."""
        return self._targets.get(self.active_model)

    async def run(self, stop: asyncio.Event) -> None:
        """Re-read the embedding models every ``refresh_seconds`` until ``stop``."""
        await periodic(stop, self.refresh_seconds, self.refresh, what="could not refresh the embedding models")

    async def close(self) -> None:
        for target in self._targets.values():
            await target.index.close()
        self._targets.clear()

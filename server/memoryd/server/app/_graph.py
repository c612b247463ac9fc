"""The object graph of one memoryd process, built by the composition root (``open_graph``).

On the stores ``open_stores`` opened, ``Graph`` builds what runs on them, each part in this
one place and at most once per process, the first time the process asks for it: the worker
role's pool, the embedders, the index set (the vector collections), the outbox worker, the
lifecycle sweeper, the extraction jobs and worker, the consolidator, the recaller, the access
recorder, the views and the services the use cases get. A process asks only for what it needs:
``memoryd serve`` for ``services``, ``memoryd worker`` for the index set and an outbox worker,
``memoryd outbox status`` for the worker role's pool alone.

Closing the graph stops the background loops started with ``run`` and waits for them, then
closes every part in the reverse order it was built, the stores last.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from opentelemetry import trace

from memoryd.domain import DEFAULT_SIMILARITY, Embedder, FailedPrecondition, Unavailable, View
from memoryd.storage import (
    ChangeListener,
    active_model,
    Consolidations,
    ExtractionJobs,
    IndexSet,
    IndexTarget,
    LargeTenants,
    LifecycleSweeper,
    MilvusIndex,
    OutboxWorker,
    Postgres,
    PostgresRevocations,
    PostgresTokenLedger,
    PostgresViewStore,
    embedder_from_config,
    keywords_warm_up,
    register_index_model,
    require_embedded_parts,
    seal_plaintext,
)

from .._auth import TokenVerifier
from .._config import Config
from ..ingest import Consolidator, ExtractionWorker, consolidator, extraction_worker
from ..recall import Recaller
from ..telemetry import Metrics, MetricsRefresher
from ..usecases import AccessRecorder, Services, TokenMint, WatchHub
from ..views import ViewRegistry
from ..credentials import PageTokens, RevocationList
from ._compose import Embedders, Opened, configured_embedder, open_stores, worker_pool
from ._worker import WatchedOutboxWorker

__all__ = ["DEMO_AGENT", "DEMO_TENANT", "Graph", "open_graph"]

_log = logging.getLogger("memoryd.server")

_Worker = TypeVar("_Worker", bound=OutboxWorker)

DEMO_TENANT = "demo"
DEMO_AGENT = "demo-agent"


async def _no_index() -> list[IndexTarget]:
    """The collections of an outbox worker that only manages the outbox: none."""
    return []


@asynccontextmanager
async def open_graph(config: Config, *, create_keys: bool, with_worker_pool: bool = False,
                     metrics: Metrics | None = None) -> AsyncIterator[Graph]:
    """The stores (``open_stores``, whose arguments these are) and the graph built on them;
    ``metrics`` watches every pool the graph holds."""
    async with open_stores(config, create_keys=create_keys, with_worker_pool=with_worker_pool) as opened:
        graph = Graph(opened, metrics)
        try:
            yield graph
        finally:
            await graph.close()


class Graph:
    """One process's parts, each built once when first asked for (see the module)."""

    def __init__(self, opened: Opened, metrics: Metrics | None = None) -> None:
        self.config = opened.config
        self.secrets = opened.secrets
        self.settings = opened.settings
        self.db = opened.db  # the application role's pool
        self.store = opened.store
        self._queue = opened.queue
        self._metrics = metrics
        self._parts = AsyncExitStack()  # what the graph built, closed in reverse order
        self.stopping = asyncio.Event()  # set when the graph closes: the background loops end
        self._tasks: list[asyncio.Task[None]] = []
        self.index_unanswered = ""  # why the index did not answer when it was opened ("" if it did)
        self._embedders: Embedders | None = None
        self._indexes: IndexSet | None = None
        self._outbox: OutboxWorker | None = None
        self._sweeper: LifecycleSweeper | None = None
        self._jobs: ExtractionJobs | None = None
        self._access: AccessRecorder | None = None
        self._views: ViewRegistry | None = None
        self._extraction: ExtractionWorker | None = None
        if metrics is not None:
            metrics.watch_pool(self.db)

    def run(self, loop: Callable[[asyncio.Event], Awaitable[None]]) -> None:
        """Run ``loop(stopping)`` in the background until the graph closes."""
        self._tasks.append(asyncio.ensure_future(loop(self.stopping)))

    async def close(self) -> None:
        self.stopping.set()
        try:
            # Every loop ends before anything closes, even when one of them failed.
            ended = await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            self._tasks.clear()
            await self._parts.aclose()
        for outcome in ended:
            if isinstance(outcome, BaseException):
                raise outcome

    @property
    def queue(self) -> Postgres:
        """The worker role's pool: ``open_graph(with_worker_pool=True)`` or ``worker_db`` opened it."""
        if self._queue is None:
            raise RuntimeError("the worker role's pool is not open")
        return self._queue

    async def worker_db(self, *, small: bool = False) -> Postgres:
        """The worker role's pool, opened the first time (``small``: for a server's metrics and
        lifecycle sweeps only, when it runs no worker)."""
        if self._queue is None:
            queue = worker_pool(self.settings, small=small)
            await queue.open()
            self._parts.push_async_callback(queue.close)
            self._queue = queue
            if self._metrics is not None:
                self._metrics.watch_pool(queue)
        return self._queue

    def embedders(self) -> Embedders:
        if self._embedders is None:
            self._embedders = Embedders(configured_embedder(self.config))
            self._parts.callback(self._embedders.close)
        return self._embedders

    async def indexes(self, *, register: bool = False) -> IndexSet:
        """The vector collections. ``register`` (a server): the configured model's collection
        is made and registered, and Recall's model must be one this process can run; without
        it (a ``memoryd worker``) the set fills what servers registered, read through the
        worker role."""
        if self._indexes is not None:
            return self._indexes
        config = self.config
        embedder = self.embedders().configured
        if not register:
            await embedder.warm_up()
            indexes = self._index_set(await self.worker_db(), config.milvus_uri)
            await indexes.refresh()
            return indexes
        try:
            await embedder.warm_up()  # loads the model / learns the dimension
        except Unavailable as exc:
            _log.warning("the embedder is unavailable at start-up: %s", exc.message)
        if not embedder.dim:
            raise FailedPrecondition("cannot learn the embedding dimension while the embedding endpoint is down: "
                                     "set MEMORYD_EMBEDDER_DIM")
        if not config.milvus_uri:
            Path(config.milvus_target).parent.mkdir(parents=True, exist_ok=True)
        indexes = self._index_set(self.db, config.milvus_target)
        target = indexes.target(embedder.model_id, embedder)
        await register_index_model(self.settings.setup_dsn, embedder.model_id, target.index.collection, embedder.dim)
        await indexes.refresh()
        active = indexes.active()
        if active is None:
            raise FailedPrecondition(
                f"Recall uses embedding model {indexes.active_model}, which this server cannot run: configure its "
                f"embedder (MEMORYD_EMBEDDER*), or re-embed with 'memoryd reindex'"
            )
        # Connected and loaded now, not on the first call. If the index does not answer,
        # writes still succeed (Postgres + outbox) and Recall answers from keywords until it
        # is back; the outbox then catches up. A server on a Milvus server is not ready
        # meanwhile, for a while (_readiness).
        self.index_unanswered = await indexes.unanswered()
        if self.index_unanswered:
            _log.warning("the vector index is unavailable at start-up: %s", self.index_unanswered)
        return indexes

    def _index_set(self, catalog: Postgres, milvus_uri: str) -> IndexSet:
        config = self.config
        indexes = IndexSet(catalog, self.embedders().get, milvus_uri=milvus_uri, milvus_token=config.milvus_token,
                           routing=config.milvus_routing, refresh_seconds=config.index_refresh_seconds,
                           seal_writes=config.milvus_seal)
        self._parts.push_async_callback(indexes.close)
        self._indexes = indexes
        return indexes

    def dense(self) -> tuple[MilvusIndex, Embedder] | None:
        """The dense channel: the active model's collection and embedder, if there is one now."""
        active = self._indexes.active() if self._indexes is not None else None
        return (active.index, active.embedder) if active else None

    async def outbox_worker(self) -> OutboxWorker:
        """The outbox worker, filling the index set's writable collections."""
        return await self._outbox_worker(OutboxWorker)

    async def watched_outbox_worker(self) -> WatchedOutboxWorker:
        """The outbox worker of a ``memoryd worker``, whose health checks watch its batches."""
        return await self._outbox_worker(WatchedOutboxWorker)

    async def _outbox_worker(self, kind: type[_Worker]) -> _Worker:
        if self._outbox is None:
            config = self.config
            indexes = await self.indexes()
            # Batches as large as a `memoryd worker`'s: a purge no longer waits for a batch
            # being embedded, only for one being written to the index (``_outbox``).
            self._outbox = kind(await self.worker_db(), self.store, indexes.writable,
                                max_attempts=config.outbox_max_attempts, parallel=config.outbox_parallel,
                                large_tenants=self._large_tenants())
        if not isinstance(self._outbox, kind):
            raise RuntimeError(f"this process built its outbox worker as {type(self._outbox).__name__}, "
                               f"not {kind.__name__}")
        return self._outbox

    def _large_tenants(self) -> LargeTenants | None:
        """A warning of tenants grown past what Milvus Lite searches quickly; only when the
        index is a Milvus Lite of this process (a Milvus server scales with its tenants)."""
        active = self._indexes.active() if self._indexes is not None else None
        limit = self.config.lite_tenant_warning
        return LargeTenants(self.store, limit) if active is not None and active.index.local and limit > 0 else None

    def outbox_keeper(self) -> OutboxWorker:
        """An outbox worker that indexes nothing: it manages the queue (replays dead letters)."""
        return OutboxWorker(self.queue, self.store, _no_index)

    async def sweeper(self) -> LifecycleSweeper:
        """The lifecycle sweeper (expiry, staleness, episodic cap); it lists tenants through the
        worker role."""
        if self._sweeper is None:
            self._sweeper = LifecycleSweeper(self.db, await self.worker_db(small=True), self.config.policy_for,
                                             self.config.scoring.half_life_days,
                                             change_retention=timedelta(days=self.config.watch.retention_days))
        return self._sweeper

    def jobs(self) -> ExtractionJobs:
        """The extraction job queue; jobs are claimed through the worker role's pool, if open."""
        if self._jobs is None:
            self._jobs = ExtractionJobs(self.store, self._queue)
            self.store.use_jobs(self._jobs)  # where a session queues and reads its agent's jobs
        return self._jobs

    def access(self) -> AccessRecorder:
        """The access recorder, started; at close it writes what it still holds."""
        if self._access is None:
            self._access = AccessRecorder(self.store)
            self._access.start()
            self._parts.push_async_callback(self._access.stop)  # recall counts of the last second are not lost
        return self._access

    async def views(self) -> ViewRegistry:
        if self._views is None:
            self._views = ViewRegistry(PostgresViewStore(self.db), self.config.view_cache_seconds)
            if self.config.embedded:
                # The embedded default's demo token works out of the box: its agent gets a full
                # view once, if it never had one — an admin's change or deletion stays (deny by
                # default holds for the rest).
                await self._views.ensure(DEMO_TENANT, View.full(DEMO_AGENT, "embedded default: the demo agent's full "
                                                                            "view"), changed_by="memoryd")
        return self._views

    async def extraction(self, *, on_written: Callable[[], None] | None = None) -> ExtractionWorker:
        """The extraction worker on the configured model (``config.extraction_configured``)."""
        if self._extraction is None:
            self._extraction = extraction_worker(self.config, self.jobs(), await self.views(), self.dense,
                                                 on_written=on_written)
            self._parts.callback(self._extraction.close)
        return self._extraction

    async def consolidation(self, threshold: float = DEFAULT_SIMILARITY) -> Consolidator | None:
        """A consolidator on the configured extraction model, embedding with the active index's
        model (what the extraction worker's dedup uses), else the configured one if no index is
        active yet; None if the active model is not one this process can run."""
        active, embedders = await active_model(self.queue), self.embedders()
        embedder = embedders.get(active) if active is not None else embedders.configured
        if embedder is None:
            return None
        await embedder.warm_up()
        worker = consolidator(self.config, Consolidations(self.store), embedder, threshold=threshold)
        self._parts.callback(worker.close)
        return worker

    async def reindex_target(self, embedder: str, *, base_url: str, model: str, dim: int) -> IndexTarget:
        """The collection ``memoryd reindex`` fills, with the embedder it names (not the
        configured one): loaded, and the collection made."""
        config = self.config
        made = embedder_from_config(embedder, base_url=base_url, model=model, api_key=config.embedder_api_key,
                                    dim=dim or None)
        self._parts.callback(made.close)
        await made.warm_up()
        if not config.milvus_uri:
            require_embedded_parts(postgres=False, milvus=True)
            Path(config.milvus_target).parent.mkdir(parents=True, exist_ok=True)
        index = MilvusIndex(config.milvus_target, model_id=made.model_id, dim=made.dim, routing=config.milvus_routing,
                            token=config.milvus_token, seal_writes=config.milvus_seal)
        self._parts.push_async_callback(index.close)
        return IndexTarget(index, made)

    def watch_hub(self) -> WatchHub:
        """The server's Watch streams, woken by the one LISTEN connection of the process and by
        the hub's poll (both run until the graph closes)."""
        hub = WatchHub(self.config.watch)
        self.run(hub.run)  # the poll
        self.run(ChangeListener(self.settings, hub.wake, hub.wake_all).run)
        return hub

    def verifier(self) -> TokenVerifier:
        """The server's token verifier: the deployment's verification keys and its tenants'
        revocations."""
        revoked = RevocationList(PostgresRevocations(self.db), self.config.view_cache_seconds)
        return TokenVerifier(self.secrets.verification_keys, revoked)

    def recaller(self, tracer: trace.Tracer) -> Recaller:
        return Recaller(self.config.scoring, self.dense, tracer=tracer)

    async def services(self, tracer: trace.Tracer) -> Services:
        """What ``memoryd serve``'s use cases get, with its background work started: rows written
        before encryption sealed, the index set and its refresh, the in-process outbox worker,
        the lifecycle sweeper, the extraction worker and the metrics' refresh, as configured."""
        config, store = self.config, self.store
        sealed = await seal_plaintext(self.settings, self.db, store.keys, store.term_hasher)
        if sealed.memories or sealed.versions:
            _log.info("encrypted %d memories and %d versions written before encryption at rest",
                      sealed.memories, sealed.versions)
        if sealed.labelled:
            _log.info("sealed and labelled the keys and tags of %d rows written before 0012 (their vectors are "
                      "re-indexed in the background)", sealed.labelled)
        await asyncio.to_thread(keywords_warm_up)  # load the CJK dictionary now, not on the first call
        indexes = await self.indexes(register=True)
        self.run(indexes.run)
        if config.worker_in_process or config.extraction_configured:
            await self.worker_db()
        worker = await self.outbox_worker() if config.worker_in_process else None
        if worker is not None:
            self.run(worker.run)
        store.use_index(indexes, outbox=worker)  # what an Erase clears, what a write wakes
        self.jobs()  # sessions queue and read extraction jobs through it
        if config.lifecycle_interval_seconds > 0:
            sweeper = await self.sweeper()
            self.run(lambda stop: sweeper.run(stop, config.lifecycle_interval_seconds, lambda: datetime.now(UTC)))
        refresher = None
        if self._metrics is not None and self._metrics.enabled:
            refresher = MetricsRefresher(self._metrics, self.db, await self.worker_db(small=True))
        access = self.access()
        views = await self.views()
        extraction = None
        if config.extraction_configured:  # every replica runs one; they share jobs (SKIP LOCKED)
            extraction = await self.extraction(on_written=worker.wakeup.set if worker else None)
            self.run(extraction.run)
        if refresher is not None:
            if extraction is not None:
                refresher.watch_model(extraction.breaker, extraction.model_at)
            self.run(refresher.run)
        services = Services(
            store=store,
            views=views,
            recaller=self.recaller(tracer),
            access=access,
            scoring=config.scoring,
            page_tokens=PageTokens(self.secrets.pages),
            extraction=extraction,
            extraction_enabled=config.extraction_configured,
            metrics=self._metrics,
            tokens=TokenMint(self.secrets.signing_key, PostgresTokenLedger(self.db)),
            policy_for=config.policy_for,
            watch=self.watch_hub(),
        )
        # The reference sentences relevance is measured against, embedded now, beside start-up,
        # rather than inside the first Recall (which then waited seconds for them).
        self.run(_ignoring_stop(services.recaller.warm_up))
        return services


def _ignoring_stop(work: Callable[[], Awaitable[Any]]) -> Callable[[asyncio.Event], Awaitable[Any]]:
    """``work`` as a background loop that ends on its own."""
    async def run(_: asyncio.Event) -> None:
        await work()

    return run

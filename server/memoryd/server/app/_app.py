"""The memoryd service: stores, identity, the gRPC server, start-up and graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import AsyncExitStack
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.sdk.trace.export import SpanExporter

from memoryd.domain import Embedder, FailedPrecondition, Unavailable, View
from memoryd.storage import (
    ExtractionJobs,
    IndexSet,
    LargeTenants,
    LifecycleSweeper,
    MilvusIndex,
    OutboxWorker,
    Postgres,
    Stores,
    PostgresRevocations,
    PostgresTokenLedger,
    PostgresSettings,
    PostgresViewStore,
    keywords_warm_up,
    register_index_model,
    require_embedded_parts,
    seal_plaintext,
)
from memoryd.v1 import memory_service_pb2, memory_service_pb2_grpc, view_admin_service_pb2, view_admin_service_pb2_grpc
from memoryd.v1 import token_admin_service_pb2, token_admin_service_pb2_grpc

from memoryd.server._auth import TokenVerifier, issue_token
from ._compose import Embedders, configured_embedder, open_stores, worker_pool
from .._config import Config
from ..ingest import ExtractionWorker, extraction_worker
from ..rpc import MemoryService, TokenAdminService, ViewAdminService
from ..rpc import ChainInterceptor, build_chain
from ._listen import NO_PORT_SHARING, SHARED_PORT, ListenError, listen, require_free_address
from ..telemetry import configure_logging
from ..telemetry import Metrics, MetricsRefresher
from memoryd.server.credentials import TlsSettings
from memoryd.server.credentials import PageTokens
from ..usecases import AccessRecorder
from ._readiness import Readiness
from ..recall import Recaller
from memoryd.server.credentials import RevocationList
from ..usecases import Services
from ..views import ViewRegistry
from ..telemetry import tracer, tracer_provider
from ..usecases import TokenMint

_log = logging.getLogger("memoryd.server")

SERVICE_NAMES = (
    memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    view_admin_service_pb2.DESCRIPTOR.services_by_name["ViewAdminService"].full_name,
    token_admin_service_pb2.DESCRIPTOR.services_by_name["TokenAdminService"].full_name,
)
DEMO_TENANT = "demo"
DEMO_AGENT = "demo-agent"
ADDR_SETTING = "MEMORYD_ADDR"  # named by the error when the listen address cannot be had


@dataclass(frozen=True)
class StartedServer:
    port: int
    token_files: tuple[Path, ...]


class Memoryd:
    """One memoryd server process: ``start``, then ``stop`` (or ``serve_until_signalled``)."""

    def __init__(self, config: Config, *, span_exporter: SpanExporter | None = None, shares_port: bool = False) -> None:
        self.config = config
        # A child of `serve --processes`: its port is its siblings' too, on purpose (``_listen``).
        self._shares_port = shares_port
        self._span_exporter = span_exporter
        self._opened = AsyncExitStack()  # what open_stores opened, closed last
        self._db: Postgres | None = None
        self._worker_db: Postgres | None = None
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._access: AccessRecorder | None = None
        self._extraction: ExtractionWorker | None = None
        self._indexes: IndexSet | None = None
        self._embedders: Embedders | None = None
        self._server: grpc.aio.Server | None = None
        self._health: health.aio.HealthServicer | None = None
        self._readiness: asyncio.Task[None] | None = None
        self._index_unanswered = ""  # why the index did not answer at start ("" if it did)
        self._provider = tracer_provider(config, span_exporter)
        self.metrics = Metrics(config)
        self.metrics_port = 0

    async def _open_indexes(self, settings: PostgresSettings) -> IndexSet:
        config = self.config
        embedder = configured_embedder(config)
        self._embedders = Embedders(embedder)
        try:
            await embedder.warm_up()  # loads the model / learns the dimension
        except Unavailable as exc:
            _log.warning("the embedder is unavailable at start-up: %s", exc.message)
        if not embedder.dim:
            raise FailedPrecondition("cannot learn the embedding dimension while the embedding endpoint is down: "
                                     "set MEMORYD_EMBEDDER_DIM")
        if not config.milvus_uri:
            Path(config.milvus_target).parent.mkdir(parents=True, exist_ok=True)
        indexes = IndexSet(self._catalog_db(), self._embedders.get, milvus_uri=config.milvus_target,
                           milvus_token=config.milvus_token, routing=config.milvus_routing,
                           refresh_seconds=config.index_refresh_seconds, seal_writes=config.milvus_seal)
        target = indexes.target(embedder.model_id, embedder)
        await register_index_model(settings.setup_dsn, embedder.model_id, target.index.collection, embedder.dim)
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
        self._index_unanswered = await indexes.unanswered()
        if self._index_unanswered:
            _log.warning("the vector index is unavailable at start-up: %s", self._index_unanswered)
        return indexes

    def _catalog_db(self) -> Postgres:
        assert self._db is not None
        return self._db

    def _write_demo_tokens(self, key: Ed25519PrivateKey) -> tuple[Path, ...]:
        """The embedded default's ready-made credentials, readable only by their owner."""
        folder = self.config.data_dir / "tokens"
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, agent, roles in (("admin", "admin", ("admin", "agent")), (DEMO_AGENT, DEMO_AGENT, ("agent",))):
            path = folder / f"{name}.token"
            token = issue_token(key, tenant=DEMO_TENANT, agent=agent, roles=roles, ttl_seconds=30 * 86400)
            path.touch(mode=0o600)
            path.write_text(token + "\n")
            written.append(path)
        return tuple(written)

    async def start(self) -> StartedServer:
        config = self.config
        # Before anything starts: a configuration that needs an embedded part which is not
        # installed (the image has none) stops here with one line naming the extra.
        require_embedded_parts(postgres=config.embedded, milvus=not config.milvus_uri)
        # Nor a listen address another server (or program) holds: refused at once, not after
        # the stores, the embedder and Milvus Lite have started (``listen`` still decides). A
        # child of `serve --processes` binds the port its parent checked and holds for it.
        if not self._shares_port:
            require_free_address(config.addr, ADDR_SETTING)
        stores = await self._opened.enter_async_context(open_stores(config, create_keys=True))
        secrets, settings, store, self._db = stores.secrets, stores.settings, stores.store, stores.db
        _log.info("signing key %s (%d earlier key(s) still accepted), page secret v%d", secrets.signing_kid,
                  len(secrets.earlier_keys), secrets.pages.current_version)
        self.metrics.watch_pool(self._db)
        sealed = await seal_plaintext(settings, self._db, store.keys, store.term_hasher)
        if sealed.memories or sealed.versions:
            _log.info("encrypted %d memories and %d versions written before encryption at rest",
                      sealed.memories, sealed.versions)
        if sealed.labelled:
            _log.info("sealed and labelled the keys and tags of %d rows written before 0012 (their vectors are "
                      "re-indexed in the background)", sealed.labelled)
        await asyncio.to_thread(keywords_warm_up)  # load the CJK dictionary now, not on the first call
        indexes = self._indexes = await self._open_indexes(settings)
        self._tasks.append(asyncio.create_task(indexes.run(self._stopping)))
        worker = None
        if config.worker_in_process or config.extraction_configured:
            self._worker_db = worker_pool(settings)
            await self._worker_db.open()
            self.metrics.watch_pool(self._worker_db)
        if config.worker_in_process:
            assert self._worker_db is not None
            # Batches as large as a `memoryd worker`'s: a purge no longer waits for a batch
            # being embedded, only for one being written to the index (``_outbox``).
            worker = OutboxWorker(self._worker_db, store, indexes.writable, max_attempts=config.outbox_max_attempts,
                                  parallel=config.outbox_parallel, large_tenants=self._large_tenants(store))
            self._tasks.append(asyncio.create_task(worker.run(self._stopping)))
        store.use_index(indexes, outbox=worker)  # what an Erase clears, what a write wakes
        if config.lifecycle_interval_seconds > 0:
            await self._start_sweeper(settings)
        refresher = None
        if self.metrics.enabled:
            await self._ensure_worker_db(settings)
            assert self._worker_db is not None
            refresher = MetricsRefresher(self.metrics, self._db, self._worker_db)

        def dense() -> tuple[MilvusIndex, Embedder] | None:
            active = indexes.active()
            return (active.index, active.embedder) if active else None

        self._access = AccessRecorder(store)
        self._access.start()
        views = ViewRegistry(PostgresViewStore(self._db), config.view_cache_seconds)
        if config.embedded:
            # The embedded default's demo token works out of the box: its agent gets a full view
            # once, if it never had one — an admin's change or deletion stays (deny by default
            # holds for the rest).
            await views.ensure(DEMO_TENANT, View.full(DEMO_AGENT, "embedded default: the demo agent's full view"),
                               changed_by="memoryd")
        jobs = ExtractionJobs(store, self._worker_db)
        store.use_jobs(jobs)  # where a session queues and reads its agent's jobs
        if config.extraction_configured:  # every replica runs one; they share jobs (SKIP LOCKED)
            self._extraction = extraction_worker(config, jobs, views, dense,
                                                 on_written=worker.wakeup.set if worker else None)
            self._tasks.append(asyncio.create_task(self._extraction.run(self._stopping)))
        if refresher is not None:
            if self._extraction is not None:
                refresher.watch_model(self._extraction.breaker, self._extraction.model_at)
            self._tasks.append(asyncio.create_task(refresher.run(self._stopping)))
        services = Services(
            store=store,
            views=views,
            recaller=Recaller(config.scoring, dense, tracer=tracer(self._provider)),
            access=self._access,
            scoring=config.scoring,
            page_tokens=PageTokens(secrets.pages),
            extraction=self._extraction,
            extraction_enabled=config.extraction_configured,
            metrics=self.metrics,
            tokens=TokenMint(secrets.signing_key, PostgresTokenLedger(self._db)),
            policy_for=config.policy_for,
        )
        # The reference sentences relevance is measured against, embedded now, beside start-up,
        # rather than inside the first Recall (which then waited seconds for them).
        self._tasks.append(asyncio.create_task(services.recaller.warm_up()))
        revoked = RevocationList(PostgresRevocations(self._db), config.view_cache_seconds)
        verifier = TokenVerifier(secrets.verification_keys, revoked)
        chain = build_chain(verifier=verifier, services=services, config=config,
                            tracer=tracer(self._provider), metrics=self.metrics)
        limit = config.limits.max_message_bytes
        server = grpc.aio.server(
            interceptors=[ChainInterceptor(chain)],
            options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit),
                     SHARED_PORT if self._shares_port else NO_PORT_SHARING],
        )
        memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryService(services, config.limits), server)
        view_admin_service_pb2_grpc.add_ViewAdminServiceServicer_to_server(ViewAdminService(config.limits), server)
        token_admin_service_pb2_grpc.add_TokenAdminServiceServicer_to_server(TokenAdminService(services, config.limits),
                                                                             server)
        self._health = health.aio.HealthServicer()
        waits = bool(config.milvus_uri and self._index_unanswered)
        readiness = Readiness(self._health, SERVICE_NAMES, wait=config.index_ready_wait_seconds if waits else 0.0)
        await readiness.listening()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        credentials = None
        if config.tls_cert_file:
            credentials = TlsSettings(config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file,
                                      config.tls_trust_domain).server_credentials()
        try:
            port = listen(server, config.addr, ADDR_SETTING, credentials)
        except ListenError:
            await self._close_stores()
            raise
        try:
            self.metrics_port = self.metrics.serve()
        except OSError as exc:
            await self._close_stores()
            raise OSError(f"cannot serve metrics on {config.metrics_addr}: {exc}") from exc
        if self.metrics_port:
            _log.info("metrics: http://%s:%d/metrics", config.metrics_addr.rpartition(":")[0], self.metrics_port)
        await server.start()
        self._server = server
        if readiness.wait > 0:
            self._readiness = asyncio.create_task(readiness.run(indexes))
        tokens = self._write_demo_tokens(secrets.signing_key) if config.embedded else ()
        return StartedServer(port, tokens)

    def _large_tenants(self, store: Stores) -> LargeTenants | None:
        """A warning of tenants grown past what Milvus Lite searches quickly; only when the
        index is a Milvus Lite of this process (a Milvus server scales with its tenants)."""
        active = self._indexes.active() if self._indexes is not None else None
        limit = self.config.lite_tenant_warning
        return LargeTenants(store, limit) if active is not None and active.index.local and limit > 0 else None

    async def _start_sweeper(self, settings: PostgresSettings) -> None:
        """The lifecycle sweeper (expiry, staleness, episodic cap) as an in-process task."""
        assert self._db is not None
        await self._ensure_worker_db(settings)  # it lists tenants through the worker role
        assert self._worker_db is not None
        sweeper = LifecycleSweeper(self._db, self._worker_db, self.config.policy_for,
                                   self.config.scoring.half_life_days)
        self._tasks.append(asyncio.create_task(
            sweeper.run(self._stopping, self.config.lifecycle_interval_seconds, lambda: datetime.now(UTC))))

    async def _ensure_worker_db(self, settings: PostgresSettings) -> None:
        if self._worker_db is None:
            self._worker_db = worker_pool(settings, small=True)
            await self._worker_db.open()
            self.metrics.watch_pool(self._worker_db)

    async def stop(self) -> None:
        """Stop taking calls, let in-flight calls finish within the grace period, close stores."""
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self._server is not None:
            await self._server.stop(self.config.grace_seconds)
            self._server = None
        await self._close_stores()
        self._provider.shutdown()
        self.metrics.shutdown()

    async def _close_stores(self) -> None:
        self._stopping.set()
        if self._readiness is not None:
            self._readiness.cancel()  # its ping may hang on a Milvus that does not answer
            await asyncio.gather(self._readiness, return_exceptions=True)
            self._readiness = None
        for task in self._tasks:
            await task
        self._tasks.clear()
        if self._extraction is not None:
            self._extraction.close()
            self._extraction = None
        if self._access is not None:
            await self._access.stop()  # recall counts of the last second are not lost
            self._access = None
        if self._indexes is not None:
            await self._indexes.close()
            self._indexes = None
        if self._embedders is not None:
            self._embedders.close()
            self._embedders = None
        if self._worker_db is not None:
            await self._worker_db.close()
        self._db = self._worker_db = None
        await self._opened.aclose()  # the application pool, then the embedded PostgreSQL

    async def serve_until_signalled(self, on_started: Callable[[StartedServer], None] | None = None) -> None:
        """Serve until SIGTERM or SIGINT, then shut down gracefully."""
        configure_logging(self.config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        loop.add_signal_handler(signal.SIGUSR2, _dump_tasks)
        try:
            started = await self.start()
            if on_started is not None:
                on_started(started)
            await stop.wait()
            _log.info("shutting down: draining in-flight calls (up to %.0fs)", self.config.grace_seconds)
        finally:
            await self.stop()


def _dump_tasks() -> None:
    """SIGUSR2: log where every asyncio task of the server is waiting (for diagnosis)."""
    for task in asyncio.all_tasks():
        frames = task.get_stack()
        where = " <- ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(frames))
        _log.warning("task %s: %s", task.get_name(), where or "(not started)")

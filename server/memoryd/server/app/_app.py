"""``memoryd serve``: the gRPC server on the composition root's object graph — listen, serve,
readiness, graceful shutdown — and the embedded default's demo tokens."""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import AsyncExitStack
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.sdk.trace.export import SpanExporter

from memoryd.storage import require_embedded_parts
from memoryd.v1 import memory_service_pb2, memory_service_pb2_grpc, view_admin_service_pb2, view_admin_service_pb2_grpc
from memoryd.v1 import token_admin_service_pb2, token_admin_service_pb2_grpc

from .._auth import TokenVerifier, issue_token
from ._graph import DEMO_AGENT, DEMO_TENANT, Graph, open_graph
from .._config import Config, Keepalive
from ..rpc import MemoryService, TokenAdminService, ViewAdminService
from ..rpc import ChainInterceptor, build_chain
from ._listen import NO_PORT_SHARING, SHARED_PORT, ListenError, listen, require_free_address
from ..telemetry import configure_logging
from ..telemetry import Metrics
from ..credentials import TlsSettings
from ._readiness import Readiness
from ..telemetry import tracer, tracer_provider
from ..usecases import Services, WatchHub

_log = logging.getLogger("memoryd.server")

SERVICE_NAMES = (
    memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    view_admin_service_pb2.DESCRIPTOR.services_by_name["ViewAdminService"].full_name,
    token_admin_service_pb2.DESCRIPTOR.services_by_name["TokenAdminService"].full_name,
)
ADDR_SETTING = "MEMORYD_ADDR"  # named by the error when the listen address cannot be had


@dataclass(frozen=True)
class StartedServer:
    port: int
    token_files: tuple[Path, ...]


class Memoryd:
    """One memoryd server process: ``start``, then ``stop`` (or ``serve_until_signalled``).

    It keeps the server's lifecycle (listen, serve, readiness, grace, shutdown); what it
    serves is built by the composition root (``open_graph``)."""

    def __init__(self, config: Config, *, span_exporter: SpanExporter | None = None, shares_port: bool = False) -> None:
        self.config = config
        # A child of `serve --processes`: its port is its siblings' too, on purpose (``_listen``).
        self._shares_port = shares_port
        self._span_exporter = span_exporter
        self._opened = AsyncExitStack()  # the object graph and the stores under it, closed last
        self._graph: Graph | None = None
        self._server: grpc.aio.Server | None = None
        self._health: health.aio.HealthServicer | None = None
        self._readiness: asyncio.Task[None] | None = None
        self._watch: WatchHub | None = None  # the open Watch streams, ended first at stop
        self._provider = tracer_provider(config, span_exporter)
        self.metrics = Metrics(config)
        self.metrics_port = 0

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
        graph = await self._opened.enter_async_context(
            open_graph(config, create_keys=True, metrics=self.metrics))
        self._graph, secrets = graph, graph.secrets
        _log.info("signing key %s (%d earlier key(s) still accepted), page secret v%d", secrets.signing_kid,
                  len(secrets.earlier_keys), secrets.pages.current_version)
        services = await graph.services(tracer(self._provider))
        self._watch = services.watch
        server = self._grpc_server(services, graph.verifier())
        self._health = health.aio.HealthServicer()
        waits = bool(config.milvus_uri and graph.index_unanswered)
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
            self._readiness = asyncio.create_task(readiness.run(await graph.indexes()))
        tokens = self._write_demo_tokens(secrets.signing_key) if config.embedded else ()
        return StartedServer(port, tokens)

    def _grpc_server(self, services: Services, verifier: TokenVerifier) -> grpc.aio.Server:
        """The gRPC server of memoryd's three services behind the interceptor chain (not yet
        listening)."""
        config = self.config
        chain = build_chain(verifier=verifier, services=services, config=config,
                            tracer=tracer(self._provider), metrics=self.metrics)
        limit = config.limits.max_message_bytes
        server = grpc.aio.server(
            interceptors=[ChainInterceptor(chain)],
            options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit),
                     SHARED_PORT if self._shares_port else NO_PORT_SHARING, *keepalive_options(config.keepalive)],
        )
        memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryService(services, config.limits), server)
        view_admin_service_pb2_grpc.add_ViewAdminServiceServicer_to_server(ViewAdminService(config.limits), server)
        token_admin_service_pb2_grpc.add_TokenAdminServiceServicer_to_server(TokenAdminService(services, config.limits),
                                                                             server)
        return server

    async def stop(self) -> None:
        """Stop taking calls, let in-flight calls finish within the grace period, close stores."""
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self._watch is not None:
            self._watch.close()  # streams never finish by themselves: they end now, UNAVAILABLE
        if self._server is not None:
            await self._server.stop(self.config.grace_seconds)
            self._server = None
        await self._close_stores()
        self._provider.shutdown()
        self.metrics.shutdown()

    async def _close_stores(self) -> None:
        if self._readiness is not None:
            self._readiness.cancel()  # its ping may hang on a Milvus that does not answer
            await asyncio.gather(self._readiness, return_exceptions=True)
            self._readiness = None
        self._graph = None
        await self._opened.aclose()  # the background work, what it ran on, then the stores

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


def keepalive_options(keepalive: Keepalive) -> list[tuple[str, int]]:
    """gRPC's server options for ``[keepalive]``: which client pings it accepts, and its own."""
    return [
        # Pings are accepted on a connection with no call too: a client's idle channel pings.
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", round(keepalive.min_ping_interval_seconds * 1000)),
        ("grpc.http2.max_ping_strikes", 2),  # gRPC's default, written where the interval is
        ("grpc.keepalive_time_ms", round(keepalive.time_seconds * 1000)),
        ("grpc.keepalive_timeout_ms", round(keepalive.timeout_seconds * 1000)),
        # gRPC stops pinging after 2 pings without data by default: an idle client would never
        # be found gone.
        ("grpc.http2.max_pings_without_data", 0),
    ]


def _dump_tasks() -> None:
    """SIGUSR2: log where every asyncio task of the server is waiting (for diagnosis)."""
    for task in asyncio.all_tasks():
        frames = task.get_stack()
        where = " <- ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(frames))
        _log.warning("task %s: %s", task.get_name(), where or "(not started)")

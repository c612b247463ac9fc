"""Fixtures of the server tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryd.server import Config, Memoryd
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ..support import full_view, token_for, unique
from .watch_rig import rig  # noqa: F401 (the Watch tests' server of their own)


@dataclass
class TracedServer:
    """An in-process memoryd whose spans go to memory, and agent-1 of a fresh tenant (full view)."""

    app: Memoryd
    exporter: InMemorySpanExporter
    stub: svc_grpc.MemoryServiceStub
    tenant: str
    meta: tuple[tuple[str, str], ...]  # agent-1's credentials
    stopped: bool = False

    async def finished_spans(self) -> tuple[ReadableSpan, ...]:
        """Stop the server (which flushes its span processor) and return every span it ended."""
        if not self.stopped:
            self.stopped = True
            await self.app.stop()
        return self.exporter.get_finished_spans()


@pytest.fixture
async def traced(private_database: str, key_file: Path, tmp_path: Path) -> AsyncIterator[TracedServer]:
    exporter = InMemorySpanExporter()
    config = Config(data_dir=tmp_path, addr="127.0.0.1:0", postgres_dsn=private_database,
                    signing_key_file=str(key_file))
    app = Memoryd(config, span_exporter=exporter)
    started = await app.start()
    tenant = unique("tenant")
    server: TracedServer | None = None
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            await admin_grpc.ViewAdminServiceStub(channel).PutView(
                admin.PutViewRequest(view=full_view("agent-1")),
                metadata=(("authorization", f"Bearer {token_for(key_file, tenant, 'ops', roles=('admin',))}"),))
            server = TracedServer(app, exporter, svc_grpc.MemoryServiceStub(channel), tenant,
                                  (("authorization", f"Bearer {token_for(key_file, tenant)}"),))
            yield server
    finally:
        if server is None or not server.stopped:
            await app.stop()

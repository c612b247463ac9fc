"""An in-process memoryd of a test's own for the Watch tests: a fresh database, a small
heartbeat (so a stream's first message, a heartbeat, says it has started), and helpers to
open streams, read them and write through the contract."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from memoryd.server import Config, Memoryd, Watch
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ..support import full_view, token_for, unique

HEARTBEAT = 0.3


def config_for(dsn: str, data_dir: Path, key_file: Path, **watch: Any) -> Config:
    settings = Watch(**{"heartbeat_seconds": HEARTBEAT, "poll_seconds": 0.2, **watch})
    return Config(data_dir=data_dir, addr="127.0.0.1:0", postgres_dsn=dsn, signing_key_file=str(key_file),
                  watch=settings, view_cache_seconds=0.2, lifecycle_interval_seconds=0)


@dataclass
class Rig:
    """A running server, a channel to it and a tenant of the test's own."""

    app: Memoryd
    channel: grpc.aio.Channel
    key_file: Path
    tenant: str = field(default_factory=lambda: unique("tenant"))

    @property
    def memory(self) -> svc_grpc.MemoryServiceStub:
        return svc_grpc.MemoryServiceStub(self.channel)

    def meta(self, agent: str = "agent-1", tenant: str | None = None, **claims: Any) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {token_for(self.key_file, tenant or self.tenant, agent, **claims)}"),)

    async def put_view(self, view: pb.View, tenant: str | None = None) -> None:
        await admin_grpc.ViewAdminServiceStub(self.channel).PutView(
            admin.PutViewRequest(view=view), metadata=self.meta("ops", tenant, roles=("admin",)))

    async def delete_view(self, agent: str) -> None:
        await admin_grpc.ViewAdminServiceStub(self.channel).DeleteView(
            admin.DeleteViewRequest(agent=agent), metadata=self.meta("ops", roles=("admin",)))

    async def write(self, subject: str, *items: pb.MemoryDraft, agent: str = "writer",
                    tenant: str | None = None) -> svc.WriteResponse:
        return await self.memory.Write(svc.WriteRequest(subject=subject, items=list(items)),
                                       metadata=self.meta(agent, tenant))

    async def erase(self, request: svc.EraseRequest, agent: str = "writer",
                    tenant: str | None = None) -> svc.EraseResponse:
        return await self.memory.Erase(request, metadata=self.meta(agent, tenant))


@asynccontextmanager
async def running(config: Config, key_file: Path) -> AsyncIterator[Rig]:
    app = Memoryd(config)
    started = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            rig = Rig(app, channel, key_file)
            await rig.put_view(full_view("writer"))
            yield rig
    finally:
        await app.stop()


@pytest.fixture
async def rig(private_database: str, key_file: Path, tmp_path: Path) -> AsyncIterator[Rig]:
    """A server of the test's own, and agent-1 of its tenant with a full view."""
    async with running(config_for(private_database, tmp_path, key_file), key_file) as started:
        await started.put_view(full_view("agent-1"))
        yield started


class Stream:
    """One open Watch, read in the background into a queue (so a test can write meanwhile)."""

    def __init__(self, rig: Rig, request: svc.WatchRequest, meta: tuple[tuple[str, str], ...]) -> None:
        self.call = rig.memory.Watch(request, metadata=meta)
        self.received: asyncio.Queue[svc.WatchResponse | grpc.aio.AioRpcError] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.call:
                await self.received.put(message)
        except grpc.aio.AioRpcError as error:
            await self.received.put(error)

    async def next(self, timeout: float = 30.0) -> svc.WatchResponse:
        got = await asyncio.wait_for(self.received.get(), timeout)
        if isinstance(got, grpc.aio.AioRpcError):
            raise got
        return got

    async def started(self, timeout: float = 30.0) -> str:
        """Wait for the first heartbeat: the stream is positioned; its cursor."""
        deadline = time.monotonic() + timeout
        while True:
            message = await self.next(max(0.0, deadline - time.monotonic()))
            if message.HasField("heartbeat"):
                return message.cursor

    async def changes(self, n: int, timeout: float = 30.0) -> list[svc.WatchResponse]:
        """The next ``n`` changes (heartbeats skipped), all within ``timeout``: heartbeats keep
        coming, so a change that never comes must fail the test, not wait for it forever."""
        deadline = time.monotonic() + timeout
        out: list[svc.WatchResponse] = []
        while len(out) < n:
            try:
                message = await self.next(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                got = [svc.MemoryChangeKind.Name(m.change.kind) for m in out]
                raise AssertionError(f"{len(out)} of {n} changes came within {timeout} s: {got}") from None
            if message.HasField("change"):
                out.append(message)
        return out

    async def quiet_until_heartbeat(self, beats: int = 2) -> list[svc.WatchResponse]:
        """Every change up to ``beats`` heartbeats in a row sent after this call (their server
        time says so: the server runs in this process). Between two such heartbeats the server
        has read the log after the call, so every change committed before it has come."""
        since = time.time()
        out: list[svc.WatchResponse] = []
        seen = 0
        while seen < beats:
            message = await self.next()
            if not message.HasField("heartbeat"):
                out.append(message)
                seen = 0
            elif message.heartbeat.server_time.ToMicroseconds() / 1e6 >= since:
                seen += 1
        return out

    async def error(self, timeout: float = 30.0) -> grpc.aio.AioRpcError:
        while True:
            got = await asyncio.wait_for(self.received.get(), timeout)
            if isinstance(got, grpc.aio.AioRpcError):
                return got

    def close(self) -> None:
        self.call.cancel()
        self._task.cancel()


def watch(subject: str = "alice", **kwargs: Any) -> svc.WatchRequest:
    return svc.WatchRequest(subject=subject, **kwargs)


def stripped(message: svc.WatchResponse) -> svc.WatchResponse:
    """The message without its cursor (sealed with a random nonce: two alike differ)."""
    out = svc.WatchResponse()
    out.CopyFrom(message)
    out.ClearField("cursor")
    return out


__all__ = ["HEARTBEAT", "Rig", "Stream", "config_for", "replace", "rig", "running", "stripped", "watch"]

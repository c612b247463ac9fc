"""The asyncio client (grpc.aio)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import token_admin_service_pb2 as token_admin
from memoryd.v1 import token_admin_service_pb2_grpc as token_admin_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ._errors import from_rpc_error
from ._options import (DEFAULT_TIMEOUT, KEEPALIVE, TLS, AsyncToken, Keepalive, RetryPolicy, metadata_for, prepare,
                       wrong_reply)
from ._sync import build_request
from ._tracing import trace_metadata
from ._watch import WATCH_HEARTBEAT, AsyncWatch

__all__ = ["AsyncMemorydClient"]

R = TypeVar("R")



class AsyncMemorydClient:
    """An asyncio memoryd client (grpc.aio): one channel, typed methods for every RPC.

    Each method takes the request message, or its fields as keyword arguments, and returns the
    response message; a failure raises a :class:`~memoryd.client.MemorydError` subclass.

        from memoryd.client import AsyncMemorydClient
        from memoryd.v1 import memory_pb2 as pb

        async with AsyncMemorydClient("127.0.0.1:50051", token=token) as client:
            await client.write(subject="user-42", items=[
                pb.MemoryDraft(category=pb.CATEGORY_PREFERENCE, key="language", text="Rust")])
            for scored in (await client.recall(subject="user-42", query="which language?")).memories:
                print(scored.memory.text, scored.score)

    Args:
        target: ``host:port`` of the server.
        token: a bearer token (sent as ``authorization: Bearer …``), or a function returning one
            (or a coroutine function), called before every attempt (refresh without rebuilding
            the client); None or "" sends no authorization (mTLS identities).
        tls: TLS or mutual TLS (:class:`TLS`); None for a plaintext channel (loopback, tests).
        timeout: default seconds per attempt of a call (each method takes ``timeout=`` too).
        retry: the :class:`RetryPolicy` for UNAVAILABLE.
        options: extra gRPC channel options.
        keepalive: the :class:`Keepalive` pings of the client's connections (None: none).
        heartbeat_interval: the server's heartbeat interval in seconds; a :meth:`watch` silent for
            three of them is re-opened (None: never).
        channel: an existing channel to use instead (the client will not close it).
    """

    def __init__(self, target: str = "", *, token: AsyncToken = None, tls: TLS | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT, retry: RetryPolicy | None = None,
                 options: list[tuple[str, Any]] | None = None, heartbeat_interval: float | None = WATCH_HEARTBEAT,
                 channel: grpc.aio.Channel | None = None, keepalive: Keepalive | None = KEEPALIVE) -> None:
        self._owns_channel = channel is None
        # A watch that went silent re-opens on a connection of its own (the client's may be the
        # dead one); only possible when the client made its channel.
        self._connect: Callable[[], grpc.aio.Channel] | None = None
        if channel is None:
            opts = ((keepalive.channel_options() if keepalive else []) + list(options or [])
                    + (tls.channel_options() if tls else []))

            def connect(*extra: tuple[str, Any]) -> grpc.aio.Channel:
                return (grpc.aio.secure_channel(target, tls.channel_credentials(), options=[*opts, *extra]) if tls
                        else grpc.aio.insecure_channel(target, options=[*opts, *extra]))

            channel = connect()
            self._connect = lambda: connect(("grpc.use_local_subchannel_pool", 1))
        self.channel = channel
        self.token = token
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.heartbeat_interval = heartbeat_interval
        self._memory = svc_grpc.MemoryServiceStub(channel)
        self._admin = admin_grpc.ViewAdminServiceStub(channel)
        self._tokens = token_admin_grpc.TokenAdminServiceStub(channel)

    async def _token(self) -> str | None:
        token = self.token() if callable(self.token) else self.token
        return await token if inspect.isawaitable(token) else token

    async def close(self) -> None:
        """Close the channel (if the client opened it)."""
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> AsyncMemorydClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, stub: object, method: str, reply: type[R], request: Message,
                    timeout: float | None) -> R:
        request, retryable = prepare(method, request)
        policy = self.retry
        attempts = policy.max_attempts if retryable else 1
        for attempt in range(1, attempts + 1):
            metadata = metadata_for(await self._token(), trace_metadata())
            try:
                answer = await getattr(stub, method)(request, metadata=metadata,
                                                     timeout=timeout if timeout is not None else self.timeout)
                return answer if isinstance(answer, reply) else wrong_reply(method, reply, answer)
            except grpc.aio.AioRpcError as error:
                if attempt == attempts or error.code() not in policy.codes:
                    raise from_rpc_error(error) from None
            await asyncio.sleep(policy.backoff(attempt))
        raise AssertionError("unreachable")

    # --- MemoryService -----------------------------------------------------------------

    async def write(self, request: svc.WriteRequest | None = None, /, *, timeout: float | None = None,
              **fields: Any) -> svc.WriteResponse:
        """Write memories (or turns) for one subject, atomically.

        Without an ``idempotency_key`` the client sets a fresh UUID, so a retry after
        UNAVAILABLE returns the first attempt's response instead of writing twice.

            await client.write(subject="user-42", items=[pb.MemoryDraft(
                category=pb.CATEGORY_FACT, key="city", text="Lyon")])
        """
        return await self._call(self._memory, "Write", svc.WriteResponse, build_request(svc.WriteRequest, request, fields), timeout)

    async def recall(self, request: svc.RecallRequest | None = None, /, *, timeout: float | None = None,
               **fields: Any) -> svc.RecallResponse:
        """Recall the memories that matter for a query, a conversation and/or keys. ``context``
        is the conversation's recent turns, most recent last (a query is then optional).

            await client.recall(subject="user-42", query="where does the user live?", top_k=3)
            await client.recall(subject="user-42", context=[pb.Turn(
                turn_id="t9", speaker="user", text="Book me a table near home", time=datetime.now(UTC))])
        """
        return await self._call(self._memory, "Recall", svc.RecallResponse, build_request(svc.RecallRequest, request, fields), timeout)

    async def erase(self, request: svc.EraseRequest | None = None, /, *, timeout: float | None = None,
              **fields: Any) -> svc.EraseResponse:
        """Forget or purge selected memories; returns the receipt. Retried after UNAVAILABLE
        (erasing again selects nothing more).

            await client.erase(subject="user-42", key="city", mode=svc.ERASE_MODE_PURGE, reason="user asked")
        """
        return await self._call(self._memory, "Erase", svc.EraseResponse, build_request(svc.EraseRequest, request, fields), timeout)

    async def memory_view(self, request: svc.MemoryViewRequest | None = None, /, *, timeout: float | None = None,
                    **fields: Any) -> svc.MemoryViewResponse:
        """One page of a subject's memories as the caller's view shows them (see :meth:`iter_memories`)."""
        return await self._call(self._memory, "MemoryView", svc.MemoryViewResponse, build_request(svc.MemoryViewRequest, request, fields),
                          timeout)

    async def iter_memories(self, request: svc.MemoryViewRequest | None = None, /, *,
                            timeout: float | None = None, **fields: Any) -> AsyncIterator[pb.Memory]:
        """Every memory of every MemoryView page, fetching pages as needed.

            async for memory in client.iter_memories(subject="user-42", page_size=100):
                print(memory.key, memory.text)
        """
        page_request = svc.MemoryViewRequest()
        page_request.CopyFrom(build_request(svc.MemoryViewRequest, request, fields))
        while True:
            page = await self.memory_view(page_request, timeout=timeout)
            for memory in page.memories:
                yield memory
            if not page.next_page_token:
                return
            page_request.page_token = page.next_page_token

    async def get_history(self, request: svc.GetHistoryRequest | None = None, /, *, timeout: float | None = None,
                    **fields: Any) -> svc.GetHistoryResponse:
        """Every version of one memory, newest first.

            await client.get_history(subject="user-42", memory_id=memory_id)
        """
        return await self._call(self._memory, "GetHistory", svc.GetHistoryResponse, build_request(svc.GetHistoryRequest, request, fields),
                          timeout)

    async def get_extraction_job(self, request: svc.GetExtractionJobRequest | None = None, /, *,
                           timeout: float | None = None, **fields: Any) -> svc.GetExtractionJobResponse:
        """The state of an extraction job queued by a Write with turns."""
        return await self._call(self._memory, "GetExtractionJob", svc.GetExtractionJobResponse,
                          build_request(svc.GetExtractionJobRequest, request, fields), timeout)

    async def resolve_conflict(self, request: svc.ResolveConflictRequest | None = None, /, *,
                         timeout: float | None = None, **fields: Any) -> svc.ResolveConflictResponse:
        """Settle a pending conflict (never retried: a replay could apply twice)."""
        return await self._call(self._memory, "ResolveConflict", svc.ResolveConflictResponse,
                          build_request(svc.ResolveConflictRequest, request, fields), timeout)

    async def export_memories(self, request: svc.ExportMemoriesRequest | None = None, /, *,
                        timeout: float | None = None, **fields: Any) -> svc.ExportMemoriesResponse:
        """The subject's memories the view reads, as an archive (sealed with ``passphrase=``)."""
        return await self._call(self._memory, "ExportMemories", svc.ExportMemoriesResponse,
                          build_request(svc.ExportMemoriesRequest, request, fields), timeout)

    async def import_memories(self, request: svc.ImportMemoriesRequest | None = None, /, *,
                        timeout: float | None = None, **fields: Any) -> svc.ImportMemoriesResponse:
        """Write an archive's memories to a subject (never retried: the contract gives
        ImportMemories no idempotency key)."""
        return await self._call(self._memory, "ImportMemories", svc.ImportMemoriesResponse,
                          build_request(svc.ImportMemoriesRequest, request, fields), timeout)

    def watch(self, request: svc.WatchRequest | None = None, /, *, heartbeats: bool = False,
              heartbeat_interval: float | None = None, **fields: Any) -> AsyncWatch:
        """The changes to a subject's memories that the caller's view reads, as they are committed:
        an async iterator that re-opens the stream from its last cursor when the connection drops
        (see :class:`~memoryd.client.AsyncWatch`). It yields the ``WatchResponse`` of each change,
        and of each heartbeat too with ``heartbeats=True``.

            async with client.watch(subject="trip-7") as changes:
                async for event in changes:
                    print(event.change.kind, event.change.memory.text, changes.cursor)
        """
        async def open_stream(opening: svc.WatchRequest, channel: Any) -> Any:
            stub = self._memory if channel is None else svc_grpc.MemoryServiceStub(channel)
            # No timeout: the stream lives until the caller closes it.
            return stub.Watch(opening, metadata=metadata_for(await self._token(), trace_metadata()))

        return AsyncWatch(open_stream, build_request(svc.WatchRequest, request, fields), policy=self.retry,
                          heartbeats=heartbeats,
                          heartbeat_interval=self.heartbeat_interval if heartbeat_interval is None else heartbeat_interval,
                          connect=self._connect)

    async def end_session(self, request: svc.EndSessionRequest | None = None, /, *, timeout: float | None = None,
                          **fields: Any) -> svc.EndSessionResponse:
        """End a subject's session and store its snapshot; returns it as the caller's view shows it.

            await client.end_session(subject="user-42", session_id="chat-2026-05-01")
        """
        return await self._call(self._memory, "EndSession", svc.EndSessionResponse,
                                build_request(svc.EndSessionRequest, request, fields), timeout)

    async def resume_session(self, request: svc.ResumeSessionRequest | None = None, /, *,
                             timeout: float | None = None, **fields: Any) -> svc.ResumeSessionResponse:
        """The latest session snapshot of a subject that the caller's view reads; NotFound when none.

            snapshot = (await client.resume_session(subject="user-42")).snapshot
        """
        return await self._call(self._memory, "ResumeSession", svc.ResumeSessionResponse,
                                build_request(svc.ResumeSessionRequest, request, fields), timeout)

    # --- ViewAdminService (tokens with the admin role) ------------------------------------

    async def put_view(self, request: admin.PutViewRequest | None = None, /, *, timeout: float | None = None,
                 **fields: Any) -> admin.PutViewResponse:
        """Create or replace an agent's view.

            await client.put_view(view=pb.View(agent="support-bot", read_rules=[...], visible_fields=["text"]))
        """
        return await self._call(self._admin, "PutView", admin.PutViewResponse, build_request(admin.PutViewRequest, request, fields), timeout)

    async def get_view(self, request: admin.GetViewRequest | None = None, /, *, timeout: float | None = None,
                 **fields: Any) -> admin.GetViewResponse:
        """The view of one agent."""
        return await self._call(self._admin, "GetView", admin.GetViewResponse, build_request(admin.GetViewRequest, request, fields), timeout)

    async def list_views(self, request: admin.ListViewsRequest | None = None, /, *, timeout: float | None = None,
                   **fields: Any) -> admin.ListViewsResponse:
        """One page of the tenant's views (see :meth:`iter_views`)."""
        return await self._call(self._admin, "ListViews", admin.ListViewsResponse, build_request(admin.ListViewsRequest, request, fields),
                          timeout)

    async def iter_views(self, *, page_size: int = 0, timeout: float | None = None) -> AsyncIterator[pb.View]:
        """Every view of the tenant, page after page."""
        token = ""
        while True:
            page = await self.list_views(page_size=page_size, page_token=token, timeout=timeout)
            for view in page.views:
                yield view
            token = page.next_page_token
            if not token:
                return

    async def delete_view(self, request: admin.DeleteViewRequest | None = None, /, *, timeout: float | None = None,
                    **fields: Any) -> admin.DeleteViewResponse:
        """Remove an agent's view (the agent is then denied everything)."""
        return await self._call(self._admin, "DeleteView", admin.DeleteViewResponse, build_request(admin.DeleteViewRequest, request, fields),
                          timeout)

    # --- TokenAdminService (tokens with the admin role) -----------------------------------

    async def issue_token(self, request: token_admin.IssueTokenRequest | None = None, /, *,
                    timeout: float | None = None, **fields: Any) -> token_admin.IssueTokenResponse:
        """Mint a token for an agent of the caller's tenant, no more powerful than the caller's
        (never retried: each call mints a new token).

            client.issue_token(agent="support-bot", lifetime=Duration(seconds=3600))
        """
        return await self._call(self._tokens, "IssueToken", token_admin.IssueTokenResponse,
                               build_request(token_admin.IssueTokenRequest, request, fields), timeout)

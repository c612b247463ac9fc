"""The resuming Watch iterators, blocking and asyncio (clients/conformance/policy.json, "watch").

A Watch stream lives for hours; connections do not. The iterator remembers the cursor of the
last message it received and re-opens the stream from it when the server goes away
(UNAVAILABLE), when the stream ends without an error before the caller closed it, or when
nothing — not even a heartbeat — arrived for ``WATCH_STALL_FACTOR`` heartbeat intervals (a
half-open connection never fails by itself: after silence the stream re-opens on a new
connection when the client made its own channel). The server delivers every change after a
cursor exactly once, so a re-open loses nothing and repeats nothing. Any other error ends the
iteration with the client's typed error.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from memoryd.v1 import memory_service_pb2 as svc

from ._errors import from_rpc_error
from ._options import RetryPolicy

__all__ = ["WATCH_HEARTBEAT", "WATCH_STALL_FACTOR", "Watch", "AsyncWatch"]

WATCH_HEARTBEAT = 15.0
"""Seconds between the server's heartbeats on an idle stream unless the client is told otherwise."""

WATCH_STALL_FACTOR = 3
"""A stream silent for this many heartbeat intervals is taken for dead and re-opened."""


class _Resume:
    """What both iterators share: the request to (re-)open with, the last cursor, and the
    backoff between re-opens (n counts the re-opens since the last message received)."""

    def __init__(self, request: svc.WatchRequest, policy: RetryPolicy, heartbeats: bool,
                 heartbeat_interval: float | None) -> None:
        self._request = svc.WatchRequest()
        self._request.CopyFrom(request)  # the caller's message is never changed
        self.cursor = request.cursor
        self.policy = policy
        self.heartbeats = heartbeats
        self.stall = WATCH_STALL_FACTOR * heartbeat_interval if heartbeat_interval else None
        self._reopens = 0

    def request(self) -> svc.WatchRequest:
        """The request of the next open: the caller's, from the last cursor received."""
        request = svc.WatchRequest()
        request.CopyFrom(self._request)
        request.cursor = self.cursor
        return request

    def received(self, message: svc.WatchResponse) -> bool:
        """Note a message; whether to hand it to the caller."""
        if message.cursor:
            self.cursor = message.cursor
        self._reopens = 0
        return message.HasField("change") or self.heartbeats

    def resumes_after(self, code: grpc.StatusCode) -> bool:
        return code in self.policy.codes

    def backoff(self) -> float:
        self._reopens += 1
        return self.policy.backoff(self._reopens)


class Watch:
    """The changes a Watch streams, as a blocking iterator that resumes by itself; made by
    :meth:`MemorydClient.watch <memoryd.client.MemorydClient.watch>`.

    Iterating yields :class:`WatchResponse` messages with a ``change`` (and heartbeats too when
    asked). ``cursor`` is the cursor of the last message received: persist it, and a later
    ``client.watch(..., cursor=saved)`` delivers every change after it exactly once. ``close()``
    (from any thread) ends the iteration; so does leaving a ``with`` block. An error other than
    the ones it resumes after raises the :class:`~memoryd.client.MemorydError` subclass and
    closes the watch.
    """

    def __init__(self, opener: Callable[[svc.WatchRequest, grpc.Channel | None], Any], request: svc.WatchRequest, *,
                 policy: RetryPolicy, heartbeats: bool, heartbeat_interval: float | None,
                 connect: Callable[[], grpc.Channel] | None = None) -> None:
        self._open_call = opener
        self._resume = _Resume(request, policy, heartbeats, heartbeat_interval)
        self._connect = connect
        self._channel: grpc.Channel | None = None  # its own, after a silence; None: the client's
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._call: Any = None
        self._stalled: Any = None  # the call the watchdog cancelled for silence
        self._reading = False  # silence counts only while waiting for the server
        self._last = time.monotonic()
        self._watchdog: threading.Thread | None = None

    @property
    def cursor(self) -> str:
        """The cursor of the last message received (the request's own before any)."""
        return self._resume.cursor

    def __iter__(self) -> Watch:
        return self

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel the stream and end the iteration; safe to call twice, or from another thread."""
        self._closing.set()
        with self._lock:
            call, self._call = self._call, None
            channel, self._channel = self._channel, None
        if call is not None:
            call.cancel()
        if channel is not None:
            channel.close()

    def wait_open(self, timeout: float | None = None) -> bool:
        """Open the stream now, and wait until the server has accepted it (its response headers
        arrived): a change committed after that is delivered. False if that took longer than
        ``timeout`` seconds. An error the server answered with is raised by the next ``next()``."""
        call = self._current()
        if call is None:
            return False
        accepted = threading.Event()

        def headers() -> None:
            call.initial_metadata()  # returns when the headers arrive or the call ends; no timeout
            accepted.set()

        threading.Thread(target=headers, name="memoryd-watch-open", daemon=True).start()
        return accepted.wait(timeout)

    def __next__(self) -> svc.WatchResponse:
        while (call := self._current()) is not None:
            self._waiting(True)
            try:
                message: svc.WatchResponse = next(call)
            except StopIteration:  # ended without an error: resume, unless the caller closed it
                self._drop(call)
            except grpc.RpcError as error:
                self._drop(call)
                if self._closing.is_set():
                    break
                if call is self._stalled:
                    self._reconnect()
                elif not self._resume.resumes_after(error.code()):
                    self.close()
                    raise from_rpc_error(error) from None
            else:
                if self._resume.received(message):
                    return message
                continue
            finally:
                self._waiting(False)
            self._closing.wait(self._resume.backoff())
        raise StopIteration

    def _current(self) -> Any:
        """The open call (opened now if need be), or None once closed."""
        with self._lock:
            if self._closing.is_set():  # checked under the lock close() takes: no call opens after it
                return None
            if self._call is None:
                self._call = self._open_call(self._resume.request(), self._channel)
            if self._watchdog is None and self._resume.stall:
                self._watchdog = threading.Thread(target=self._watch_for_silence, args=(self._resume.stall,),
                                                  name="memoryd-watch-stall", daemon=True)
                self._watchdog.start()
            call: Any = self._call
            return call

    def _drop(self, call: Any) -> None:
        with self._lock:
            if self._call is call:
                self._call = None

    def _waiting(self, reading: bool) -> None:
        with self._lock:
            self._reading, self._last = reading, time.monotonic()

    def _reconnect(self) -> None:
        """After silence: the next open goes over a new connection of the watch's own."""
        if self._connect is None:
            return
        fresh = self._connect()
        with self._lock:
            old, self._channel = self._channel, fresh
        if old is not None:
            old.close()

    def _watch_for_silence(self, stall: float) -> None:
        # One thread per watch: the blocking iterator has no read timeout, so silence is
        # noticed here and the silent call cancelled, which wakes the reader to re-open.
        while not self._closing.wait(max(0.0, self._last + stall - time.monotonic())):
            with self._lock:
                if self._reading and self._call is not None and time.monotonic() - self._last >= stall:
                    self._stalled = self._call
                    self._call.cancel()
                    self._last = time.monotonic()


class AsyncWatch:
    """The asyncio form of :class:`Watch`, made by :meth:`AsyncMemorydClient.watch
    <memoryd.client.AsyncMemorydClient.watch>`: ``async for`` over it, ``await close()`` (or
    ``async with``) to end it; ``cursor`` as in :class:`Watch`."""

    def __init__(self, opener: Callable[[svc.WatchRequest, grpc.aio.Channel | None], Awaitable[Any]],
                 request: svc.WatchRequest, *, policy: RetryPolicy, heartbeats: bool,
                 heartbeat_interval: float | None, connect: Callable[[], grpc.aio.Channel] | None = None) -> None:
        self._open_call = opener
        self._resume = _Resume(request, policy, heartbeats, heartbeat_interval)
        self._connect = connect
        self._channel: grpc.aio.Channel | None = None  # its own, after a silence; None: the client's
        self._closed = False
        self._call: Any = None

    @property
    def cursor(self) -> str:
        """The cursor of the last message received (the request's own before any)."""
        return self._resume.cursor

    def __aiter__(self) -> AsyncWatch:
        return self

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancel the stream and end the iteration; safe to call twice."""
        self._closed = True
        call, self._call = self._call, None
        channel, self._channel = self._channel, None
        if call is not None:
            call.cancel()
        if channel is not None:
            await channel.close()

    async def wait_open(self, timeout: float | None = None) -> bool:
        """As :meth:`Watch.wait_open`."""
        call = await self._current()
        if call is None:
            return False
        try:
            await asyncio.wait_for(asyncio.shield(call.initial_metadata()), timeout)
        except TimeoutError:
            return False
        return True

    async def _current(self) -> Any:
        """The open call (opened now if need be), or None once closed."""
        if self._call is None and not self._closed:
            call = await self._open_call(self._resume.request(), self._channel)
            if self._closed:  # closed while the token was fetched: that call is not wanted
                call.cancel()
                return None
            self._call = call
        return self._call if not self._closed else None

    async def __anext__(self) -> svc.WatchResponse:
        while (call := await self._current()) is not None:
            try:
                message = await asyncio.wait_for(call.read(), self._resume.stall)
            except TimeoutError:  # silence: the connection may be half-open
                call.cancel()
                if self._connect is not None:
                    old, self._channel = self._channel, self._connect()
                    if old is not None:
                        await old.close()
            except asyncio.CancelledError:
                if not self._closed:  # our task was cancelled, not the stream closed
                    raise
                break
            except grpc.aio.AioRpcError as error:
                if self._closed:
                    break
                if not self._resume.resumes_after(error.code()):
                    await self.close()
                    raise from_rpc_error(error) from None
            else:
                if message is not grpc.aio.EOF:
                    if self._resume.received(message):
                        return message  # type: ignore[no-any-return]
                    continue
            if self._call is call:
                self._call = None
            if not self._closed:
                await asyncio.sleep(self._resume.backoff())
        raise StopAsyncIteration

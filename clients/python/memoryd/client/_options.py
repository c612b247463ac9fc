"""What both clients share: credentials, deadlines, the retry policy and which calls may be retried."""

from __future__ import annotations

import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

import grpc
from google.protobuf.message import Message

from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import token_admin_service_pb2 as token_admin
from memoryd.v1 import view_admin_service_pb2 as admin

__all__ = ["TLS", "Keepalive", "KEEPALIVE", "RetryPolicy", "DEFAULT_TIMEOUT", "Token", "AsyncToken"]

DEFAULT_TIMEOUT = 30.0
"""Seconds each attempt of a call may take unless the client or the call says otherwise."""


def _read(value: bytes | str | Path | None) -> bytes | None:
    """PEM given as bytes, or a path to a PEM file."""
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


@dataclass(frozen=True)
class TLS:
    """TLS to the server; with ``client_cert`` and ``client_key`` it is mutual TLS (the
    certificate then names the caller, as a service mesh would).

    Each PEM is bytes or a path to a file. ``ca_cert`` defaults to the system roots.
    ``server_name`` overrides the name checked in the server's certificate.

        TLS(ca_cert="ca.pem", client_cert="agent.pem", client_key="agent-key.pem")
    """

    ca_cert: bytes | str | Path | None = None
    client_cert: bytes | str | Path | None = None
    client_key: bytes | str | Path | None = None
    server_name: str = ""

    def channel_credentials(self) -> grpc.ChannelCredentials:
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("mutual TLS needs both client_cert and client_key")
        return grpc.ssl_channel_credentials(root_certificates=_read(self.ca_cert),
                                            private_key=_read(self.client_key),
                                            certificate_chain=_read(self.client_cert))

    def channel_options(self) -> list[tuple[str, Any]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


@dataclass(frozen=True)
class Keepalive:
    """HTTP/2 pings on the client's connection while it carries no data
    (clients/conformance/policy.json, ``"keepalive"``).

    After ``time`` seconds with nothing received the client pings; without an answer within
    ``timeout`` seconds it closes the connection, so the next call connects afresh instead of
    waiting out its deadline on a connection a NAT or proxy dropped without a word. With
    ``permit_without_calls`` it pings a channel with no call open too. A memoryd server accepts a
    ping every 5 s (``[keepalive] min_ping_interval_seconds``): a ``time`` under that gets the
    connection closed with GOAWAY ``too_many_pings``.
    """

    time: float = 30.0
    timeout: float = 10.0
    permit_without_calls: bool = True

    def channel_options(self) -> list[tuple[str, int]]:
        return [("grpc.keepalive_time_ms", round(self.time * 1000)),
                ("grpc.keepalive_timeout_ms", round(self.timeout * 1000)),
                ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
                # gRPC's core stops after 2 pings without data unless told otherwise; the
                # other languages' clients have no such limit.
                ("grpc.http2.max_pings_without_data", 0)]


KEEPALIVE = Keepalive()
"""The policy's keepalive, every client's default; ``keepalive=None`` sends no pings."""


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of calls that failed with UNAVAILABLE — and of no other code.

    Attempt n (from 1) waits ``min(max_backoff, initial_backoff * multiplier**(n-1))`` seconds,
    scaled by a random factor in [1 - jitter, 1] so clients that failed together do not retry
    together. ``max_attempts`` counts the first call; 1 turns retries off. Calls that are not
    idempotent (ResolveConflict, ImportMemories, PutView with an expected version, IssueToken)
    are never retried; Write is retried because the client gives it an idempotency key.
    """

    max_attempts: int = 4
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.5
    codes: frozenset[grpc.StatusCode] = field(default=frozenset({grpc.StatusCode.UNAVAILABLE}))

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        base = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return base * (1 - self.jitter * random.random())


NO_RETRY = RetryPolicy(max_attempts=1)
"""One attempt per call: for callers that retry themselves, or count failures (the benchmarks)."""


def wrong_reply(method: str, reply: type, answer: object) -> NoReturn:
    """A stub answered with another message than its method's: the generated code and the
    client disagree (a broken install), never something to hand to the caller."""
    raise TypeError(f"{method} answered a {type(answer).__name__}, not a {reply.__name__}")


def prepare(method: str, request: Message) -> tuple[Message, bool]:
    """Return the request to send (a Write gets an idempotency key if it has none) and
    whether retrying it is safe."""
    if isinstance(request, svc.WriteRequest):
        if not request.idempotency_key:
            copy = svc.WriteRequest()
            copy.CopyFrom(request)
            copy.idempotency_key = str(uuid.uuid4())
            request = copy
        return request, True
    if isinstance(request, admin.PutViewRequest):
        return request, request.expected_version == 0  # a replay would fail on the bumped version
    # The contract gives these no idempotency key: a replay could apply twice (IssueToken
    # would mint, and audit, a second token).
    return request, not isinstance(request, (svc.ResolveConflictRequest, svc.ImportMemoriesRequest,
                                             token_admin.IssueTokenRequest))


Token: TypeAlias = str | Callable[[], str] | None
"""A bearer token, or a provider called before every attempt of every call (so a refreshed
token is used without rebuilding the client); None or "" sends no ``authorization``."""

AsyncToken: TypeAlias = str | Callable[[], str] | Callable[[], Awaitable[str]] | None
"""As :data:`Token`; the asyncio client also awaits a coroutine function's result."""


def metadata_for(token: str | None, extra: tuple[tuple[str, str], ...] = ()) -> tuple[tuple[str, str], ...]:
    return ((("authorization", f"Bearer {token}"),) if token else ()) + tuple(extra)

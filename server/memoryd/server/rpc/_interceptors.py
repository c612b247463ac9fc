"""The interceptor chain, declared once (``build_chain``) and run for every memoryd RPC.

Order: request id → tracing → access log → metrics → error mapping → authentication →
caller scope → validation.
Each step is a small object called with the ``Call`` and ``next``, in the manner of
temporalio's interceptors. Health and reflection RPCs are not memoryd RPCs and pass through
untouched.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar, cast

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import DecodeError, Message
from opentelemetry import trace
from opentelemetry.trace import Status as SpanStatus
from opentelemetry.trace import StatusCode as SpanStatusCode

from memoryd.domain import (
    AuditTag,
    FieldViolation,
    Internal,
    InvalidArgument,
    MemorydError,
    Unauthenticated,
)

from .._auth import Principal, TokenVerifier
from .._config import Config
from ._errors import to_status
from ..telemetry import log_access
from ..telemetry import SERVER_ERRORS, Metrics
from ..credentials import peer_principal
from ._caller import Caller, reset_caller, set_caller
from ..usecases import Services
from ..telemetry import caller_context, current_trace_id
from ..views import AdminScope
from ..guard import Guard, check_admin, guard_for

PREFIX = "/memoryd.v1."
ADMIN_SERVICES = ("/memoryd.v1.ViewAdminService/", "/memoryd.v1.TokenAdminService/")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_log = logging.getLogger("memoryd.server")


# The context of a call as the handlers see it (grpc's class is generic only in its stubs).
Context: TypeAlias = "grpc.aio.ServicerContext[Message, Message]"
Req = TypeVar("Req")
Resp = TypeVar("Resp")


@dataclass
class Call:
    """One RPC as it moves through the chain."""

    method: str
    request: Message
    context: Context
    metadata: Mapping[str, tuple[str, ...]]
    request_id: str = ""
    principal: Principal | None = None
    code: grpc.StatusCode = grpc.StatusCode.OK
    extra: dict[str, Any] = field(default_factory=dict)


Next = Callable[[Call], Awaitable[Message]]


class Interceptor(Protocol):
    async def __call__(self, call: Call, next: Next) -> Message: ...


class RequestId:
    """Takes the caller's ``x-request-id`` if well-formed, else makes one; echoes it back."""

    async def __call__(self, call: Call, next: Next) -> Message:
        given = call.metadata.get("x-request-id", ())
        call.request_id = given[0] if len(given) == 1 and _REQUEST_ID.fullmatch(given[0]) else uuid.uuid4().hex
        call.context.set_trailing_metadata((("x-request-id", call.request_id),))
        return await next(call)


class Tracing:
    """One server span per RPC, a child of the caller's span when the call carries W3C trace
    context (``traceparent``); attributes as OpenTelemetry's RPC conventions name them. The
    status code is recorded, never the request's content."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    async def __call__(self, call: Call, next: Next) -> Message:
        with self._tracer.start_as_current_span(
            call.method[1:],
            context=caller_context(call.metadata),
            kind=trace.SpanKind.SERVER,
            attributes={"rpc.system.name": "grpc", "rpc.method": call.method[1:],
                        "memoryd.request_id": call.request_id},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await next(call)
            finally:
                span.set_attribute("rpc.response.status_code", call.code.name)
                if call.code in SERVER_ERRORS:
                    span.set_attribute("error.type", call.code.name)
                    span.set_status(SpanStatus(SpanStatusCode.ERROR, call.code.name))
                if call.principal is not None:
                    span.set_attribute("memoryd.tenant", call.principal.tenant)
                    span.set_attribute("memoryd.agent", call.principal.agent)


class AccessLog:
    """One access line per RPC once it has ended (``_logging``): request id, method, status
    code, duration, the caller's tenant and agent when authenticated, the trace id."""

    def __init__(self, enabled: bool = True) -> None:
        self._enabled = enabled

    async def __call__(self, call: Call, next: Next) -> Message:
        if not self._enabled:
            return await next(call)
        started = time.perf_counter()
        try:
            return await next(call)
        finally:
            principal = call.principal
            log_access({"request_id": call.request_id, "method": call.method[1:], "code": call.code.name,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                        "tenant": principal.tenant if principal else "",
                        "agent": principal.agent if principal else "",
                        "trace_id": current_trace_id()})


class RpcMetrics:
    """Times every RPC into ``rpc.server.call.duration`` by method and status code (after error
    mapping has set the code, since it runs inside this step)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def __call__(self, call: Call, next: Next) -> Message:
        started = time.perf_counter()
        try:
            return await next(call)
        except asyncio.CancelledError:
            if call.code == grpc.StatusCode.OK:
                call.code = grpc.StatusCode.CANCELLED
            raise
        finally:
            self._metrics.rpc(call.method, call.code, time.perf_counter() - started)


class ErrorMapping:
    """Turns the domain error tree into statuses; anything else becomes a sanitized INTERNAL."""

    async def __call__(self, call: Call, next: Next) -> Message:
        try:
            return await next(call)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except MemorydError as error:
            await self._abort(call, error)
        except Exception:
            _log.exception("unexpected error in %s (request id %s)", call.method, call.request_id)
            await self._abort(call, Internal("unexpected error"))
        raise AssertionError("unreachable")  # abort always raises

    @staticmethod
    async def _abort(call: Call, error: MemorydError) -> None:
        if isinstance(error, Internal):
            _log.error("internal error in %s (request id %s): %s", call.method, call.request_id, error.message)
        status = to_status(error, call.request_id)
        call.code = status.code
        metadata = (*status.trailing_metadata, ("x-request-id", call.request_id))
        await call.context.abort(status.code, status.details, metadata)


class Authentication:
    """The caller is named by ``authorization: Bearer <token>``, or by the verified client
    certificate's SPIFFE id when mTLS identity is on. Nothing else in the metadata is trusted.

    With both, they must name the same tenant and agent (the token may add roles and a
    subject binding). A revoked token is refused like a forged one, after its signature is
    checked, so the deny list is read only for tokens the server issued.
    """

    def __init__(self, verifier: TokenVerifier, *, mtls: bool = False, trust_domain: str = "") -> None:
        self._verifier = verifier
        self._mtls = mtls
        self._trust_domain = trust_domain

    async def __call__(self, call: Call, next: Next) -> Message:
        call.principal = await self.principal(call)
        # A stream asks again while it runs: the same credential, checked the same way.
        call.extra["authenticate"] = lambda: self.principal(call)
        return await next(call)

    async def principal(self, call: Call) -> Principal:
        """The caller the call's credential names (now: a token may have expired or been
        revoked since the call began)."""
        peer = peer_principal(call.context.auth_context(), self._trust_domain) if self._mtls else None
        values = call.metadata.get("authorization", ())
        if not values:
            if peer is None:
                raise Unauthenticated("missing credential: send 'authorization: Bearer <token>'",
                                      reason="TOKEN_MISSING")
            return peer
        scheme, _, token = values[0].partition(" ")
        if len(values) != 1 or scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the authorization metadata must be one 'Bearer <token>'")
        principal = self._verifier.verify(token.strip())
        if await self._verifier.is_revoked(principal):
            raise Unauthenticated("the bearer token has been revoked", reason="TOKEN_INVALID")
        if peer is not None and (peer.tenant, peer.agent) != (principal.tenant, principal.agent):
            raise Unauthenticated("the token and the client certificate name different callers")
        return principal


class CallerScopeStep:
    """Puts the caller's scope in the request context (``_caller``), as the guard allows it.

    A ViewAdminService or TokenAdminService call gets an admin scope if the guard's
    ``check_admin`` lets the principal administer the tenant. Any other call gets the guard the
    guard's ``guard_for`` builds from the agent's stored view (it denies an agent without one).
    This step only looks the view up; the guard makes every decision.
    """

    def __init__(self, services: Services) -> None:
        self._services = services

    async def __call__(self, call: Call, next: Next) -> Message:
        principal = call.principal
        if principal is None:
            raise Internal("caller scope before authentication")
        scope: Caller | AdminScope
        if call.method.startswith(ADMIN_SERVICES):
            check_admin(principal)
            scope = AdminScope(principal, self._services.views, self._services.page_tokens, call.request_id)
        else:
            guard = await self._guard(principal)
            authenticate = call.extra.get("authenticate")

            async def renew() -> Guard:
                if authenticate is None:
                    raise Internal("caller scope without authentication")
                return await self._guard(await authenticate())

            # Every audit event of the call names the request, its trace and the view version.
            scope = Caller(guard, AuditTag(call.request_id, current_trace_id(), guard.view.version), renew)
        token = set_caller(scope)
        try:
            return await next(call)
        finally:
            reset_caller(token)


    async def _guard(self, principal: Principal) -> Guard:
        return guard_for(principal, await self._services.views.view_for(principal.tenant, principal.agent))


class Validation:
    """Refuses a request whose bytes did not parse (``Undecodable``). Each handler then
    validates its typed request into a typed command (``memoryd.server.validation``) before its use case."""

    async def __call__(self, call: Call, next: Next) -> Message:
        if isinstance(call.request, Undecodable):
            raise InvalidArgument(FieldViolation("", f"the request is not a valid {call.request.type_name}: "
                                                     f"{call.request.error}"))
        return await next(call)


def build_chain(*, verifier: TokenVerifier, services: Services, config: Config,
                tracer: trace.Tracer, metrics: Metrics | None = None) -> list[Interceptor]:
    """The chain, in order. ``tests/domain/test_interceptor_order.py`` pins this order."""
    return [
        RequestId(),
        Tracing(tracer),
        AccessLog(config.access_log),
        RpcMetrics(metrics if metrics is not None else Metrics(config)),
        ErrorMapping(),
        Authentication(verifier, mtls=bool(config.tls_client_ca_file), trust_domain=config.tls_trust_domain),
        CallerScopeStep(services),
        Validation(),
    ]


@dataclass(frozen=True)
class Undecodable:
    """A request whose bytes did not parse (corrupt wire format, invalid UTF-8 in a string,
    nesting past the parser's depth limit). gRPC would answer UNKNOWN/INTERNAL for a failing
    deserializer; the chain refuses it as INVALID_ARGUMENT after authentication instead."""

    type_name: str
    error: str


def _lenient(deserialize: Callable[[bytes], object] | None) -> Callable[[bytes], object] | None:
    if deserialize is None:
        return None
    type_name = getattr(getattr(deserialize, "__self__", None), "DESCRIPTOR", None)
    name = type_name.full_name if type_name is not None else "request"

    def parse(data: bytes) -> object:
        try:
            return deserialize(data)
        except DecodeError as error:
            return Undecodable(name, str(error))

    return parse


class ChainInterceptor(grpc.aio.ServerInterceptor):
    """Runs the chain around every memoryd.v1 handler: a unary one, or a server-streaming one
    (Watch), whose whole stream runs inside the chain — one span, one access line and one
    duration for the stream, its errors mapped by ``ErrorMapping`` even after messages were
    sent, the caller's scope set while it runs."""

    def __init__(self, chain: Sequence[Interceptor]) -> None:
        self._chain = list(chain)

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Req, Resp] | None]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Req, Resp] | None:
        handler = await continuation(details)
        method = details.method
        if handler is None or not method.startswith(PREFIX):
            return handler
        chain = self._chain

        def call_of(request: Message, context: Context) -> Call:
            metadata: dict[str, tuple[str, ...]] = {}
            for key, value in details.invocation_metadata or ():
                if isinstance(value, str):
                    metadata[key.lower()] = (*metadata.get(key.lower(), ()), value)
            return Call(method=method, request=request, context=context, metadata=metadata)

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def run(request: Message, context: Context) -> Message:
                return await _run(chain, 0, call_of(request, context), inner)

            wrapped = grpc.unary_unary_rpc_method_handler(
                run, request_deserializer=_lenient(handler.request_deserializer),
                response_serializer=handler.response_serializer)
        elif handler.unary_stream is not None:
            # grpc.aio serves async generators; its stubs type the handler as a sync one.
            streaming = _writing(cast("Callable[..., AsyncIterator[Message]]", handler.unary_stream))

            async def run_stream(request: Message, context: Context) -> None:
                await _run(chain, 0, call_of(request, context), streaming)

            wrapped = grpc.unary_stream_rpc_method_handler(
                run_stream, request_deserializer=_lenient(handler.request_deserializer),
                response_serializer=handler.response_serializer)
        else:
            return handler
        # The same messages in and out as the handler it wraps (grpc's stubs cannot say so).
        return cast("grpc.RpcMethodHandler[Req, Resp]", wrapped)


def _writing(stream: Callable[..., AsyncIterator[Message]]) -> Callable[..., Awaitable[Message]]:
    """A server-streaming handler as the chain's innermost step: each message written as it
    comes (``context.write`` waits while the client is not reading: flow control), then an
    empty answer for the steps around it (the stream's messages have gone already)."""
    async def write_all(request: Message, context: Context) -> Message:
        async for message in stream(request, context):
            await context.write(message)
        return empty_pb2.Empty()

    return write_all


async def _run(chain: Sequence[Interceptor], index: int, call: Call, inner: Callable[..., Any]) -> Message:
    if index == len(chain):
        answer: Message = await inner(call.request, call.context)
        return answer
    return await chain[index](call, lambda c: _run(chain, index + 1, c, inner))

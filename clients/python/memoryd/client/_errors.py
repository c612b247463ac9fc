"""Typed errors for failed memoryd calls, one class per gRPC status code.

    MemorydError                 every failed call (.code, .message, .reason, .request_id, .details)
    ├── Cancelled
    ├── Unknown
    ├── InvalidArgument          .violations: {field: description} from google.rpc.BadRequest
    ├── DeadlineExceeded
    ├── NotFound
    ├── AlreadyExists
    ├── PermissionDenied
    ├── ResourceExhausted
    ├── FailedPrecondition
    ├── Aborted
    ├── OutOfRange
    ├── Unimplemented
    ├── Internal
    ├── Unavailable              the only code the client retries
    ├── DataLoss
    └── Unauthenticated

``reason`` is the ``google.rpc.ErrorInfo`` reason memoryd sends (``"VIEW_DENIED"``,
``"TOKEN_MISSING"``, … — the ``memoryd.v1.ErrorReason`` names without their prefix)::

    try:
        client.recall(subject="user-42", keys=["iban"])
    except PermissionDenied as error:
        print(error.reason, error.request_id)

``from_rpc_error`` is the one decoder of a failed call's status details: the clients, the
``memoryd`` command and the test suite all read errors through it.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import message as _message
from google.rpc import error_details_pb2
from grpc_status import rpc_status

__all__ = [
    "MemorydError", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
    "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated", "from_rpc_error",
]

_DETAIL_TYPES: tuple[type[_message.Message], ...] = (
    error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.RetryInfo,
    error_details_pb2.DebugInfo, error_details_pb2.QuotaFailure, error_details_pb2.PreconditionFailure,
    error_details_pb2.ResourceInfo, error_details_pb2.RequestInfo, error_details_pb2.Help,
    error_details_pb2.LocalizedMessage,
)


class MemorydError(Exception):
    """A memoryd call failed.

    Attributes:
        code: the gRPC status code.
        message: the status message (safe to show; never another tenant's data).
        reason: the ``ErrorInfo`` reason, e.g. ``"VIEW_DENIED"`` ("" when the server sent none,
            as for transport failures).
        domain: the ``ErrorInfo`` domain (``"memoryd"``).
        request_id: the server's request id (quote it when reporting a problem), or "".
        details: every status detail, unpacked (``ErrorInfo``, ``BadRequest``, …).
        violations: ``{field: description}`` from a ``BadRequest`` detail (empty if none).
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None, reason: str = "",
                 domain: str = "", request_id: str = "", details: tuple[_message.Message, ...] = (),
                 violations: dict[str, str] | None = None, metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.reason = reason
        self.domain = domain
        self.request_id = request_id
        self.details = details
        self.violations = dict(violations or {})
        self.metadata = dict(metadata or {})

    def __str__(self) -> str:
        parts = [f"{self.code.name}: {self.message}"]
        if self.reason:
            parts.append(f"reason={self.reason}")
        if self.violations:
            parts.append("violations=" + ", ".join(f"{k}: {v}" for k, v in self.violations.items()))
        if self.request_id:
            parts.append(f"request_id={self.request_id}")
        return " ".join(parts)


class Cancelled(MemorydError):
    code = grpc.StatusCode.CANCELLED


class Unknown(MemorydError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(MemorydError):
    """Bad input; ``violations`` names every bad field (``{"items[0].text": "is required"}``)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(MemorydError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(MemorydError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(MemorydError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(MemorydError):
    """Outside the caller's view (``reason`` says which check: VIEW_DENIED, VIEW_MISSING, …)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(MemorydError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(MemorydError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(MemorydError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(MemorydError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(MemorydError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(MemorydError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(MemorydError):
    """The server or one of its stores is unreachable; nothing was half-written. Retried."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(MemorydError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(MemorydError):
    """No credential, or an invalid or expired one (``reason``: TOKEN_MISSING, …)."""

    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[grpc.StatusCode, type[MemorydError]] = {
    cls.code: cls for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                              PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                              Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
}


def _unpack(detail: Any) -> _message.Message | None:
    for kind in _DETAIL_TYPES:
        if detail.Is(kind.DESCRIPTOR):
            unpacked = kind()
            detail.Unpack(unpacked)
            return unpacked
    return None


def from_status(code: grpc.StatusCode, message: str, status: Any, trailing: Any) -> MemorydError:
    """Build the typed error from a status code, its message, the decoded google.rpc.Status
    (or None) and the trailing metadata."""
    details: list[_message.Message] = []
    reason = domain = request_id = ""
    violations: dict[str, str] = {}
    info_metadata: dict[str, str] = {}
    for packed in status.details if status is not None else ():
        detail = _unpack(packed)
        if detail is None:
            continue
        details.append(detail)
        if isinstance(detail, error_details_pb2.ErrorInfo):
            reason, domain, info_metadata = detail.reason, detail.domain, dict(detail.metadata)
            request_id = detail.metadata.get("request_id", "")
        elif isinstance(detail, error_details_pb2.BadRequest):
            violations.update({v.field: v.description for v in detail.field_violations})
    for key, value in trailing or ():
        if key == "x-request-id" and not request_id:
            request_id = value if isinstance(value, str) else value.decode()
    cls = _BY_CODE.get(code, MemorydError)
    return cls(message, code=code, reason=reason, domain=domain, request_id=request_id, details=tuple(details),
               violations=violations, metadata=info_metadata)


def from_rpc_error(error: grpc.RpcError) -> MemorydError:
    """The typed error of a failed call, blocking (``grpc.RpcError``) or asyncio
    (``grpc.aio.AioRpcError``): its code and message, and what the ``google.rpc.Status`` in its
    trailers carries — the ``ErrorInfo`` reason, domain and request id, the ``BadRequest``
    violations, every detail unpacked. The clients raise what it returns; use it to read an
    error of a stub called directly::

        except grpc.RpcError as failed:
            error = from_rpc_error(failed)
            print(error.code.name, error.reason, error.violations)
    """
    call: Any = error
    try:
        status = rpc_status.from_call(call)
    except ValueError:  # the details' code or message disagree with the call's: ignore them
        status = None
    return from_status(call.code(), call.details() or "", status, tuple(call.trailing_metadata() or ()))

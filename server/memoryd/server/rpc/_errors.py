"""The one place where domain errors become gRPC statuses (AIP-193 style).

Every status carries a ``google.rpc.ErrorInfo`` (domain ``memoryd``, reason from
``memoryd.v1.ErrorReason``, the request id) and, for bad input, a ``google.rpc.BadRequest``
with one field violation per invalid field.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from memoryd.domain import (
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MemorydError,
    NotFound,
    NotImplementedYet,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

DOMAIN = "memoryd"

# Most specific first: IdempotencyKeyReused is a FailedPrecondition.
_CODES: tuple[tuple[type[MemorydError], int], ...] = (
    (InvalidArgument, code_pb2.INVALID_ARGUMENT),
    (Unauthenticated, code_pb2.UNAUTHENTICATED),
    (PermissionDenied, code_pb2.PERMISSION_DENIED),
    (NotFound, code_pb2.NOT_FOUND),
    (FailedPrecondition, code_pb2.FAILED_PRECONDITION),
    (ResourceExhausted, code_pb2.RESOURCE_EXHAUSTED),
    (NotImplementedYet, code_pb2.UNIMPLEMENTED),
    (Unavailable, code_pb2.UNAVAILABLE),
    (Internal, code_pb2.INTERNAL),
)


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


# gRPC clients drop trailers over 8-16 KiB, so the violations sent are capped well below that;
# the first ones are sent and the status message says how many there were in all.
MAX_VIOLATION_BYTES = 4096


def _bad_request(error: InvalidArgument) -> error_details_pb2.BadRequest:
    bad = error_details_pb2.BadRequest()
    used = 0
    for v in error.violations:
        cost = len(v.field) + len(v.description) + 8
        if used + cost > MAX_VIOLATION_BYTES:
            break  # the status message still gives the total count
        bad.field_violations.add(field=v.field, description=v.description)
        used += cost
    return bad


def to_status(error: MemorydError, request_id: str) -> grpc.Status:
    """Map a domain error to a rich gRPC status. Internal errors are never described."""
    code = next((c for kind, c in _CODES if isinstance(error, kind)), code_pb2.INTERNAL)
    message = error.message
    if code == code_pb2.INTERNAL:
        message = f"internal error (request id {request_id})"
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata={"request_id": request_id})
    details = [_pack(info)]
    if isinstance(error, InvalidArgument):
        details.append(_pack(_bad_request(error)))
    status = status_pb2.Status(code=code, message=message, details=details)
    return rpc_status.to_status(status)

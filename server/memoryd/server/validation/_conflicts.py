"""Validation of ResolveConflict requests (every invalid field at once, like the whole package)."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.domain import Resolution
from memoryd.v1 import memory_service_pb2 as svc

from .._config import Limits
from .._enums import CONFLICT_RESOLUTION
from ._checker import Checker, uuid_field


@dataclass(frozen=True)
class ResolveConflictCommand:
    subject: str
    memory_id: str
    resolution: Resolution
    # The pending value to accept; with KEEP_CURRENT, the one to discard (empty: all).
    pending_id: str


def validate_resolve_conflict(request: svc.ResolveConflictRequest, limits: Limits) -> ResolveConflictCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    memory_id = uuid_field(check, "memory_id", request.memory_id, required=True)
    resolution = check.enum("resolution", request.resolution, CONFLICT_RESOLUTION.to_domain, required=True)
    pending_id = uuid_field(check, "pending_id", request.pending_id,
                            required=resolution is Resolution.ACCEPT_PENDING)
    check.done()
    return ResolveConflictCommand(subject, memory_id, resolution, pending_id)

"""Validation of EndSession and ResumeSession: a subject and a session id, whose presence and
grammar are the protos' annotated rules (``_schema``)."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.v1 import memory_service_pb2 as svc

from .._config import Limits
from ._checker import Checker


@dataclass(frozen=True)
class SessionCommand:
    """EndSession's session, or the one ResumeSession asks for ('' for the latest)."""

    subject: str
    session_id: str


def validate_end_session(request: svc.EndSessionRequest, limits: Limits) -> SessionCommand:
    return _session(request, limits)


def validate_resume_session(request: svc.ResumeSessionRequest, limits: Limits) -> SessionCommand:
    return _session(request, limits)


def _session(request: svc.EndSessionRequest | svc.ResumeSessionRequest, limits: Limits) -> SessionCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    check.done()
    return SessionCommand(subject, request.session_id)

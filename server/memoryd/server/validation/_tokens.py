"""Validation of TokenAdminService requests: every rule here, every invalid field reported at
once. A request that passes is well-formed; whether the caller may grant it is the guard's
decision (``guard.token_grant``)."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.v1 import token_admin_service_pb2 as tokens

from .._config import Limits
from .._enums import TOKEN_ROLE
from ._checker import Checker


@dataclass(frozen=True)
class IssueTokenCommand:
    agent: str
    roles: frozenset[str]
    subject: str
    lifetime_seconds: int | None  # None: the guard's default (``guard.DEFAULT_LIFETIME_SECONDS``)
    reason: str


def validate_issue_token(request: tokens.IssueTokenRequest, limits: Limits) -> IssueTokenCommand:
    check = Checker(limits, request)
    roles: set[str] = set()
    for i, role in enumerate(request.roles):
        name = check.enum(f"roles[{i}]", role, TOKEN_ROLE.to_domain, required=True)
        if name in roles:
            check.fail(f"roles[{i}]", "is given twice")
        elif name is not None:
            roles.add(name)
    lifetime: int | None = None
    if request.HasField("lifetime"):
        seconds, nanos = request.lifetime.seconds, request.lifetime.nanos
        if nanos:
            check.fail("lifetime", "must be whole seconds")
        lifetime = seconds
    if "\x00" in request.reason:
        check.fail("reason", "must not contain NUL characters")
    check.done()
    return IssueTokenCommand(request.agent, frozenset(roles or {"agent"}), request.subject, lifetime, request.reason)

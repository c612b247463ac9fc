"""The authorised caller of the running request, as the caller-scope step leaves it.

The chain's caller-scope step builds the caller's ``Guard`` (or, for ViewAdminService, its
``AdminScope``) and sets it here; handlers read it back typed and fail loudly when it is
missing (a handler reached outside the interceptor chain).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass

from memoryd.domain import AuditTag, Internal

from ..views import AdminScope
from ..guard import Guard


@dataclass(frozen=True)
class Caller:
    guard: Guard
    tag: AuditTag
    # The caller resolved again as the chain resolved it (credential, revocations, view): how
    # a long call (a Watch stream) sees a revoked token or a changed view.
    renew: Callable[[], Awaitable[Guard]] | None = None


_CURRENT: ContextVar[Caller | AdminScope | None] = ContextVar("memoryd_caller", default=None)


def current_caller() -> Caller:
    caller = _CURRENT.get()
    if not isinstance(caller, Caller):
        raise Internal("no caller: the handler ran outside the interceptor chain")
    return caller


def current_admin() -> AdminScope:
    scope = _CURRENT.get()
    if not isinstance(scope, AdminScope):
        raise Internal("no admin scope: the handler ran outside the interceptor chain")
    return scope


def set_caller(caller: Caller | AdminScope | None) -> Token[Caller | AdminScope | None]:
    return _CURRENT.set(caller)


def reset_caller(token: Token[Caller | AdminScope | None]) -> None:
    _CURRENT.reset(token)

"""The guard's rule for minting tokens (TokenAdminService.IssueToken): a minted token never
has more power than the credential that asks for it.

- the tenant is the caller's, from its credential; the request has no tenant field;
- the caller holds the admin role, on a credential not bound to a subject (checked by the
  chain's caller-scope step, and again here);
- the token's roles are roles the caller may grant: its own, and ``agent`` for an admin (the
  agent role adds no right by itself: an agent may do what its view allows, and views are
  the admin's to set) — so an admin token made with ``--role admin`` alone can mint agents;
- the token expires no later than the caller's own token, so a leaked short-lived admin
  token cannot be stretched into a long-lived one: a lifetime asked for that reaches past it
  is refused, the default (one hour) is shortened to it (a caller authenticated by its
  client certificate alone has no token expiry: the 30-day maximum of the request applies);
- any agent name of the tenant may be named: an admin already decides every agent's view
  (ViewAdminService), so a token for another agent grants nothing the admin could not give.
A token bound to a subject may be minted: it has less power than the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from memoryd.domain import FieldViolation, InvalidArgument, PermissionDenied

from .._auth import Principal

DEFAULT_LIFETIME_SECONDS = 3600


class TokenRequest(Protocol):
    """What IssueToken asks for, as validated (``validation.IssueTokenCommand``)."""

    @property
    def agent(self) -> str: ...
    @property
    def roles(self) -> frozenset[str]: ...
    @property
    def subject(self) -> str: ...
    @property
    def lifetime_seconds(self) -> int | None: ...  # None: not asked for


@dataclass(frozen=True)
class TokenGrant:
    """What a minted token carries, as the guard allowed it (times in seconds since the epoch)."""

    tenant: str
    agent: str
    roles: frozenset[str]
    subject: str
    issued_at: int
    expires_at: int


def token_grant(principal: Principal, cmd: TokenRequest, now: int) -> TokenGrant:
    """What the token ``cmd`` asks for may carry, minted at ``now`` by ``principal``; PERMISSION_DENIED
    when the caller may not mint it, INVALID_ARGUMENT for a lifetime past the caller's own."""
    if not principal.is_admin:
        raise PermissionDenied("this call needs the admin role", reason="ROLE_REQUIRED")
    if principal.subject:
        raise PermissionDenied("a credential bound to a subject cannot mint tokens", reason="SUBJECT_NOT_ALLOWED")
    grantable = principal.roles | ({"agent"} if principal.is_admin else set())
    beyond = cmd.roles - grantable
    if beyond:
        raise PermissionDenied(f"a minted token carries only roles the caller holds; yours lacks "
                               f"{', '.join(sorted(beyond))}", reason="ROLE_REQUIRED")
    left = principal.token_expires - now if principal.token_expires else None
    lifetime = cmd.lifetime_seconds
    if lifetime is None:  # not asked for: an hour, or what is left of the caller's token
        lifetime = DEFAULT_LIFETIME_SECONDS if left is None else min(DEFAULT_LIFETIME_SECONDS, left)
    expires = now + lifetime
    if lifetime < 1 or (principal.token_expires and expires > principal.token_expires):
        raise InvalidArgument(FieldViolation(
            "lifetime", f"must end by the expiry of the calling token ({max(left or 0, 0)} s from now): a minted "
                        "token never outlives the one that minted it"))
    return TokenGrant(principal.tenant, cmd.agent, cmd.roles, cmd.subject, now, expires)

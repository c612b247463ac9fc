"""IssueToken: the guard decides what the token may carry, the issuance is audited, then the
token is signed and handed out."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from memoryd.domain import AuditTag
from memoryd.v1 import token_admin_service_pb2 as tokens

from .._auth import Principal
from .._auth import issue_token as sign_token
from ._services import TokenMint
from ..validation import IssueTokenCommand
from .. import present
from ..guard import token_grant


@dataclass(frozen=True)
class AdminCall:
    """One TokenAdminService call: the admin that makes it and the audit tag of its events."""

    principal: Principal
    tag: AuditTag
    mint: TokenMint


async def issue(call: AdminCall, cmd: IssueTokenCommand) -> tokens.IssueTokenResponse:
    grant = token_grant(call.principal, cmd, int(time.time()))
    token_id = uuid.uuid4().hex
    # Recorded first: if the audit event cannot be written, the call fails (UNAVAILABLE) and
    # the token is never returned, so no minted token exists without its event.
    await call.mint.ledger.record_issue(
        grant.tenant, call.principal.agent, token_id=token_id, agent=grant.agent, roles=sorted(grant.roles),
        subject=grant.subject, expires_at=datetime.fromtimestamp(grant.expires_at, UTC), reason=cmd.reason,
        tag=call.tag)
    token = sign_token(call.mint.signing_key, tenant=grant.tenant, agent=grant.agent, roles=tuple(sorted(grant.roles)),
                       subject=grant.subject, ttl_seconds=grant.expires_at - grant.issued_at, now=grant.issued_at,
                       token_id=token_id)
    return present.issued_token(grant, token_id, token)

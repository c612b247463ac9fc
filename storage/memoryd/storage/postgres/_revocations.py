"""Bearer tokens in the tenant's records: the deny list of revoked token ids (``jti``), and
the audit events of tokens minted through a server.

A row matters only until its token expires; the clock skew the verifier allows is added so a
token is not accepted again in the seconds it still counts as unexpired. Each revocation is
appended to the tenant's audit chain in the same transaction.
"""

from __future__ import annotations

from datetime import datetime

from memoryd.domain import AuditTag

from . import _audit as audit
from ._postgres import Postgres

# Must cover the verifier's CLOCK_SKEW_SECONDS (30 s): an expired token is still accepted
# for that long, so its row must outlive the expiry by as much.
_GRACE = "5 minutes"


class PostgresRevocations:
    def __init__(self, db: Postgres) -> None:
        self._db = db

    async def revoke(self, tenant: str, token_id: str, expires_at: datetime | None, *, revoked_by: str,
                     reason: str = "", tag: AuditTag = AuditTag()) -> bool:
        """Add ``token_id`` to the tenant's deny list; False if it was there already."""
        async with self._db.tenant_tx(tenant) as conn:
            await conn.execute(
                f"DELETE FROM revoked_tokens WHERE tenant_id = %s AND expires_at < now() - interval '{_GRACE}'",
                (tenant,))
            cur = await conn.execute(
                "INSERT INTO revoked_tokens (tenant_id, jti, expires_at, revoked_by, reason) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant_id, jti) DO NOTHING", (tenant, token_id, expires_at, revoked_by, reason))
            if cur.rowcount != 1:
                return False
            await audit.append(conn, revoked_by, "", "token.revoke", [], tag,
                               {"jti": token_id, "expires_at": expires_at.isoformat() if expires_at else None,
                                "reason": reason})
            return True

    async def revoked(self, tenant: str) -> frozenset[str]:
        """The ids of the tenant's revoked tokens that could still be accepted."""
        async with self._db.tenant_tx(tenant) as conn:
            cur = await conn.execute(
                "SELECT jti FROM revoked_tokens WHERE tenant_id = %s "
                f"AND (expires_at IS NULL OR expires_at >= now() - interval '{_GRACE}')", (tenant,))
            rows = await cur.fetchall()
        return frozenset(r["jti"] for r in rows)


class PostgresTokenLedger:
    """Tokens minted through a server (TokenAdminService.IssueToken): each issuance is one
    event in the tenant's audit chain — who minted it, for which agent, roles, subject
    binding and expiry, and its id, never the token — committed before the token is handed
    out, so no minted token exists without its event."""

    def __init__(self, db: Postgres) -> None:
        self._db = db

    async def record_issue(self, tenant: str, issued_by: str, *, token_id: str, agent: str, roles: list[str],
                           subject: str, expires_at: datetime, reason: str = "", tag: AuditTag = AuditTag()) -> None:
        async with self._db.tenant_tx(tenant) as conn:
            await audit.append(conn, issued_by, subject, "token.issue", [], tag,
                               {"jti": token_id, "agent": agent, "roles": sorted(roles),
                                "expires_at": expires_at.isoformat(), "reason": reason})

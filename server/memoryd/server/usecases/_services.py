"""What use cases may use, built once at start-up, and the context one call runs in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memoryd.domain import AuditTag, TenantPolicy
from memoryd.storage import Stores, StoreSession

from .._config import Scoring
from ..ingest import ExtractionWorker
from ..telemetry import Metrics
from ..credentials import PageTokens
from ._access import AccessRecorder
from ._streams import WatchHub
from ..recall import Recaller
from ..views import ViewRegistry
from ..guard import Guard


class TokenLedger(Protocol):
    """Where issuances are recorded (``memoryd.storage.PostgresTokenLedger``)."""

    async def record_issue(self, tenant: str, issued_by: str, *, token_id: str, agent: str, roles: list[str],
                           subject: str, expires_at: datetime, reason: str = "", tag: AuditTag = AuditTag()) -> None: ...


@dataclass(frozen=True)
class TokenMint:
    """What a server mints tokens with: its current signing key and the tenants' records."""

    signing_key: Ed25519PrivateKey
    ledger: TokenLedger


@dataclass(frozen=True)
class Services:
    """The stores and workers of one server process. Use cases reach storage only through the
    call's tenant-bound session (``CallContext.session``): the index set, the outbox worker
    and the job queue are the stores' (``Stores.use_index``, ``Stores.use_jobs``), not here."""

    store: Stores
    views: ViewRegistry
    recaller: Recaller
    access: AccessRecorder
    scoring: Scoring
    page_tokens: PageTokens
    extraction: ExtractionWorker | None = None
    extraction_enabled: bool = False
    metrics: Metrics | None = None
    tokens: TokenMint | None = None  # IssueToken's signing key and audit ledger
    policy_for: Callable[[str], TenantPolicy] = lambda tenant: TenantPolicy()
    watch: WatchHub | None = None  # the open Watch streams and their wake-ups


@dataclass(frozen=True)
class CallContext:
    """One MemoryService call: the caller's guard, its tenant-bound store session, the
    process's services, the audit tag every event of the call carries, and its deadline."""

    guard: Guard
    session: StoreSession
    services: Services
    tag: AuditTag
    time_remaining: float | None = None

    @property
    def tenant(self) -> str:
        return self.guard.tenant

    def record_read(self, subject: str, action: str, ids: list[str], *, count_access: bool = False) -> None:
        """Audit what this caller received (batched off the request path)."""
        self.services.access.record(self.session, subject, action, ids, self.tag, count_access=count_access)

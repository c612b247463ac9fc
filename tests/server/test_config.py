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

"""The secrets under the keys folder, in process: where they come from, their versions, their
file modes, and what rotation and retirement change (the end-to-end run is in
tests/e2e/test_key_rotation.py)."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memoryd.domain import InvalidArgument, Unauthenticated
from memoryd.server import (
    KeyFiles,
    TokenVerifier,
    issue_token,
    load_or_create_signing_key,
    load_secrets,
    retire_signing_key,
    rotate_page_secret,
    rotate_signing_key,
)
from memoryd.server._auth import key_id
from memoryd.server.credentials._paging import PageTokens


def _files(tmp_path: Path) -> KeyFiles:
    return KeyFiles(tmp_path / "keys", tmp_path / "keys" / "signing.pem")


def _as_main_derived_it(key: Ed25519PrivateKey, info: bytes) -> bytes:
    """What every version before the keys folder used: HKDF-SHA256 of the raw signing key."""
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(raw)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_deployment_gets_random_private_secrets(tmp_path):
    files = _files(tmp_path)
    secrets = load_secrets(files)
    assert secrets.terms.current != _as_main_derived_it(secrets.signing_key, b"memoryd keyword terms")
    assert secrets.terms.current != secrets.pages.current
    assert (secrets.terms.current_version, secrets.pages.current_version) == (1, 1)
    assert _mode(files.folder) == 0o700
    for path in (files.signing, files.terms, files.pages):
        assert _mode(path) == 0o600, path
    again = load_secrets(files)  # read back, never made again
    assert (again.signing_kid, again.terms, again.pages) == (secrets.signing_kid, secrets.terms, secrets.pages)


def test_an_upgraded_deployment_keeps_the_secrets_it_derived_from_its_signing_key(tmp_path):
    files = _files(tmp_path)
    key = load_or_create_signing_key(files.signing)  # all a deployment before the keys folder had
    secrets = load_secrets(files)
    assert secrets.terms.current == _as_main_derived_it(key, b"memoryd keyword terms")
    assert secrets.pages.current == _as_main_derived_it(key, b"memoryd page tokens")


def test_rotating_the_signing_key_of_an_upgraded_deployment_keeps_its_term_secret(tmp_path):
    files = _files(tmp_path)
    old = load_or_create_signing_key(files.signing)  # never started since the upgrade
    old_kid, new_kid = rotate_signing_key(files)
    secrets = load_secrets(files)
    assert (old_kid, secrets.signing_kid) == (key_id(old.public_key()), new_kid) and old_kid != new_kid
    assert secrets.terms.current == _as_main_derived_it(old, b"memoryd keyword terms")
    assert [key_id(k) for k in secrets.earlier_keys] == [old_kid]
    assert _mode(files.signing) == 0o600 and _mode(files.verify_folder / f"{old_kid}.pem") == 0o600


def test_tokens_of_an_earlier_key_verify_until_it_is_retired(tmp_path):
    files = _files(tmp_path)
    old_token = issue_token(load_secrets(files).signing_key, tenant="acme", agent="a")
    old_kid, _ = rotate_signing_key(files)
    secrets = load_secrets(files)
    new_token = issue_token(secrets.signing_key, tenant="acme", agent="a")
    verifier = TokenVerifier(secrets.verification_keys)
    assert verifier.verify(old_token).agent == verifier.verify(new_token).agent == "a"

    retire_signing_key(files, old_kid)
    verifier = TokenVerifier(load_secrets(files).verification_keys)
    with pytest.raises(Unauthenticated):
        verifier.verify(old_token)
    assert verifier.verify(new_token).agent == "a"


@pytest.mark.parametrize("kid", ["../signing", "ABCDEF0123456789", "", "0" * 17], ids=["path", "upper", "empty", "long"])
def test_retire_refuses_what_is_not_a_key_id(tmp_path, kid):
    with pytest.raises(ValueError, match="not a key id"):
        retire_signing_key(_files(tmp_path), kid)


def test_the_current_signing_key_cannot_be_retired(tmp_path):
    files = _files(tmp_path)
    with pytest.raises(ValueError, match="current signing key"):
        retire_signing_key(files, load_secrets(files).signing_kid)
    with pytest.raises(ValueError, match="no earlier signing key"):
        retire_signing_key(files, "0123456789abcdef")


def test_a_page_token_outlives_one_page_secret_rotation_but_not_two(tmp_path):
    files = _files(tmp_path)
    binding = {"tenant": "acme", "agent": "a"}
    token = PageTokens(load_secrets(files).pages).encode(binding, {"after": "x"})
    assert rotate_page_secret(files) == 2
    pages = PageTokens(load_secrets(files).pages)
    assert pages.decode(token, binding) == {"after": "x"}
    assert pages.decode(pages.encode(binding, {"after": "y"}), binding) == {"after": "y"}
    assert rotate_page_secret(files) == 3
    assert sorted(json.loads(files.pages.read_text())["versions"]) == ["2", "3"]
    with pytest.raises(InvalidArgument):
        PageTokens(load_secrets(files).pages).decode(token, binding)


def test_a_page_token_tells_nothing_of_its_position_and_opens_only_for_its_binding(tmp_path):
    # The position names the last memory of a page and its update time, which a view may hide.
    pages = PageTokens(load_secrets(_files(tmp_path)).pages)
    binding = {"t": "acme", "a": "a", "s": "alice", "f": "digest"}
    position = {"u": "2026-12-01T12:00:00+00:00", "i": "3f0b2c9e-8d41-4e57-9a7b-1c2d3e4f5a6b"}
    token = pages.encode(binding, position)
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    for secret in (b"2026-12-01", b"3f0b2c9e", b"acme", b"alice", b"digest"):
        assert secret not in raw
    assert pages.decode(token, binding) == position
    with pytest.raises(InvalidArgument):
        pages.decode(token, {**binding, "a": "another-agent"})
    flipped = bytearray(raw)
    flipped[-1] ^= 1
    with pytest.raises(InvalidArgument):
        pages.decode(base64.urlsafe_b64encode(bytes(flipped)).decode().rstrip("="), binding)


def test_rotating_the_page_secret_leaves_the_others_alone(tmp_path):
    files = _files(tmp_path)
    before = load_secrets(files)
    rotate_page_secret(files)
    after = load_secrets(files)
    assert (after.signing_kid, after.terms) == (before.signing_kid, before.terms)
    assert after.pages.current != before.pages.current


@pytest.mark.parametrize("content", ["", "{}", '{"versions": {}}', '{"versions": {"1": "c2hvcnQ="}}',
                                     '{"versions": {"x": "AAAA"}}', "[]"],
                         ids=["empty", "no-versions", "no-version", "short-secret", "bad-version", "list"])
def test_a_damaged_secret_file_stops_the_start_with_its_name(tmp_path, content):
    files = _files(tmp_path)
    load_secrets(files)
    files.terms.write_text(content)
    with pytest.raises(ValueError, match="terms.json"):
        load_secrets(files)

"""The local key provider: its master key file is created safely and refused when unsafe, and
a wrapped data key unwraps only for the tenant and subject it was wrapped for."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memoryd.domain import DataKeyUnavailable
from memoryd.server import load
from memoryd.storage import LocalKeyProvider, load_or_create_master_key


def test_a_missing_master_key_file_is_created_owner_only_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "master.key"

    created = load_or_create_master_key(path)

    assert len(created) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_master_key(path) == created
    assert load_or_create_master_key(tmp_path / "other.key") != created


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644], ids=["group-read", "world-read", "group-write",
                                                                    "group-and-world"])
def test_a_master_key_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "master.key"
    path.write_bytes(os.urandom(32))
    path.chmod(mode)

    with pytest.raises(ValueError, match="chmod 600"):
        load_or_create_master_key(path)


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64], ids=["empty", "16", "31", "33", "64"])
def test_a_master_key_file_of_the_wrong_size_is_refused(tmp_path: Path, size: int) -> None:
    path = tmp_path / "master.key"
    path.write_bytes(os.urandom(size))
    path.chmod(0o600)

    with pytest.raises(ValueError, match="exactly 32 bytes"):
        load_or_create_master_key(path)


async def test_a_wrapped_key_unwraps_only_for_its_tenant_and_subject_and_master_key() -> None:
    provider = LocalKeyProvider(os.urandom(32))
    data_key = os.urandom(32)

    wrapped = await provider.wrap("acme", "alice", data_key)

    assert data_key not in wrapped
    assert await provider.unwrap("acme", "alice", wrapped) == data_key
    for tenant, subject in (("acme", "bob"), ("globex", "alice"), ("acme", "")):
        with pytest.raises(DataKeyUnavailable):
            await provider.unwrap(tenant, subject, wrapped)
    with pytest.raises(DataKeyUnavailable):
        await LocalKeyProvider(os.urandom(32)).unwrap("acme", "alice", wrapped)
    for damaged in (wrapped[:-1] + bytes([wrapped[-1] ^ 1]), wrapped[:12], b""):
        with pytest.raises(DataKeyUnavailable):
            await provider.unwrap("acme", "alice", damaged)
    # Fresh randomness every time: the same key wrapped twice gives different bytes.
    assert await provider.wrap("acme", "alice", data_key) != wrapped


def test_a_provider_that_must_not_create_a_key_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="MEMORYD_KEY_FILE"):
        LocalKeyProvider.from_file(tmp_path / "master.key", create=False)
    assert not (tmp_path / "master.key").exists()
    load_or_create_master_key(tmp_path / "master.key")
    assert LocalKeyProvider.from_file(tmp_path / "master.key", create=False).key_id.startswith("local:")


def test_the_key_id_names_the_master_key_without_revealing_it() -> None:
    master = os.urandom(32)

    key_id = LocalKeyProvider(master).key_id

    assert key_id.startswith("local:") and master.hex()[:8] not in key_id
    assert LocalKeyProvider(master).key_id == key_id != LocalKeyProvider(os.urandom(32)).key_id


def test_the_key_file_is_configured_by_environment_or_file_and_defaults_to_the_data_dir(tmp_path: Path) -> None:
    assert load(env={"MEMORYD_DATA_DIR": str(tmp_path)}).key_file_path == tmp_path / "keys" / "master.key"
    assert load(env={"MEMORYD_KEY_FILE": "/etc/memoryd/master.key"}).key_file_path == Path("/etc/memoryd/master.key")
    config = tmp_path / "memoryd.toml"
    config.write_text('[encryption]\nkey_file = "/srv/keys/master.key"\n')
    assert load(config, env={}).key_file_path == Path("/srv/keys/master.key")
    config.write_text('[encryption]\nkey_fiel = "typo"\n')
    with pytest.raises(ValueError, match="key_fiel"):
        load(config, env={})

"""jieba's prefix dictionary is built once per user and kept in a cache only that user (or
root) can write; anything else about the cache falls back to building it, never to a wrong
dictionary."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

import jieba
import pytest

from memoryd.storage.keywords._segmenter_cache import _MAGIC, default_cache_dir, prefix_dictionary

# A cache file of one word, "xx", that a trusted cache would be read as.
PLANTED = _MAGIC + b"1 5 2\nxx" + (5).to_bytes(8, "little")
SMALL = "北京 100 ns\n北京大学 50 nt\n清华大学 20 nt\n大学 80 n\n".encode()


class Builds:
    """jieba's own builder, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, f: IO[bytes]) -> tuple[dict[str, int], int]:
        self.calls += 1
        return jieba.Tokenizer.gen_pfdict(f)  # type: ignore[no-any-return]


def expected(content: bytes) -> tuple[dict[str, int], int]:
    return Builds()(io.BytesIO(content))


def cache_file(cache: Path) -> Path:
    [path] = cache.glob("jieba-prefix-*.bin")
    return path


def test_the_dictionary_jieba_ships_is_built_once_and_then_read_back_the_same(tmp_path: Path) -> None:
    with jieba.Tokenizer().get_dict_file() as f:
        content = f.read()
    builds, cache = Builds(), tmp_path / "cache"
    first = prefix_dictionary(content, builds, cache)
    again = prefix_dictionary(content, builds, cache)
    assert builds.calls == 1
    assert again == first == expected(content)
    assert len(first[0]) > 300_000
    assert oct(cache.stat().st_mode & 0o777) == "0o700" and oct(cache_file(cache).stat().st_mode & 0o777) == "0o600"


def test_another_dictionary_does_not_read_the_cache_of_the_first(tmp_path: Path) -> None:
    builds = Builds()
    prefix_dictionary(SMALL, builds, tmp_path)
    other = SMALL + "天安门 30 ns\n".encode()
    assert prefix_dictionary(other, builds, tmp_path) == expected(other)
    assert builds.calls == 2
    assert prefix_dictionary(SMALL, builds, tmp_path) == expected(SMALL) and builds.calls == 2


@pytest.mark.parametrize("damage", [
    lambda data: data[:-8],  # cut short
    lambda data: data[:40] + b"x" + data[41:],  # a bad header
    lambda data: data.replace("北京".encode(), b"\xff\xfe\xfd\xfc\xfb\xfa"),  # not UTF-8
    lambda data: data[:-8] + (-1).to_bytes(8, "little", signed=True),  # a negative frequency
    lambda data: b"",
], ids=["truncated", "bad-header", "bad-utf8", "negative-frequency", "empty"])
def test_a_damaged_cache_file_is_rebuilt_not_read(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    builds = Builds()
    prefix_dictionary(SMALL, builds, tmp_path)
    path = cache_file(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    assert prefix_dictionary(SMALL, builds, tmp_path) == expected(SMALL)
    assert builds.calls == 2
    assert prefix_dictionary(SMALL, builds, tmp_path) == expected(SMALL) and builds.calls == 2  # repaired


@pytest.mark.parametrize("writable", ["directory", "file"])
def test_a_cache_others_can_write_is_never_read(tmp_path: Path, writable: str) -> None:
    builds = Builds()
    prefix_dictionary(SMALL, builds, tmp_path)
    path = cache_file(tmp_path)
    # What another local user could have planted: the same name, another dictionary.
    path.write_bytes(PLANTED)
    os.chmod(tmp_path if writable == "directory" else path, 0o777 if writable == "directory" else 0o666)
    assert prefix_dictionary(SMALL, builds, tmp_path) == expected(SMALL)
    assert builds.calls == 2
    if writable == "directory":
        assert path.read_bytes() == PLANTED  # ignored, not repaired: the directory is not ours to trust


def test_the_planted_file_of_the_test_above_would_have_been_read(tmp_path: Path) -> None:
    """The check that it is not read is about trust: the same file, trusted, is read."""
    builds = Builds()
    prefix_dictionary(SMALL, builds, tmp_path)
    path = cache_file(tmp_path)
    path.write_bytes(PLANTED)
    assert prefix_dictionary(SMALL, builds, tmp_path) == ({"xx": 5}, 5)


def test_a_cache_that_cannot_be_made_builds_in_memory(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    builds = Builds()
    assert prefix_dictionary(SMALL, builds, not_a_directory) == expected(SMALL)
    assert prefix_dictionary(SMALL, builds, None) == expected(SMALL)
    assert builds.calls == 2


def test_the_cache_lives_in_the_users_cache_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "memoryd"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG rule: ignored unless absolute
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "memoryd"

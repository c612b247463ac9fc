"""jieba's prefix dictionary, built once per machine user instead of once per process.

Every server builds jieba's prefix dictionary at start (``_keywords.warm_up``): ~0.9 s of CPU,
a quarter of a server's start, repeated by every replica restart and every process of a
deployment. The dictionary depends only on the dictionary file of the pinned jieba wheel, so
the first build is kept in the user's cache directory (``$XDG_CACHE_HOME/memoryd``, else
``~/.cache/memoryd``) and later starts load it in ~0.2 s.

jieba's own ``jieba.cache`` is not used: it lives in the shared temp directory, where another
local user could plant a file that changes how memoryd segments, and it is a ``marshal`` dump.
This cache is trusted only as far as the files it replaces:
- the directory and the file must belong to this user (or root) and be writable by no one
  else, the rule ssh applies to its keys; a directory that fails it is ignored and never
  written to, a file that fails it (in a trusted directory) is rebuilt and replaced;
- the format holds nothing but words and integers (no code, no pickle), checked on load; a
  file that fails the check is rebuilt;
- the file is named by the SHA-256 of the dictionary it was built from, so another jieba
  dictionary never reads it;
- it is written to a temporary file and renamed, so concurrent starts never read half a file.
Any failure to read or write (no home directory, a read-only file system, as in the
Kubernetes manifests) falls back to building in memory, as before.
"""

from __future__ import annotations

import array
import hashlib
import io
import logging
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

_log = logging.getLogger("memoryd.storage.keywords")

_MAGIC = b"memoryd-jieba-prefix-dictionary 1\n"
Build = Callable[[IO[bytes]], tuple[dict[str, int], int]]


def default_cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/memoryd``, else ``~/.cache/memoryd``; None without a home directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if base and os.path.isabs(base):
        return Path(base) / "memoryd"
    home = os.path.expanduser("~")
    return Path(home) / ".cache" / "memoryd" if os.path.isabs(home) else None


def prefix_dictionary(content: bytes, build: Build, cache_dir: Path | None) -> tuple[dict[str, int], int]:
    """jieba's (FREQ, total) for the dictionary file ``content``: read from ``cache_dir`` when
    a trusted copy built from the same dictionary is there, else ``build`` it (jieba's
    ``gen_pfdict``) and keep it there if we can."""
    if cache_dir is None:
        return _build(build, content)
    path = cache_dir / f"jieba-prefix-{hashlib.sha256(content).hexdigest()[:32]}.bin"
    try:
        cached = _read(path)
    except OSError as exc:
        _log.debug("jieba prefix dictionary cache unreadable (%s): building it", exc.strerror)
        cached = None
    if cached is not None:
        return cached
    freq, total = _build(build, content)
    try:
        _write(cache_dir, path, freq, total)
    except OSError as exc:
        _log.debug("jieba prefix dictionary not cached (%s)", exc.strerror)
    return freq, total


def _build(build: Build, content: bytes) -> tuple[dict[str, int], int]:
    return build(io.BytesIO(content))


def _trusted(st: os.stat_result) -> bool:
    return st.st_uid in (os.getuid(), 0) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read(path: Path) -> tuple[dict[str, int], int] | None:
    """The cached dictionary, or None when there is none, it is not trusted or not well formed."""
    if not path.parent.is_dir() or not _trusted(path.parent.stat()):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or not _trusted(os.fstat(fd)):
            return None
        data = f.read()
    return _decode(data)


def _decode(data: bytes) -> tuple[dict[str, int], int] | None:
    # _MAGIC, then "<entries> <total> <bytes of words>\n", the words joined by "\n", then one
    # little-endian int64 frequency per word.
    if not data.startswith(_MAGIC):
        return None
    header_end = data.find(b"\n", len(_MAGIC))
    try:
        entries, total, words_size = (int(x) for x in data[len(_MAGIC):header_end].split(b" "))
        words = data[header_end + 1:header_end + 1 + words_size].decode("utf-8").split("\n")
    except ValueError:  # a bad header or bad UTF-8 (UnicodeDecodeError is a ValueError)
        return None
    freqs = array.array("q")
    body = data[header_end + 1 + words_size:]
    if entries < 1 or len(words) != entries or len(body) != entries * freqs.itemsize:
        return None
    freqs.frombytes(body)
    if sys.byteorder != "little":
        freqs.byteswap()
    freq = dict(zip(words, freqs))
    if len(freq) != entries or min(freqs) < 0 or total < 0:
        return None
    return freq, total


def _write(cache_dir: Path, path: Path, freq: dict[str, int], total: int) -> None:
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _trusted(cache_dir.stat()):
        return
    words = "\n".join(freq).encode("utf-8")
    freqs = array.array("q", freq.values())
    if sys.byteorder != "little":
        freqs.byteswap()
    fd, temp = tempfile.mkstemp(dir=cache_dir, prefix=".jieba-prefix-")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + f"{len(freq)} {total} {len(words)}\n".encode() + words + freqs.tobytes())
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise

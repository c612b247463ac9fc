"""The server's secrets: kept apart, versioned, under the keys folder, loaded once at start.

::

    <keys_dir>/                 0700  (default <data_dir>/keys)
      signing.pem               0600  the current Ed25519 signing key (or MEMORYD_SIGNING_KEY_FILE)
      verify/<kid>.pem          0600  public keys of earlier signing keys, accepted until retired
      terms.json                0600  keyword term-hash secret   {"versions": {"1": "<base64>"}}
      pages.json                0600  page-token secret          {"versions": {"2": "…", "1": "…"}}

Why apart: replacing the signing key is how a leaked key is dealt with, and the term hashes
stored with every memory must not change with it — before this module they were derived from
the signing key, so a new key made every earlier memory unfindable by words.

Upgrade: a ``terms.json`` or ``pages.json`` that does not exist yet while a signing key does is
initialised to exactly what was derived from that key before (HKDF-SHA256, same ``info``), so
stored term hashes still match; from then on nothing is derived from the signing key again.

Versions: a signing key's version is its ``kid``. The term secret has one version (changing it
would mean re-hashing every memory's terms; nothing here does that). The page secret keeps the
current and the previous version, so a listing that spans one rotation carries on; a token
of an older version is refused like any bad page token (INVALID_ARGUMENT).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memoryd.storage import LocalKeyProvider, require_fingerprint

from .._auth import key_id, load_or_create_signing_key, load_signing_key
from .._config import Config

TERMS_PURPOSE = b"memoryd keyword terms"
PAGES_PURPOSE = b"memoryd page tokens"
PAGE_VERSIONS_KEPT = 2
SECRET_BYTES = 32
KID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class KeyFiles:
    """Where one deployment's secrets live."""

    folder: Path
    signing: Path

    @classmethod
    def of(cls, config: Config) -> KeyFiles:
        return cls(config.keys_path, config.signing_key_path)

    @property
    def verify_folder(self) -> Path:
        return self.folder / "verify"

    @property
    def terms(self) -> Path:
        return self.folder / "terms.json"

    @property
    def pages(self) -> Path:
        return self.folder / "pages.json"


@dataclass(frozen=True)
class SecretRing:
    """The kept versions of one symmetric secret: the newest one signs, each kept one verifies."""

    versions: Mapping[int, bytes]

    @property
    def current_version(self) -> int:
        return max(self.versions)

    @property
    def current(self) -> bytes:
        return self.versions[self.current_version]

    def get(self, version: int) -> bytes | None:
        return self.versions.get(version)

    @property
    def fingerprint(self) -> bytes:
        """Names the current secret without revealing it."""
        return hmac.new(self.current, b"memoryd secret fingerprint", hashlib.sha256).digest()


@dataclass(frozen=True)
class Secrets:
    signing_key: Ed25519PrivateKey
    earlier_keys: tuple[Ed25519PublicKey, ...]  # not retired yet: their tokens still verify
    terms: SecretRing
    pages: SecretRing

    @property
    def signing_kid(self) -> str:
        return key_id(self.signing_key.public_key())

    @property
    def verification_keys(self) -> list[Ed25519PublicKey]:
        return [self.signing_key.public_key(), *self.earlier_keys]


def derive_secret(key: Ed25519PrivateKey, purpose: bytes) -> bytes:
    """What earlier versions derived from the signing key; used only to initialise a secret
    on upgrade, so term hashes and page tokens made before it keep matching."""
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return HKDF(algorithm=hashes.SHA256(), length=SECRET_BYTES, salt=None, info=purpose).derive(raw)


def load_secrets(files: KeyFiles) -> Secrets:
    """Read every secret, creating the missing ones (see the module docstring for how)."""
    _private_folder(files.folder)
    had_signing_key = files.signing.exists()
    key = load_or_create_signing_key(files.signing)

    def first(purpose: bytes) -> bytes:
        return derive_secret(key, purpose) if had_signing_key else os.urandom(SECRET_BYTES)

    terms = _load_or_create_ring(files.terms, lambda: first(TERMS_PURPOSE))
    pages = _load_or_create_ring(files.pages, lambda: first(PAGES_PURPOSE))
    current = key_id(key.public_key())
    earlier = tuple(k for kid, k in _earlier_keys(files) if kid != current)
    return Secrets(key, earlier, terms, pages)


async def require_shared_term_secret(owner_dsn: str, secrets: Secrets, files: KeyFiles) -> None:
    """Refuse to run with a term-hash secret other than the one the database's keyword terms
    were hashed with: every memory would silently be unfindable by words."""
    await require_fingerprint(owner_dsn, "keyword terms", secrets.terms.fingerprint,
                              fix=f"give {files.terms} the content of terms.json from the keys folder of the "
                                  "deployment's other servers (MEMORYD_KEYS_DIR)")


async def require_shared_master_key(dsn: str, provider: LocalKeyProvider, config: Config) -> None:
    """Refuse to run with a master key other than the deployment's: a worker with another key
    could open no memory, and a server would write rows nobody else can read."""
    await require_fingerprint(dsn, "master key", provider.fingerprint,
                              fix=f"give {config.key_file_path} the master key file of the deployment's other "
                                  "servers (MEMORYD_KEY_FILE)")


def rotate_signing_key(files: KeyFiles) -> tuple[str, str]:
    """Make a new signing key current; the old one's public key stays accepted until retired.
    Returns (old kid, new kid). Running servers pick it up when restarted."""
    # Load first: on a deployment upgraded in place this writes terms.json and pages.json
    # from the old key, which is the last moment they can be.
    secrets = load_secrets(files)
    old = secrets.signing_key.public_key()
    _private_folder(files.verify_folder)
    target = files.verify_folder / f"{key_id(old)}.pem"
    if not target.exists():
        _create(target, old.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    new = Ed25519PrivateKey.generate()
    _replace(files.signing, new.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return key_id(old), key_id(new.public_key())


def retire_signing_key(files: KeyFiles, kid: str) -> None:
    """Stop accepting tokens signed by the earlier key ``kid`` (after the next restart)."""
    if not KID.fullmatch(kid):
        raise ValueError(f"{kid!r} is not a key id (16 hexadecimal digits, see 'memoryd keys list')")
    if files.signing.exists() and key_id(load_signing_key(files.signing).public_key()) == kid:
        raise ValueError(f"{kid} is the current signing key: rotate first ('memoryd keys rotate'), then retire it")
    path = files.verify_folder / f"{kid}.pem"
    try:
        path.unlink()
    except FileNotFoundError:
        raise ValueError(f"no earlier signing key {kid} is kept (see 'memoryd keys list')") from None


def rotate_page_secret(files: KeyFiles) -> int:
    """A new current page secret; only the previous one is kept besides. Returns its version."""
    ring = load_secrets(files).pages
    version = ring.current_version + 1
    kept = sorted(ring.versions)[-(PAGE_VERSIONS_KEPT - 1):]
    versions = {v: ring.versions[v] for v in kept} | {version: os.urandom(SECRET_BYTES)}
    _replace(files.pages, _ring_document(SecretRing(versions)))
    return version


def describe_keys(files: KeyFiles) -> list[str]:
    """One line per secret and version, for ``memoryd keys list``; never a secret itself."""
    secrets = load_secrets(files)
    lines = [f"signing  {secrets.signing_kid}  current  ({files.signing})"]
    lines += [f"signing  {key_id(k)}  accepted until retired" for k in secrets.earlier_keys]
    lines.append(f"terms    v{secrets.terms.current_version}  current  ({files.terms})")
    for version in sorted(secrets.pages.versions, reverse=True):
        state = "current" if version == secrets.pages.current_version else "accepted (previous)"
        lines.append(f"pages    v{version}  {state}  ({files.pages})")
    return lines


def _earlier_keys(files: KeyFiles) -> list[tuple[str, Ed25519PublicKey]]:
    if not files.verify_folder.is_dir():
        return []
    keys = []
    for path in sorted(files.verify_folder.glob("*.pem")):
        key = serialization.load_pem_public_key(path.read_bytes())
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError(f"{path} is not an Ed25519 public key")
        if key_id(key) != path.stem:
            raise ValueError(f"{path} holds key {key_id(key)}, not {path.stem}")
        keys.append((path.stem, key))
    return keys


def _load_or_create_ring(path: Path, initial: Callable[[], bytes]) -> SecretRing:
    if not path.exists():
        _create(path, _ring_document(SecretRing({1: initial()})))  # another process may win: fine
    return _read_ring(path)


def _read_ring(path: Path) -> SecretRing:
    try:
        document = json.loads(path.read_bytes())
        versions = {int(v): base64.b64decode(s, validate=True) for v, s in document["versions"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        raise ValueError(f"{path} is not a memoryd secret file") from None
    if not versions or any(v <= 0 or len(s) != SECRET_BYTES for v, s in versions.items()):
        raise ValueError(f"{path} is not a memoryd secret file")
    return SecretRing(versions)


def _ring_document(ring: SecretRing) -> bytes:
    versions = {str(v): base64.b64encode(s).decode() for v, s in sorted(ring.versions.items(), reverse=True)}
    return (json.dumps({"versions": versions}, indent=2) + "\n").encode()


def _private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.chmod(folder, 0o700)  # folders made by earlier versions were 0755
    except OSError:
        pass  # not ours (a mounted secret): its owner decides


def _write_temporary(path: Path, data: bytes) -> Path:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return temporary


def _create(path: Path, data: bytes) -> None:
    """Write ``path`` whole, unless it exists: a link is atomic, so two processes starting at
    once agree on one file and nobody reads half of one."""
    temporary = _write_temporary(path, data)
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink()


def _replace(path: Path, data: bytes) -> None:
    os.replace(_write_temporary(path, data), path)

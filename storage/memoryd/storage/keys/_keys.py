"""The local key provider: tenant keys derived from one master key kept in a file.

The master key is 32 random bytes in a file that only its owner may read. Each tenant's
key is derived from it with HKDF-SHA256, so a tenant key is never stored anywhere; a
subject's data key is wrapped with AES-GCM under its tenant's key, with (tenant, subject) as
associated data — a wrapped key copied onto another subject's or tenant's row does not
unwrap. A cloud KMS provider implements the same ``memoryd.domain.KeyProvider`` port.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memoryd.domain import DataKeyUnavailable

MASTER_KEY_BYTES = 32
NONCE_BYTES = 12
_TENANT_INFO = b"memoryd tenant key v1\x00"


def load_or_create_master_key(path: Path) -> bytes:
    """Read the master key at ``path``, creating it (mode 0600) if it does not exist.

    Refuses a file of the wrong size or one that its group or others may read or write:
    with the master key, every wrapped data key of every tenant can be unwrapped.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = os.urandom(MASTER_KEY_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return load_master_key(path)  # another process created it first
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        return key
    return load_master_key(path)


def load_master_key(path: Path) -> bytes:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"the master key file {path} is accessible to its group or others "
                         f"(mode {stat.S_IMODE(mode):o}); make it readable by its owner only (chmod 600)")
    key = path.read_bytes()
    if len(key) != MASTER_KEY_BYTES:
        raise ValueError(f"the master key file {path} must hold exactly {MASTER_KEY_BYTES} bytes, "
                         f"not {len(key)}")
    return key


class LocalKeyProvider:
    """A ``KeyProvider`` whose tenant keys are HKDF-derived from a local master key."""

    def __init__(self, master_key: bytes) -> None:
        if len(master_key) != MASTER_KEY_BYTES:
            raise ValueError(f"the master key must be {MASTER_KEY_BYTES} bytes")
        self._master = master_key
        # Which master key wrapped a data key: lets an operator tell, after a key-file mix-up,
        # which rows belong to which file. A digest of a 256-bit key reveals nothing of it.
        self._key_id = "local:" + hashlib.sha256(b"memoryd key id\x00" + master_key).hexdigest()[:16]
        self._tenant_keys: dict[str, AESGCM] = {}

    @classmethod
    def from_file(cls, path: Path, *, create: bool = True) -> LocalKeyProvider:
        """The provider of the master key at ``path``, created there if missing and ``create``."""
        if not create and not path.exists():
            raise ValueError(f"no master key file at {path}: point MEMORYD_KEY_FILE at the one the server uses")
        return cls(load_or_create_master_key(path))

    @property
    def key_id(self) -> str:
        return self._key_id

    @property
    def fingerprint(self) -> bytes:
        """What every process of a deployment compares at start-up (see migration 0010)."""
        return hmac.new(self._master, b"memoryd secret fingerprint", hashlib.sha256).digest()

    def _sealing(self, tenant: str, subject: str) -> tuple[AESGCM, bytes]:
        """The tenant's key (derived once, kept while few tenants are active) and the
        associated data that binds a wrapped key to (tenant, subject)."""
        key = self._tenant_keys.get(tenant)
        if key is None:
            if len(self._tenant_keys) > 10_000:
                self._tenant_keys.clear()
            derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                           info=_TENANT_INFO + tenant.encode()).derive(self._master)
            key = self._tenant_keys[tenant] = AESGCM(derived)
        return key, tenant.encode() + b"\x00" + subject.encode()

    async def wrap(self, tenant: str, subject: str, data_key: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        key, aad = self._sealing(tenant, subject)
        return nonce + key.encrypt(nonce, data_key, aad)

    async def unwrap(self, tenant: str, subject: str, wrapped: bytes) -> bytes:
        if len(wrapped) <= NONCE_BYTES:
            raise DataKeyUnavailable()
        key, aad = self._sealing(tenant, subject)
        try:
            return key.decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], aad)
        except InvalidTag:
            raise DataKeyUnavailable() from None

"""Opaque page tokens (AIP-158) that grant nothing and tell nothing.

A token is a position sealed with AES-GCM under a key derived from the page secret, with the
caller (tenant, agent), the subject and a digest of the request's filter as associated data.
A token presented by anyone else, or with another filter, does not open and is refused; since
every page runs the same view-filtered query, a token can never widen what the caller sees.
The position is encrypted, not just signed: it names the last memory of a page and, for a
view that shows it, its update time — neither may be readable from the token by a caller
whose view hides them, nor by anyone who finds the token in a log.

The token starts with the version of the page secret that sealed it (4 bytes, part of the
associated data). Tokens of the current and the previous version open, so a listing carries
on across one rotation of the page secret; older ones are refused like any other bad token.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memoryd.domain import FieldViolation, InvalidArgument

from ._secrets import SecretRing

_VERSION_BYTES = 4
_NONCE_BYTES = 12
_TAG_BYTES = 16


def _aead(secret: bytes) -> AESGCM:
    return AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"memoryd page tokens v2").derive(secret))


def _associated(version: bytes, binding: dict[str, Any]) -> bytes:
    return version + json.dumps(binding, sort_keys=True, separators=(",", ":")).encode()


class PageTokens:
    def __init__(self, secrets: SecretRing) -> None:
        self._secrets = secrets
        self._ciphers: dict[int, AESGCM] = {}

    def _cipher(self, version: int) -> AESGCM | None:
        if version not in self._ciphers:
            secret = self._secrets.get(version)
            if secret is None:
                return None
            self._ciphers[version] = _aead(secret)
        return self._ciphers[version]

    def encode(self, binding: dict[str, Any], position: dict[str, Any]) -> str:
        version = self._secrets.current_version
        cipher = self._cipher(version)
        assert cipher is not None
        prefix = version.to_bytes(_VERSION_BYTES, "big")
        nonce = os.urandom(_NONCE_BYTES)
        sealed = cipher.encrypt(nonce, json.dumps(position, separators=(",", ":")).encode(),
                                _associated(prefix, binding))
        return base64.urlsafe_b64encode(prefix + nonce + sealed).decode().rstrip("=")

    def decode(self, token: str, binding: dict[str, Any], *, field: str = "page_token") -> dict[str, Any]:
        """The position sealed in ``token``, if it was issued for exactly this ``binding``
        (else InvalidArgument on ``field``, the request's field that carried it)."""
        refused = InvalidArgument(FieldViolation(field, "is invalid or was not issued for this request"))
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise refused from None
        if len(raw) <= _VERSION_BYTES + _NONCE_BYTES + _TAG_BYTES:
            raise refused
        prefix, nonce = raw[:_VERSION_BYTES], raw[_VERSION_BYTES:_VERSION_BYTES + _NONCE_BYTES]
        cipher = self._cipher(int.from_bytes(prefix, "big"))
        if cipher is None:
            raise refused
        try:
            position = json.loads(cipher.decrypt(nonce, raw[_VERSION_BYTES + _NONCE_BYTES:],
                                                 _associated(prefix, binding)))
        except (InvalidTag, ValueError):
            raise refused from None
        if not isinstance(position, dict):
            raise refused
        return position

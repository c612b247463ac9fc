"""Opaque page tokens (AIP-158) that grant nothing.

A token is an HMAC-signed position bound to the caller (tenant, agent), the subject and a
digest of the request's filter. A token presented by anyone else, or with another filter, is
refused; and since every page runs the same view-filtered query, a token can never widen
what the caller sees.

The token starts with the version of the page secret that signed it (4 bytes, covered by the
MAC). Tokens of the current and the previous version verify, so a listing carries on across
one rotation of the page secret; older ones are refused like any other bad token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from memoryd.domain import FieldViolation, InvalidArgument

from ._secrets import SecretRing

_VERSION_BYTES = 4
_MAC_BYTES = 32


class PageTokens:
    def __init__(self, secrets: SecretRing) -> None:
        self._secrets = secrets

    @staticmethod
    def _mac(secret: bytes, signed: bytes) -> bytes:
        return hmac.new(secret, signed, hashlib.sha256).digest()

    def encode(self, binding: dict[str, Any], position: dict[str, Any]) -> str:
        payload = json.dumps({"b": binding, "p": position}, sort_keys=True, separators=(",", ":")).encode()
        signed = self._secrets.current_version.to_bytes(_VERSION_BYTES, "big") + payload
        return base64.urlsafe_b64encode(signed + self._mac(self._secrets.current, signed)).decode().rstrip("=")

    def decode(self, token: str, binding: dict[str, Any]) -> dict[str, Any]:
        """The position stored in ``token``, if it was issued for exactly this ``binding``."""
        refused = InvalidArgument(FieldViolation("page_token", "is invalid or was not issued for this request"))
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise refused from None
        if len(raw) <= _VERSION_BYTES + _MAC_BYTES:
            raise refused
        signed, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        secret = self._secrets.get(int.from_bytes(signed[:_VERSION_BYTES], "big"))
        if secret is None or not hmac.compare_digest(mac, self._mac(secret, signed)):
            raise refused
        document = json.loads(signed[_VERSION_BYTES:])
        expected = json.loads(json.dumps(binding, sort_keys=True))
        if document.get("b") != expected:
            raise refused
        position = document.get("p")
        if not isinstance(position, dict):
            raise refused
        return position

"""Opaque page tokens (AIP-158) that grant nothing.

A token is an HMAC-signed position bound to the caller (tenant, agent), the subject and a
digest of the request's filter. A token presented by anyone else, or with another filter, is
refused; and since every page runs the same view-filtered query, a token can never widen
what the caller sees.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from memoryd.domain import FieldViolation, InvalidArgument


class PageTokens:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()

    def encode(self, binding: dict[str, Any], position: dict[str, Any]) -> str:
        payload = json.dumps({"b": binding, "p": position}, sort_keys=True, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(payload + self._mac(payload)).decode().rstrip("=")

    def decode(self, token: str, binding: dict[str, Any]) -> dict[str, Any]:
        """The position stored in ``token``, if it was issued for exactly this ``binding``."""
        refused = InvalidArgument(FieldViolation("page_token", "is invalid or was not issued for this request"))
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise refused from None
        payload, mac = raw[:-32], raw[-32:]
        if len(raw) <= 32 or not hmac.compare_digest(mac, self._mac(payload)):
            raise refused
        document = json.loads(payload)
        expected = json.loads(json.dumps(binding, sort_keys=True))
        if document.get("b") != expected:
            raise refused
        position = document.get("p")
        if not isinstance(position, dict):
            raise refused
        return position

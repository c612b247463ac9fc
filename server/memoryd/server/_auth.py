"""Identity: Ed25519-signed bearer tokens (JWT, alg EdDSA) and the Principal they yield.

A token carries the tenant (``tnt``), the agent (``agt``), roles, an optional bound subject
(``sub``), an expiry and an id (``jti``) by which it can be revoked. Tenant and agent come only
from a verified token; no request field or other metadata header is ever read for them.

Claims are signed but still checked for shape: a key holder's tooling, or a bug in it, must
not be able to crash the server with a claim of an odd JSON type (a list of lists for roles,
a float or a huge number for a time) — every such token is simply invalid.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeGuard

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from memoryd.domain import CONTRACT, Unauthenticated

ISSUER = "memoryd"
ROLES = frozenset({"agent", "admin"})
CLOCK_SKEW_SECONDS = 30
MAX_TOKEN_BYTES = 4096
MAX_HEADER_BYTES = 512  # a real header is under 100 bytes; refuse anything odd before parsing
MAX_TIMESTAMP = 253402300799  # 9999-12-31T23:59:59Z: later times cannot be stored or compared as dates


@dataclass(frozen=True)
class Principal:
    """The authenticated caller."""

    tenant: str
    agent: str
    roles: frozenset[str]
    subject: str = ""  # when set, the caller may only touch this subject
    token_id: str = ""
    token_expires: int = 0  # the token's exp (seconds since the epoch); 0 without a token

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _b64decode(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def load_or_create_signing_key(path: Path) -> Ed25519PrivateKey:
    """Read the PEM private key at ``path``, creating it (mode 0600) if it does not exist."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        return key
    return load_signing_key(path)


def load_signing_key(path: Path) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return key


def parse_ttl(text: str) -> int:
    """'90s', '15m', '1h', '7d' → seconds."""
    match = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if not match:
        raise ValueError("ttl must look like 90s, 15m, 1h or 7d")
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def issue_token(
    key: Ed25519PrivateKey,
    *,
    tenant: str,
    agent: str,
    roles: tuple[str, ...] = ("agent",),
    subject: str = "",
    ttl_seconds: int = 3600,
    now: float | None = None,
    token_id: str | None = None,
) -> str:
    """Sign a token for (tenant, agent); ``token_id`` (its jti) is a fresh random id unless
    given (IssueToken records the id before it hands the token out)."""
    if not CONTRACT.tenant.fits(tenant):
        raise ValueError(f"tenant must be {CONTRACT.tenant.described()}")
    if not CONTRACT.agent.fits(agent):
        raise ValueError(f"agent must be {CONTRACT.agent.described()}")
    if subject and not CONTRACT.subject.fits(subject):
        raise ValueError(f"subject must be {CONTRACT.subject.described()}")
    if not set(roles) <= ROLES or not roles:
        raise ValueError(f"roles must be among {sorted(ROLES)}")
    if ttl_seconds <= 0:
        raise ValueError("ttl must be positive")
    if token_id is not None and not CONTRACT.token_id.fits(token_id):
        raise ValueError(f"a token id is {CONTRACT.token_id.described()}")
    issued = int(now if now is not None else time.time())
    header = {"alg": "EdDSA", "typ": "JWT", "kid": key_id(key.public_key())}
    claims: dict[str, object] = {
        "iss": ISSUER,
        "tnt": tenant,
        "agt": agent,
        "roles": sorted(set(roles)),
        "iat": issued,
        "exp": issued + ttl_seconds,
        "jti": token_id if token_id is not None else uuid.uuid4().hex,
    }
    if subject:
        claims["sub"] = subject
    signing_input = ".".join(_b64encode(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims))
    return signing_input + "." + _b64encode(key.sign(signing_input.encode()))


class RevokedTokens(Protocol):
    async def is_revoked(self, tenant: str, token_id: str) -> bool: ...


class TokenVerifier:
    """Verifies tokens against the server's public keys (the current signing key's and the
    earlier ones not yet retired), and knows the tenant's revoked token ids."""

    # Tokens whose signature checked out, with their claims: an agent sends the same token on
    # every call, and Ed25519's check is the dearest step of a call's authentication. A token
    # is a fixed string and the keys are fixed for this verifier's life, so a signature once
    # good stays good; the claims (expiry, issuer, ...) are still judged on every call, and
    # revocation is asked on every call (``is_revoked``).
    VERIFIED_TOKENS = 4096

    def __init__(self, public_keys: list[Ed25519PublicKey], revoked: RevokedTokens | None = None) -> None:
        self._keys = {key_id(k): k for k in public_keys}
        self._revoked = revoked
        self._verified: OrderedDict[str, object] = OrderedDict()

    async def is_revoked(self, principal: Principal) -> bool:
        """Whether the token that yielded ``principal`` is on the tenant's deny list."""
        if self._revoked is None or not principal.token_id:
            return False
        return await self._revoked.is_revoked(principal.tenant, principal.token_id)

    def verify(self, token: str, now: float | None = None) -> Principal:
        invalid = Unauthenticated("the bearer token is invalid", reason="TOKEN_INVALID")
        claims = self._verified.get(token)
        if claims is None:
            claims = self._signed_claims(token, invalid)
            self._verified[token] = claims
            if len(self._verified) > self.VERIFIED_TOKENS:
                self._verified.popitem(last=False)
        else:
            self._verified.move_to_end(token)
        return self._principal(claims, now if now is not None else time.time(), invalid)

    def _signed_claims(self, token: str, invalid: Unauthenticated) -> object:
        """The token's claims, if its signature is one of the keys'; raises ``invalid`` otherwise."""
        if len(token) > MAX_TOKEN_BYTES or token.count(".") != 2:
            raise invalid
        head_b64, body_b64, sig_b64 = token.split(".")
        if len(head_b64) > MAX_HEADER_BYTES:
            raise invalid
        try:
            header = json.loads(_b64decode(head_b64))
            signature = _b64decode(sig_b64)
        except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
            raise invalid from None
        # Only EdDSA is accepted: "none" and every other algorithm are refused outright.
        if not isinstance(header, dict) or header.get("alg") != "EdDSA":
            raise invalid
        kid = header.get("kid")
        key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise invalid
        try:
            key.verify(signature, f"{head_b64}.{body_b64}".encode())
            return json.loads(_b64decode(body_b64))
        except (InvalidSignature, ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
            raise invalid from None

    @staticmethod
    def _principal(claims: object, now: float, invalid: Unauthenticated) -> Principal:
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            raise invalid
        tenant, agent, roles = claims.get("tnt"), claims.get("agt"), claims.get("roles")
        subject, expiry = claims.get("sub", ""), claims.get("exp")
        if not (isinstance(tenant, str) and CONTRACT.tenant.fits(tenant)):
            raise invalid
        if not (isinstance(agent, str) and CONTRACT.agent.fits(agent)):
            raise invalid
        # Each role is checked to be a string before the set lookup: [["admin"]] is unhashable.
        if not (isinstance(roles, list) and roles and all(isinstance(r, str) and r in ROLES for r in roles)):
            raise invalid
        if not (isinstance(subject, str) and (subject == "" or CONTRACT.subject.fits(subject))):
            raise invalid
        issued, token_id = claims.get("iat"), claims.get("jti")
        if not (_timestamp(expiry) and _timestamp(issued) and issued <= expiry):
            raise invalid
        if issued > now + CLOCK_SKEW_SECONDS:
            raise invalid
        # Without an id a token could never be revoked; every token memoryd issues has one.
        if not (isinstance(token_id, str) and CONTRACT.token_id.fits(token_id)):
            raise invalid
        if expiry + CLOCK_SKEW_SECONDS < now:
            raise Unauthenticated("the bearer token has expired", reason="TOKEN_EXPIRED")
        return Principal(tenant, agent, frozenset(roles), subject, token_id, expiry)


def _timestamp(value: object) -> TypeGuard[int]:
    """A time claim: whole seconds since the epoch (bool is an int in Python, not here)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TIMESTAMP

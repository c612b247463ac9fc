"""Token issuing and verification, in process (the gRPC-level attacks are in test_identity_and_isolation)."""

import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memoryd.domain import Unauthenticated
from memoryd.server import TokenVerifier, issue_token, parse_ttl

KEY = Ed25519PrivateKey.generate()
VERIFIER = TokenVerifier([KEY.public_key()])


def test_a_token_yields_its_principal():
    token = issue_token(KEY, tenant="acme", agent="payment-agent", roles=("agent", "admin"), subject="alice")
    principal = VERIFIER.verify(token)
    assert (principal.tenant, principal.agent, principal.subject) == ("acme", "payment-agent", "alice")
    assert principal.is_admin


def test_a_token_issued_in_the_future_is_refused():
    token = issue_token(KEY, tenant="acme", agent="a", now=time.time() + 3600)
    with pytest.raises(Unauthenticated) as caught:
        VERIFIER.verify(token)
    assert caught.value.reason == "TOKEN_INVALID"


def test_expiry_allows_only_a_small_clock_skew():
    token = issue_token(KEY, tenant="acme", agent="a", ttl_seconds=60, now=time.time() - 80)
    assert VERIFIER.verify(token).agent == "a"  # expired 20 s ago: within the 30 s skew
    token = issue_token(KEY, tenant="acme", agent="a", ttl_seconds=60, now=time.time() - 120)
    with pytest.raises(Unauthenticated) as caught:
        VERIFIER.verify(token)
    assert caught.value.reason == "TOKEN_EXPIRED"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tenant": "", "agent": "a"},
        {"tenant": "acme corp", "agent": "a"},
        {"tenant": "acme", "agent": "a/b"},
        {"tenant": "acme", "agent": "a", "roles": ("root",)},
        {"tenant": "acme", "agent": "a", "subject": "al ice"},
        {"tenant": "acme", "agent": "a", "ttl_seconds": 0},
    ],
    ids=["empty-tenant", "space-in-tenant", "slash-in-agent", "unknown-role", "bad-subject", "zero-ttl"],
)
def test_issue_refuses_bad_claims(kwargs):
    with pytest.raises(ValueError):
        issue_token(KEY, **kwargs)


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("15m", 900), ("1h", 3600), ("7d", 604800)])
def test_parse_ttl(text, seconds):
    assert parse_ttl(text) == seconds


def test_parse_ttl_refuses_nonsense():
    with pytest.raises(ValueError):
        parse_ttl("forever")

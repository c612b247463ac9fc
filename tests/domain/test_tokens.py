"""Token issuing and verification, in process (the gRPC-level attacks are in test_identity_and_isolation)."""

import base64
import json
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memoryd.domain import Unauthenticated
from memoryd.server import TokenVerifier, issue_token, parse_ttl
from memoryd.server._auth import key_id

KEY = Ed25519PrivateKey.generate()
VERIFIER = TokenVerifier([KEY.public_key()])
MISSING = object()


def _part(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def sign(claims: Any, header: Any = MISSING, key: Ed25519PrivateKey = KEY) -> str:
    """A token signed with the server's real key whose header and claims are whatever is given:
    what a holder of the key — or a bug in its tooling — could send."""
    header = {"alg": "EdDSA", "typ": "JWT", "kid": key_id(key.public_key())} if header is MISSING else header
    signing_input = f"{_part(header)}.{_part(claims)}"
    signature = base64.urlsafe_b64encode(key.sign(signing_input.encode())).rstrip(b"=").decode()
    return f"{signing_input}.{signature}"


def claims(**changes: Any) -> dict[str, Any]:
    """Valid claims, with ``changes`` applied (MISSING removes a claim)."""
    now = int(time.time())
    document: dict[str, Any] = {"iss": "memoryd", "tnt": "acme", "agt": "a", "roles": ["agent"], "iat": now,
                                "exp": now + 3600, "jti": "0123abcd"}
    for name, value in changes.items():
        if value is MISSING:
            document.pop(name, None)
        else:
            document[name] = value
    return document


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


def test_a_token_verified_before_is_judged_again_on_every_call():
    # Its signature is checked once (TokenVerifier keeps the claims of good signatures), but its
    # expiry and its issue time are judged on each call, against that call's clock.
    verifier = TokenVerifier([KEY.public_key()])
    issued = time.time()
    token = issue_token(KEY, tenant="acme", agent="a", ttl_seconds=60, now=issued)
    assert verifier.verify(token, now=issued).agent == "a"
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(token, now=issued + 200)
    assert caught.value.reason == "TOKEN_EXPIRED"
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(token, now=issued - 3600)  # a clock before its issue
    assert caught.value.reason == "TOKEN_INVALID"
    assert verifier.verify(token, now=issued + 30).agent == "a"
    # Another signature on the same claims is checked for itself.
    other = Ed25519PrivateKey.generate()
    forged = token.rsplit(".", 1)[0] + "." + sign({}, key=other).rsplit(".", 1)[1]
    with pytest.raises(Unauthenticated):
        verifier.verify(forged, now=issued)


def test_verified_tokens_are_kept_up_to_a_bound(monkeypatch):
    monkeypatch.setattr(TokenVerifier, "VERIFIED_TOKENS", 3)
    verifier = TokenVerifier([KEY.public_key()])
    tokens = [issue_token(KEY, tenant="acme", agent=f"a{i}") for i in range(5)]
    assert [verifier.verify(t).agent for t in tokens] == [f"a{i}" for i in range(5)]
    assert len(verifier._verified) == 3


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


def test_crafted_claims_that_are_well_formed_are_accepted():
    principal = VERIFIER.verify(sign(claims(roles=["admin", "agent"], sub="alice")))
    assert principal.is_admin and principal.subject == "alice" and principal.token_id == "0123abcd"


ODD = [1, 1.5, True, None, "x", [], ["x"], [["admin"]], {}, {"admin": True}, 10**40, float("nan"), float("inf")]
ODD_IDS = ["int", "float", "bool", "null", "string", "empty-list", "list", "nested-list", "empty-dict", "dict",
           "huge-int", "nan", "infinity"]
# Each claim with every odd JSON value its check must refuse; "x" is a valid name and 1 a valid
# time (1970), so those pairs are left out.
ODD_CLAIMS = [
    pytest.param(name, value, id=f"{name}-{value_id}")
    for name in ("iss", "tnt", "agt", "roles", "sub", "iat", "exp", "jti")
    for value, value_id in zip(ODD, ODD_IDS, strict=True)
    if not (name in ("tnt", "agt", "sub", "jti") and value == "x")
    and not (name in ("iat", "exp") and value == 1 and value is not True)
]
EXTRA_CLAIMS = [
    pytest.param("roles", ["agent", ["admin"]], id="roles-valid-then-nested"),
    pytest.param("roles", ["agent", {"admin": 1}], id="roles-valid-then-dict"),
    pytest.param("roles", ["root"], id="roles-unknown"),
    pytest.param("roles", MISSING, id="roles-missing"),
    pytest.param("exp", "9999999999", id="exp-string-of-digits"),
    pytest.param("iat", "0", id="iat-string-of-digits"),
    pytest.param("exp", -1, id="exp-negative"),
    pytest.param("exp", 10**15, id="exp-past-year-9999"),
    pytest.param("exp", 1.0e10, id="exp-whole-float"),
    pytest.param("iat", int(time.time()) + 7200, id="iat-after-exp"),
    pytest.param("exp", MISSING, id="exp-missing"),
    pytest.param("iat", MISSING, id="iat-missing"),
    pytest.param("jti", MISSING, id="jti-missing"),
    pytest.param("jti", "", id="jti-empty"),
    pytest.param("jti", "a" * 65, id="jti-too-long"),
    pytest.param("jti", "a b", id="jti-space"),
    pytest.param("tnt", "", id="tnt-empty"),
    pytest.param("iss", "someone-else", id="iss-other"),
]


@pytest.mark.parametrize(("name", "value"), ODD_CLAIMS + EXTRA_CLAIMS)
def test_a_signed_token_with_an_odd_claim_is_unauthenticated(name, value):
    with pytest.raises(Unauthenticated) as caught:
        VERIFIER.verify(sign(claims(**{name: value})))
    assert caught.value.reason == "TOKEN_INVALID"


@pytest.mark.parametrize(
    "document",
    [[], ["memoryd"], "claims", 7, None, True, {"nested": {"a": [1, [2, [3]]]}}],
    ids=["list", "list-of-string", "string", "int", "null", "bool", "no-memoryd-claims"],
)
def test_a_signed_token_whose_claims_are_not_an_object_is_unauthenticated(document):
    with pytest.raises(Unauthenticated) as caught:
        VERIFIER.verify(sign(document))
    assert caught.value.reason == "TOKEN_INVALID"


KID = key_id(KEY.public_key())


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "EdDSA", "kid": 1},
        {"alg": "EdDSA", "kid": [KID]},
        {"alg": "EdDSA", "kid": {KID: KID}},
        {"alg": "EdDSA", "kid": None},
        {"alg": "EdDSA", "kid": True},
        {"alg": "EdDSA"},
        {"alg": ["EdDSA"], "kid": KID},
        {"alg": {"EdDSA": 1}, "kid": KID},
        {"alg": None, "kid": KID},
        [{"alg": "EdDSA", "kid": KID}],
        "EdDSA",
        None,
    ],
    ids=["kid-int", "kid-list", "kid-dict", "kid-null", "kid-bool", "kid-missing", "alg-list", "alg-dict",
         "alg-null", "header-list", "header-string", "header-null"],
)
def test_a_token_with_an_odd_header_is_unauthenticated(header):
    with pytest.raises(Unauthenticated) as caught:
        VERIFIER.verify(sign(claims(), header=header))
    assert caught.value.reason == "TOKEN_INVALID"

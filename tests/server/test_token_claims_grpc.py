"""Tokens signed with the server's real key but with claims of odd JSON types, sent to the
real server: each is UNAUTHENTICATED, never INTERNAL (the shapes are covered one by one in
test_tokens)."""

from __future__ import annotations

import grpc
import pytest

from memoryd.server import load_signing_key

from ..support import Agent, fails
from ..domain.test_tokens import claims, sign


@pytest.mark.parametrize(
    "changes",
    [{"roles": [["admin"]]}, {"roles": [{"admin": True}]}, {"exp": 10**30}, {"exp": 1.5e10}, {"iat": "1"},
     {"jti": ["x"]}, {"tnt": ["acme"]}, {"sub": {"s": 1}}],
    ids=["roles-nested-list", "roles-dict", "exp-huge", "exp-float", "iat-string", "jti-list", "tnt-list", "sub-dict"],
)
def test_an_odd_claim_is_unauthenticated_over_grpc(channel, key_file, connect, tenant, changes):
    connect()  # the agent has a view: only the token can be the reason for a refusal
    token = sign(claims(**{"tnt": tenant, "agt": "agent-1", **changes}), key=load_signing_key(key_file))
    refused = fails(Agent(channel, token).recall_keys, "alice", "drink")
    assert (refused.code, refused.reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")


def test_an_odd_kid_is_unauthenticated_over_grpc(channel, key_file, tenant):
    token = sign(claims(tnt=tenant), header={"alg": "EdDSA", "kid": {"k": 1}}, key=load_signing_key(key_file))
    refused = fails(Agent(channel, token).recall_keys, "alice", "drink")
    assert refused.code == grpc.StatusCode.UNAUTHENTICATED

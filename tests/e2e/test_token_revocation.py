"""Revoking one token without a new signing key: `memoryd token revoke` against the suite's
server, which is another process, as another replica would be."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime, timedelta

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memoryd.server import issue_token, load_signing_key

from ..domain.test_tokens import claims, sign
from ..support import MEMORYD, ROOT, Agent, fails, token_for, unique


def revoke(server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, "token", "revoke", *args], env=server.env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def _refused_within(agent: Agent, seconds: float) -> float:
    """How long until the agent's calls are refused as unauthenticated."""
    start = time.monotonic()
    while True:
        try:
            agent.recall_keys("alice", "drink")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
            return time.monotonic() - start
        assert time.monotonic() - start < seconds, "the revoked token was still accepted"
        time.sleep(0.05)


def test_a_revoked_token_is_refused_within_a_second_and_other_tokens_still_work(server, connect, channel, tenant,
                                                                                 key_file):
    agent = connect()
    same_agent = Agent(channel, token_for(key_file, tenant, "agent-1"))
    agent.recall_keys("alice", "drink")  # the server has now read (and cached) the tenant's deny list

    result = revoke(server, "--token", agent.token, "--reason", "leaked in a log")
    assert result.returncode == 0, result.stderr
    assert "revoked token" in result.stdout and tenant in result.stdout
    assert _refused_within(agent, 2.5) < 2.5  # cached for 1 s at most
    refused = fails(agent.recall_keys, "alice", "drink")
    assert (refused.code, refused.reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")
    assert "revoked" in refused.message
    same_agent.recall_keys("alice", "drink")  # only that token ends, not the agent or the key

    again = revoke(server, "--token", agent.token)
    assert again.returncode == 0 and "already revoked" in again.stdout


def test_revoking_by_id_is_confined_to_the_tenant(server, connect, channel, tenant, key_file):
    connect()
    other = unique("tenant")
    connect(tenant=other)
    key = load_signing_key(key_file)
    ours = Agent(channel, sign(claims(tnt=tenant, agt="agent-1", jti="shared-id-1"), key=key))
    theirs = Agent(channel, sign(claims(tnt=other, agt="agent-1", jti="shared-id-1"), key=key))
    ours.recall_keys("alice", "drink")

    until = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    result = revoke(server, "--tenant", tenant, "--jti", "shared-id-1", "--until", until)
    assert result.returncode == 0, result.stderr
    _refused_within(ours, 2.5)
    theirs.recall_keys("alice", "drink")  # the same id in another tenant is another token


def test_revoke_refuses_a_token_this_deployment_did_not_sign(server, tenant):
    forged = issue_token(Ed25519PrivateKey.generate(), tenant=tenant, agent="agent-1")
    result = revoke(server, "--token", forged)
    assert result.returncode == 2 and "not one this deployment accepts" in result.stderr


def test_revoke_by_id_needs_the_tenant(server):
    result = revoke(server, "--jti", "abc")
    assert result.returncode == 2 and "--tenant" in result.stderr


def test_an_expired_token_needs_no_revocation(server, tenant, key_file):
    expired = token_for(key_file, tenant, ttl_seconds=60, now=time.time() - 3600)
    result = revoke(server, "--token", expired)
    assert result.returncode == 0 and "expired already" in result.stdout

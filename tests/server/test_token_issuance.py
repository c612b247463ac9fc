"""TokenAdminService.IssueToken: a tenant admin mints tokens through the server (no signing
key on the operator's machine), for its own tenant only, never with more power than its own
credential, every issuance in the audit chain, every minted token revocable."""

from __future__ import annotations

import base64
import json
import subprocess
import time

import grpc
import psycopg
import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.v1 import token_admin_service_pb2 as tokens
from memoryd.v1 import token_admin_service_pb2_grpc as tokens_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ..support import MEMORYD, ROOT, Agent, draft, fails, full_view, put_view, token_for, unique, wait_until

AGENT, ADMIN = tokens.TOKEN_ROLE_AGENT, tokens.TOKEN_ROLE_ADMIN


def _issue(channel: grpc.Channel, token: str, **fields) -> tokens.IssueTokenResponse:
    return tokens_grpc.TokenAdminServiceStub(channel).IssueToken(
        tokens.IssueTokenRequest(**fields), metadata=(("authorization", f"Bearer {token}"),), timeout=30)


def _refused(call) -> bool:
    """Whether ``call`` is now refused as unauthenticated (any other failure fails the test)."""
    try:
        call()
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
        return True
    return False


def _claims(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _issuances(server, tenant: str) -> list[tuple[str, str, dict]]:
    with psycopg.connect(server.env["MEMORYD_POSTGRES_DSN"]) as conn:
        rows = conn.execute("SELECT agent, subject, details FROM audit_log WHERE tenant_id = %s "
                            "AND action = 'token.issue' ORDER BY seq", (tenant,)).fetchall()
    return [(agent, subject, details) for agent, subject, details in rows]


@pytest.fixture
def admin_token(key_file, tenant) -> str:
    return token_for(key_file, tenant, "ops-admin", roles=("admin", "agent"), ttl_seconds=7200)


def test_a_minted_token_works_and_carries_the_callers_tenant(server, channel, key_file, tenant, admin_token):
    put_view(channel, key_file, tenant, full_view("payment-agent"))
    minted = _issue(channel, admin_token, agent="payment-agent", lifetime=Duration(seconds=600))
    assert (minted.tenant, minted.agent, list(minted.roles), minted.subject) == (tenant, "payment-agent", [AGENT], "")
    assert minted.expires_at.seconds - minted.issued_at.seconds == 600
    claims = _claims(minted.token)
    assert (claims["tnt"], claims["agt"], claims["roles"], claims["jti"]) == (tenant, "payment-agent", ["agent"],
                                                                              minted.token_id)
    agent = Agent(channel, minted.token)
    agent.write("alice", draft("preference", "tea", key="drink"))
    assert [m.memory.text for m in agent.recall_keys("alice", "drink").memories] == ["tea"]
    # Another tenant's agent of the same name sees nothing of it: the token is this tenant's.
    other = unique("tenant")
    put_view(channel, key_file, other, full_view("payment-agent"))
    stranger = Agent(channel, token_for(key_file, other, "payment-agent"))
    assert list(stranger.recall_keys("alice", "drink").memories) == []


def test_every_issuance_is_audited_without_the_token_and_the_chain_verifies(server, channel, tenant, admin_token):
    minted = _issue(channel, admin_token, agent="support-bot", roles=[AGENT], subject="alice",
                    lifetime=Duration(seconds=300), reason="ticket 42")
    assert _claims(minted.token)["sub"] == "alice"
    [(by, subject, details)] = _issuances(server, tenant)
    assert (by, subject) == ("ops-admin", "alice")
    assert details["jti"] == minted.token_id and details["agent"] == "support-bot"
    assert details["roles"] == ["agent"] and details["reason"] == "ticket 42"
    assert details["expires_at"].startswith(time.strftime("%Y-%m-%d", time.gmtime(minted.expires_at.seconds)))
    with psycopg.connect(server.env["MEMORYD_POSTGRES_DSN"]) as conn:
        dumped = conn.execute("SELECT string_agg(details::text, '') FROM audit_log WHERE tenant_id = %s",
                              (tenant,)).fetchone()[0]
    assert minted.token not in dumped and minted.token.split(".")[2] not in dumped
    verified = subprocess.run([*MEMORYD, "audit", "verify", "--tenant", tenant], env=server.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0 and verified.stdout.startswith("intact:"), verified.stdout + verified.stderr


@pytest.mark.parametrize(("fields", "violations"), [
    ({}, {"agent"}),
    ({"agent": "bad agent!"}, {"agent"}),
    ({"agent": "a", "roles": [0]}, {"roles[0]"}),
    ({"agent": "a", "roles": [AGENT, AGENT]}, {"roles[1]"}),
    ({"agent": "a", "roles": [7]}, {"roles[0]"}),
    ({"agent": "a", "subject": "no spaces"}, {"subject"}),
    ({"agent": "a", "lifetime": Duration(seconds=0)}, {"lifetime"}),
    ({"agent": "a", "lifetime": Duration(seconds=31 * 86400)}, {"lifetime"}),
    ({"agent": "a", "lifetime": Duration(seconds=60, nanos=5)}, {"lifetime"}),
    ({"agent": "a", "reason": "x" * 501}, {"reason"}),
    ({"agent": "", "subject": "?", "reason": "x" * 501}, {"agent", "subject", "reason"}),
], ids=["empty", "agent-name", "role-unspecified", "role-twice", "role-unknown", "subject", "lifetime-zero",
        "lifetime-too-long", "lifetime-fraction", "reason-too-long", "all-at-once"])
def test_bad_input_names_every_field_and_mints_nothing(server, channel, tenant, admin_token, fields, violations):
    failed = fails(_issue, channel, admin_token, **fields)
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT
    assert set(failed.violations) == violations, failed.violations
    assert _issuances(server, tenant) == []


def test_a_minted_token_cannot_outlive_the_callers_token(server, channel, key_file, tenant):
    short = token_for(key_file, tenant, "ops-admin", roles=("admin", "agent"), ttl_seconds=120)
    failed = fails(_issue, channel, short, agent="a", lifetime=Duration(seconds=3600))
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT and set(failed.violations) == {"lifetime"}
    assert "outlives" in failed.violations["lifetime"]
    assert _issuances(server, tenant) == []
    assert _issue(channel, short, agent="a", lifetime=Duration(seconds=60)).agent == "a"
    # Unasked, the lifetime is an hour, or what is left of the caller's token.
    unasked = _issue(channel, short, agent="b")
    assert 100 <= unasked.expires_at.seconds - unasked.issued_at.seconds <= 120


@pytest.mark.parametrize(("roles", "subject", "asked", "reason"), [
    (("agent",), "", [AGENT], "ROLE_REQUIRED"),              # not an admin
    (("agent",), "", [ADMIN], "ROLE_REQUIRED"),
    (("admin", "agent"), "alice", [AGENT], "SUBJECT_NOT_ALLOWED"),  # bound to a subject
], ids=["agent", "agent-asks-admin", "subject-bound-admin"])
def test_no_caller_mints_more_power_than_it_holds(server, channel, key_file, tenant, roles, subject, asked, reason):
    caller = token_for(key_file, tenant, "someone", roles=roles, subject=subject)
    failed = fails(_issue, channel, caller, agent="payment-agent", roles=asked)
    assert (failed.code, failed.reason) == (grpc.StatusCode.PERMISSION_DENIED, reason)
    assert _issuances(server, tenant) == []


def test_an_admin_without_the_agent_role_still_mints_agents(server, channel, key_file, tenant):
    admin_only = token_for(key_file, tenant, "ops-admin", roles=("admin",))
    minted = _issue(channel, admin_only, agent="payment-agent", roles=[AGENT, ADMIN], lifetime=Duration(seconds=60))
    assert sorted(minted.roles) == [AGENT, ADMIN]


def test_an_admin_may_mint_an_admin_token_that_then_administers_only_its_tenant(server, channel, key_file, tenant,
                                                                                admin_token):
    minted = _issue(channel, admin_token, agent="deputy", roles=[ADMIN, AGENT], lifetime=Duration(seconds=600))
    assert sorted(minted.roles) == [AGENT, ADMIN] and minted.tenant == tenant
    again = _issue(channel, minted.token, agent="worker-7", lifetime=Duration(seconds=60))
    assert again.tenant == tenant and _claims(again.token)["tnt"] == tenant
    assert [(by, d["agent"]) for by, _, d in _issuances(server, tenant)] == [("ops-admin", "deputy"),
                                                                               ("deputy", "worker-7")]


def test_a_minted_token_is_revoked_like_any_other(server, channel, key_file, tenant, admin_token):
    put_view(channel, key_file, tenant, full_view("payment-agent"))
    minted = _issue(channel, admin_token, agent="payment-agent")
    agent = Agent(channel, minted.token)
    agent.recall_keys("alice", "drink")
    revoked = subprocess.run([*MEMORYD, "token", "revoke", "--token", minted.token], env=server.env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert revoked.returncode == 0 and minted.token_id in revoked.stdout, revoked.stderr
    wait_until(lambda: _refused(lambda: agent.recall_keys("alice", "drink")), timeout=3,
               what="the revoked minted token is refused")
    # A token minted by a revoked admin token is refused too, and mints nothing.
    deputy = _issue(channel, admin_token, agent="deputy", roles=[ADMIN])
    subprocess.run([*MEMORYD, "token", "revoke", "--token", deputy.token], env=server.env, cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    list_views = admin_grpc.ViewAdminServiceStub(channel).ListViews
    wait_until(lambda: _refused(lambda: list_views(admin.ListViewsRequest(), timeout=30,
                                                   metadata=(("authorization", f"Bearer {deputy.token}"),))),
               timeout=3, what="the revoked admin token is refused")
    assert fails(_issue, channel, deputy.token, agent="x", roles=[ADMIN]).code == grpc.StatusCode.UNAUTHENTICATED
    assert "x" not in [d["agent"] for _, _, d in _issuances(server, tenant)]


def test_the_python_client_mints_and_never_retries(server, tenant, admin_token):
    from memoryd.client import MemorydClient

    with MemorydClient(server.target, token=admin_token) as client:
        minted = client.issue_token(agent="py-agent", lifetime=Duration(seconds=60))
    assert minted.tenant == tenant and _claims(minted.token)["agt"] == "py-agent"


TEXT = st.text(st.characters(codec="utf-8"), max_size=140)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(agent=st.one_of(TEXT, st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,70}", fullmatch=True)),
       subject=st.one_of(st.just(""), TEXT), reason=st.text(st.characters(codec="utf-8"), max_size=520),
       roles=st.lists(st.integers(-3, 4), max_size=3), seconds=st.one_of(st.none(), st.integers(-100, 40 * 86400)),
       nanos=st.one_of(st.just(0), st.integers(-10, 10**9)))
def test_random_requests_mint_within_the_rule_or_fail_cleanly(server, channel, key_file, agent, subject, reason,
                                                             roles, seconds, nanos):
    tenant = unique("tenant")
    caller = token_for(key_file, tenant, "ops-admin", roles=("admin",), ttl_seconds=7200)
    fields = dict(agent=agent, subject=subject, reason=reason, roles=roles)
    if seconds is not None:
        fields["lifetime"] = Duration(seconds=seconds, nanos=nanos)
    try:
        minted = _issue(channel, caller, **fields)
    except grpc.RpcError as error:
        assert error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED), error
        assert _issuances(server, tenant) == []
        return
    claims = _claims(minted.token)
    assert claims["tnt"] == tenant and claims["agt"] == agent
    assert claims["exp"] <= _claims(caller)["exp"] and set(claims["roles"]) <= {"admin", "agent"}
    assert [d["jti"] for _, _, d in _issuances(server, tenant)] == [minted.token_id]

"""Identity and isolation: attacks on the credential, the subject binding, the admin role and
the tenant boundary fail, and leak nothing of anyone else's memories."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf.message import Message

from memoryd.server import issue_token, load_signing_key
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc
from tests.support import Agent, RpcFailure, draft, failure, unique

RANDOM_ID = "0b7c2f43-5d1e-4a8b-9c6d-3e2f1a0b9c8d"
ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]
ADMIN_METHODS = ("PutView", "GetView", "ListViews", "DeleteView")
MEMORY_METHODS = ("Write", "Recall", "MemoryView", "GetHistory", "Erase")


def request_for(method: str, subject: str = "alice", memory_id: str = RANDOM_ID) -> Message:
    """A well-formed request for ``method`` about ``subject``."""
    return {
        "Write": lambda: svc.WriteRequest(subject=subject, items=[draft("fact", "lives in Lisbon", key="home_city")]),
        "Recall": lambda: svc.RecallRequest(subject=subject, keys=["home_city"]),
        "MemoryView": lambda: svc.MemoryViewRequest(subject=subject),
        "GetHistory": lambda: svc.GetHistoryRequest(subject=subject, memory_id=memory_id),
        "Erase": lambda: svc.EraseRequest(subject=subject, mode=svc.ERASE_MODE_PURGE, all_of_subject=True),
        "PutView": lambda: admin.PutViewRequest(view=pb.View(agent="agent-2")),
        "GetView": lambda: admin.GetViewRequest(agent="agent-2"),
        "ListViews": lambda: admin.ListViewsRequest(),
        "DeleteView": lambda: admin.DeleteViewRequest(agent="agent-2"),
    }[method]()


def attempt(channel: grpc.Channel, method: str, request: Message,
            metadata: tuple[tuple[str, str], ...]) -> RpcFailure:
    """Call ``method`` with exactly ``metadata``; it must fail."""
    stub: Any = (admin_grpc.ViewAdminServiceStub(channel) if method in ADMIN_METHODS
                 else svc_grpc.MemoryServiceStub(channel))
    try:
        getattr(stub, method)(request, metadata=metadata, timeout=30)
    except grpc.RpcError as error:
        return failure(error)
    raise AssertionError(f"{method} succeeded but was expected to fail")


def refused(agent: Agent, method: str, request: Message) -> RpcFailure:
    return attempt(agent.channel, method, request, agent.metadata)


def everything(agent: Agent, subject: str, session_id: str = "") -> list[pb.Memory]:
    flt = pb.MemoryFilter(include_org=True, session_id=session_id)
    return agent.list_all(subject, filter=flt, statuses=ALL_STATUSES)


def snapshot(agent: Agent, subject: str, session_id: str = "") -> list[tuple[Any, ...]]:
    """What ``agent`` can see of ``subject``: every memory with its version, status and history."""
    rows = []
    for m in everything(agent, subject, session_id):
        # GetHistory has no session_id, so session memories are left out of the history check.
        versions = len(agent.history(subject, m.id).versions) if m.scope != pb.SCOPE_SESSION else None
        rows.append((m.id, m.version, m.status, m.text, m.key, versions))
    return sorted(rows, key=repr)


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


# --- token forging helpers -----------------------------------------------------------------

def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def segment(value: Any) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


@dataclass(frozen=True)
class Forge:
    """What an attacker may hold: a genuine token (header, claims, signature) and public data."""

    server_key: Ed25519PrivateKey  # used only to mint the genuine token and read the public key
    tenant: str

    @property
    def genuine(self) -> str:
        return issue_token(self.server_key, tenant=self.tenant, agent="agent-1")

    @property
    def header(self) -> dict[str, Any]:
        return json.loads(unb64(self.genuine.split(".")[0]))

    @property
    def claims(self) -> dict[str, Any]:
        return json.loads(unb64(self.genuine.split(".")[1]))

    @property
    def public_raw(self) -> bytes:
        return self.server_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    def tampered(self, **changes: Any) -> str:
        head, _, sig = self.genuine.split(".")
        return f"{head}.{segment({**self.claims, **changes})}.{sig}"

    def signed_by(self, key: Ed25519PrivateKey, header: dict[str, Any]) -> str:
        signing_input = f"{segment(header)}.{segment(self.claims)}"
        return f"{signing_input}.{b64(key.sign(signing_input.encode()))}"

    def hs256(self) -> str:
        # Key confusion: HMAC keyed with the server's public key.
        header = {**self.header, "alg": "HS256"}
        signing_input = f"{segment(header)}.{segment(self.claims)}"
        mac = hmac.new(self.public_raw, signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{b64(mac)}"


INVALID_TOKENS: list[Any] = [
    pytest.param(lambda f: "garbage", id="garbage"),
    pytest.param(lambda f: "a.b.c", id="three-garbage-segments"),
    pytest.param(lambda f: "..", id="empty-segments"),
    pytest.param(lambda f: "!!.??.**", id="not-base64"),
    pytest.param(lambda f: f"{segment([1, 2])}.{segment(f.claims)}.", id="header-not-an-object"),
    pytest.param(lambda f: f.genuine + ".x", id="four-segments"),
    pytest.param(lambda f: f.genuine + "A" * 4096, id="over-4096-bytes"),
    pytest.param(lambda f: issue_token(Ed25519PrivateKey.generate(), tenant=f.tenant, agent="agent-1"),
                 id="signed-by-another-key"),
    pytest.param(lambda f: f.signed_by(Ed25519PrivateKey.generate(), f.header),
                 id="signed-by-another-key-claiming-the-server-kid"),
    pytest.param(lambda f: f"{segment({'alg': 'none', 'typ': 'JWT'})}.{segment(f.claims)}.", id="alg-none"),
    pytest.param(lambda f: f"{segment({**f.header, 'alg': 'none'})}.{segment(f.claims)}.",
                 id="alg-none-with-the-server-kid"),
    pytest.param(lambda f: f"{segment({**f.header, 'alg': 'none'})}.{segment(f.claims)}.{f.genuine.split('.')[2]}",
                 id="alg-none-with-a-genuine-signature"),
    pytest.param(lambda f: f.hs256(), id="alg-hs256-keyed-with-the-public-key"),
    pytest.param(lambda f: f.tampered(tnt="some-other-tenant"), id="tampered-tenant"),
    pytest.param(lambda f: f.tampered(agt="admin"), id="tampered-agent"),
    pytest.param(lambda f: f.tampered(roles=["admin", "agent"]), id="tampered-roles"),
    pytest.param(lambda f: f.tampered(exp=f.claims["exp"] + 10 * 365 * 86400), id="tampered-expiry"),
    pytest.param(lambda f: issue_token(f.server_key, tenant=f.tenant, agent="agent-1", now=time.time() + 3600),
                 id="issued-in-the-future"),
    pytest.param(lambda f: f.genuine.rsplit(".", 1)[0] + ".", id="signature-stripped"),
    pytest.param(lambda f: f.genuine[:-8], id="signature-truncated"),
    pytest.param(lambda f: f"{b64(b'[' * 2500)}.{segment(f.claims)}.{f.genuine.split('.')[2]}",
                 id="header-of-deeply-nested-json"),
]


@pytest.fixture
def forge(key_file: Path, tenant: str) -> Forge:
    return Forge(load_signing_key(key_file), tenant)


# --- authentication ------------------------------------------------------------------------

@pytest.mark.parametrize("method", MEMORY_METHODS + ADMIN_METHODS)
def test_every_call_without_a_credential_is_unauthenticated(channel: grpc.Channel, method: str) -> None:
    error = attempt(channel, method, request_for(method), ())
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert error.reason == "TOKEN_MISSING"


def test_a_token_in_another_header_counts_as_missing(channel: grpc.Channel, agent: Agent) -> None:
    error = attempt(channel, "Write", request_for("Write"), (("x-authorization", f"Bearer {agent.token}"),))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert error.reason == "TOKEN_MISSING"
    assert agent.list("alice").memories == []


@pytest.mark.parametrize("values", [
    pytest.param(lambda token: (("authorization", "Basic xyz"),), id="basic-scheme"),
    pytest.param(lambda token: (("authorization", f"Basic {token}"),), id="basic-scheme-with-a-genuine-token"),
    pytest.param(lambda token: (("authorization", "Bearer "),), id="bearer-with-empty-token"),
    pytest.param(lambda token: (("authorization", "Bearer"),), id="bearer-without-token"),
    pytest.param(lambda token: (("authorization", token),), id="token-without-scheme"),
    pytest.param(lambda token: (("authorization", f"Bearer {token}"), ("authorization", f"Bearer {token}")),
                 id="two-authorization-values"),
    pytest.param(lambda token: (("authorization", f"Bearer {token}"), ("authorization", "Bearer garbage")),
                 id="genuine-and-garbage-authorization-values"),
])
def test_malformed_authorization_metadata_is_unauthenticated_and_writes_nothing(
        channel: grpc.Channel, agent: Agent, values: Callable[[str], tuple[tuple[str, str], ...]]) -> None:
    error = attempt(channel, "Write", request_for("Write"), values(agent.token))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert error.reason in ("TOKEN_MISSING", "TOKEN_INVALID")
    assert agent.token not in error.message
    assert everything(agent, "alice") == []


@pytest.mark.parametrize("make", INVALID_TOKENS)
def test_forged_or_malformed_tokens_are_invalid_and_write_nothing(
        channel: grpc.Channel, agent: Agent, forge: Forge, make: Callable[[Forge], str]) -> None:
    token = make(forge)
    error = attempt(channel, "Write", request_for("Write"), bearer(token))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED, error.message
    assert error.reason == "TOKEN_INVALID"
    assert token not in error.message
    assert everything(agent, "alice") == []


def test_forged_token_cannot_read_the_tenant_it_names(channel: grpc.Channel, agent: Agent, forge: Forge) -> None:
    agent.write("alice", draft("fact", "secret: lives in Lisbon", key="home_city"))
    stranger = unique("tenant")
    # A genuine token for the stranger's tenant, with the claims rewritten to name ours.
    genuine = issue_token(forge.server_key, tenant=stranger, agent="agent-1")
    head, body, sig = genuine.split(".")
    claims = {**json.loads(unb64(body)), "tnt": forge.tenant}
    error = attempt(channel, "MemoryView", request_for("MemoryView"), bearer(f"{head}.{segment(claims)}.{sig}"))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert error.reason == "TOKEN_INVALID"
    assert "Lisbon" not in error.message


def test_an_expired_token_is_refused_as_expired(channel: grpc.Channel, agent: Agent, key_file: Path,
                                                tenant: str) -> None:
    expired = issue_token(load_signing_key(key_file), tenant=tenant, agent="agent-1",
                          now=time.time() - 7200, ttl_seconds=60)
    for method in MEMORY_METHODS:
        error = attempt(channel, method, request_for(method), bearer(expired))
        assert error.code == grpc.StatusCode.UNAUTHENTICATED, method
        assert error.reason == "TOKEN_EXPIRED", method
    assert everything(agent, "alice") == []


def test_an_expired_token_signed_by_another_key_is_invalid_not_expired(channel: grpc.Channel, tenant: str) -> None:
    forged = issue_token(Ed25519PrivateKey.generate(), tenant=tenant, agent="agent-1",
                         now=time.time() - 7200, ttl_seconds=60)
    error = attempt(channel, "MemoryView", request_for("MemoryView"), bearer(forged))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert error.reason == "TOKEN_INVALID"


def test_the_scheme_name_is_case_insensitive(channel: grpc.Channel, agent: Agent) -> None:
    stub = svc_grpc.MemoryServiceStub(channel)
    stub.Write(request_for("Write"), metadata=(("authorization", f"bearer {agent.token}"),), timeout=30)
    assert [m.text for m in agent.list("alice").memories] == ["lives in Lisbon"]


# --- forged identity headers -----------------------------------------------------------------

FORGED_HEADERS = (
    ("x-memoryd-tenant", "{other}"),
    ("x-tenant", "{other}"),
    ("x-tenant-id", "{other}"),
    ("x-agent", "admin"),
    ("x-memoryd-agent", "admin"),
    ("x-roles", "admin"),
    ("x-subject", "bob"),
)


def forged(agent: Agent, other: str) -> tuple[tuple[str, str], ...]:
    return (*agent.metadata, *((k, v.format(other=other)) for k, v in FORGED_HEADERS))


def test_forged_identity_headers_are_ignored_on_write(connect: Callable[..., Agent]) -> None:
    ours = connect()
    other_tenant = unique("tenant")
    theirs = connect(tenant=other_tenant)
    stub = svc_grpc.MemoryServiceStub(ours.channel)
    written = stub.Write(svc.WriteRequest(subject="alice", items=[draft("fact", "secret: lives in Lisbon",
                                                                            key="home_city")]),
                         metadata=forged(ours, other_tenant), timeout=30)
    memory_id = written.results[0].memory_id
    # It landed in the token's tenant, written by the token's agent ...
    [memory] = ours.list("alice").memories
    assert (memory.id, memory.text, memory.provenance.agent) == (memory_id, "secret: lives in Lisbon", "agent-1")
    # ... and the tenant named in the headers sees nothing of it.
    assert everything(theirs, "alice") == []
    assert theirs.recall_keys("alice", "home_city").memories == []
    error = refused(theirs, "GetHistory", svc.GetHistoryRequest(subject="alice", memory_id=memory_id))
    assert error.code == grpc.StatusCode.NOT_FOUND


def test_forged_identity_headers_do_not_open_another_tenant_to_a_reader(connect: Callable[..., Agent],
                                                                       tenant: str) -> None:
    ours = connect()
    ours.write("alice", draft("fact", "secret: lives in Lisbon", key="home_city"))
    theirs = connect(tenant=unique("tenant"))
    stub = svc_grpc.MemoryServiceStub(theirs.channel)
    listed = stub.MemoryView(svc.MemoryViewRequest(subject="alice", filter=pb.MemoryFilter(include_org=True)),
                             metadata=forged(theirs, tenant), timeout=30)
    assert list(listed.memories) == []
    recalled = stub.Recall(svc.RecallRequest(subject="alice", keys=["home_city"]),
                           metadata=forged(theirs, tenant), timeout=30)
    assert list(recalled.memories) == []


def test_forged_role_header_does_not_grant_admin(channel: grpc.Channel, agent: Agent) -> None:
    error = attempt(channel, "ListViews", request_for("ListViews"), (*agent.metadata, ("x-roles", "admin")))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "ROLE_REQUIRED"


# --- subject binding -----------------------------------------------------------------------

@pytest.fixture
def bob_memories(connect: Callable[..., Agent]) -> tuple[Agent, list[str]]:
    """Bob's memories, written by an unbound agent of the same tenant."""
    unbound = connect("agent-unbound")
    written = unbound.write("bob", draft("fact", "bob-secret: lives in Oslo", key="home_city"),
                            draft("event", "bob-secret: lost his job"))
    return unbound, [r.memory_id for r in written.results]


@pytest.mark.parametrize("method", MEMORY_METHODS)
def test_subject_bound_token_cannot_touch_another_subject(connect: Callable[..., Agent],
                                                          bob_memories: tuple[Agent, list[str]],
                                                          method: str) -> None:
    unbound, ids = bob_memories
    before = snapshot(unbound, "bob")
    alice = connect("agent-alice", subject="alice")
    error = refused(alice, method, request_for(method, subject="bob", memory_id=ids[0]))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "SUBJECT_NOT_ALLOWED"
    assert "bob-secret" not in error.message
    assert all(memory_id not in error.message for memory_id in ids)
    assert snapshot(unbound, "bob") == before


@pytest.mark.parametrize("subject", ["Alice", "ALICE", "alice2", "alic", "alice.bob", "alice@example.com"])
def test_subject_binding_is_an_exact_match(connect: Callable[..., Agent], subject: str) -> None:
    alice = connect("agent-alice", subject="alice")
    error = refused(alice, "MemoryView", svc.MemoryViewRequest(subject=subject))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "SUBJECT_NOT_ALLOWED"


def test_subject_bound_token_works_on_its_own_subject(connect: Callable[..., Agent]) -> None:
    alice = connect("agent-alice", subject="alice")
    written = alice.write("alice", draft("fact", "lives in Lisbon", key="home_city"))
    memory_id = written.results[0].memory_id
    assert [m.memory.text for m in alice.recall_keys("alice", "home_city").memories] == ["lives in Lisbon"]
    assert [m.id for m in alice.list("alice").memories] == [memory_id]
    assert len(alice.history("alice", memory_id).versions) == 1
    assert alice.erase("alice", all_of_subject=True).receipt.counts.memories == 1


def test_subject_bound_token_cannot_write_org_memories_and_writes_nothing(connect: Callable[..., Agent]) -> None:
    alice = connect("agent-alice", subject="alice")
    unbound = connect("agent-unbound")
    error = refused(alice, "Write", svc.WriteRequest(subject="alice", items=[
        draft("fact", "lives in Lisbon", key="home_city"),
        draft("constraint", "never email the CFO", key="org_policy", scope=pb.SCOPE_ORG),
    ]))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "SUBJECT_NOT_ALLOWED"
    assert everything(unbound, "alice") == []


@pytest.mark.parametrize("method", ["MemoryView", "Recall"])
def test_subject_bound_token_cannot_read_org_memories(connect: Callable[..., Agent], method: str) -> None:
    unbound = connect("agent-unbound")
    unbound.write("alice", draft("constraint", "org-secret: never email the CFO", key="home_city",
                                 scope=pb.SCOPE_ORG))
    alice = connect("agent-alice", subject="alice")
    org = pb.MemoryFilter(include_org=True)
    request = (svc.MemoryViewRequest(subject="alice", filter=org) if method == "MemoryView"
               else svc.RecallRequest(subject="alice", keys=["home_city"], filter=org))
    error = refused(alice, method, request)
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "SUBJECT_NOT_ALLOWED"
    assert "org-secret" not in error.message


def test_subject_bound_token_cannot_read_history_of_other_subjects_or_org_memories(
        connect: Callable[..., Agent], bob_memories: tuple[Agent, list[str]]) -> None:
    unbound, bob_ids = bob_memories
    org_id = unbound.write("carol", draft("constraint", "org-secret: never email the CFO",
                                          scope=pb.SCOPE_ORG)).results[0].memory_id
    alice = connect("agent-alice", subject="alice")
    for memory_id in (*bob_ids, org_id):
        error = refused(alice, "GetHistory", svc.GetHistoryRequest(subject="alice", memory_id=memory_id))
        assert error.code == grpc.StatusCode.NOT_FOUND
        assert "secret" not in error.message and memory_id not in error.message


def test_subject_bound_token_cannot_erase_another_subjects_memories_by_id(
        connect: Callable[..., Agent], bob_memories: tuple[Agent, list[str]]) -> None:
    unbound, ids = bob_memories
    before = snapshot(unbound, "bob")
    alice = connect("agent-alice", subject="alice")
    receipt = alice.erase("alice", ids=svc.MemoryIds(ids=ids)).receipt
    assert receipt.counts == svc.StoreCounts()
    assert snapshot(unbound, "bob") == before


# --- admin role ----------------------------------------------------------------------------

@pytest.mark.parametrize("method", ADMIN_METHODS)
def test_view_admin_calls_need_the_admin_role(connect: Callable[..., Agent], method: str) -> None:
    error = refused(connect(roles=("agent",)), method, request_for(method))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "ROLE_REQUIRED"


# --- tenant isolation ----------------------------------------------------------------------

@dataclass
class TenantA:
    agent: Agent
    ids: dict[str, str]
    texts: list[str]
    page_token: str

    def snapshot(self) -> list[tuple[Any, ...]]:
        return snapshot(self.agent, "alice", "sess-1")


@pytest.fixture
def tenant_a(connect: Callable[..., Agent]) -> TenantA:
    """Tenant A (this test's tenant): keyed, versioned, episodic, session and org memories of alice."""
    a = connect()
    texts = ["A-secret: lives in Lisbon", "A-secret: lives in Porto", "A-secret: likes oolong tea",
             "A-secret: had surgery on Tuesday", "A-secret: anxious today", "A-secret: never email the CFO"]
    ids: dict[str, str] = {}
    ids["home_city"] = a.write("alice", draft("fact", texts[0], key="home_city")).results[0].memory_id
    assert a.write("alice", draft("fact", texts[1], key="home_city")).results[0].version == 2
    written = a.write(
        "alice",
        draft("preference", texts[2], key="drink"),
        draft("event", texts[3], source_turn_id="turn-a1"),
        draft("context", texts[4], key="mood", scope=pb.SCOPE_SESSION, session_id="sess-1"),
        draft("constraint", texts[5], key="org_policy", scope=pb.SCOPE_ORG),
    )
    ids.update(zip(("drink", "event", "mood", "org_policy"), (r.memory_id for r in written.results)))
    page_token = a.list("alice", page_size=1).next_page_token
    assert page_token
    return TenantA(a, ids, texts, page_token)


@pytest.fixture
def tenant_b(connect: Callable[..., Agent]) -> Agent:
    """An agent of another tenant, with the same agent name, asking about the same subject name."""
    return connect("agent-1", tenant=unique("tenant"))


def assert_leaks_nothing(error: RpcFailure, a: TenantA) -> None:
    shown = " ".join([error.message, *error.violations, *error.violations.values()])
    for secret in (*a.ids.values(), *a.texts, "A-secret"):
        assert secret not in shown


KEYS = ("home_city", "drink", "mood", "org_policy")


def test_other_tenant_recall_by_keys_finds_nothing(tenant_a: TenantA, tenant_b: Agent) -> None:
    before = tenant_a.snapshot()
    for flt in (pb.MemoryFilter(), pb.MemoryFilter(include_org=True, session_id="sess-1")):
        assert tenant_b.recall_keys("alice", *KEYS, filter=flt, render_block=True).memories == []
    assert tenant_a.snapshot() == before


@pytest.mark.parametrize("kwargs", [
    pytest.param({}, id="plain"),
    pytest.param({"filter": pb.MemoryFilter(include_org=True)}, id="include-org"),
    pytest.param({"statuses": ALL_STATUSES}, id="all-statuses"),
    pytest.param({"filter": pb.MemoryFilter(include_org=True, session_id="sess-1"), "statuses": ALL_STATUSES},
                 id="include-org-session-and-all-statuses"),
    pytest.param({"filter": pb.MemoryFilter(keys=list(KEYS), include_org=True)}, id="by-keys"),
])
def test_other_tenant_memory_view_lists_nothing(tenant_a: TenantA, tenant_b: Agent, kwargs: dict[str, Any]) -> None:
    assert tenant_b.list_all("alice", **kwargs) == []
    assert tenant_b.list_all("alice", page_size=1, **kwargs) == []


def test_other_tenant_history_of_a_real_memory_is_not_found_exactly_like_a_random_id(
        tenant_a: TenantA, tenant_b: Agent) -> None:
    random = refused(tenant_b, "GetHistory", svc.GetHistoryRequest(subject="alice", memory_id=RANDOM_ID))
    assert random.code == grpc.StatusCode.NOT_FOUND
    for name, memory_id in tenant_a.ids.items():
        error = refused(tenant_b, "GetHistory", svc.GetHistoryRequest(subject="alice", memory_id=memory_id))
        assert (error.code, error.reason, error.message) == (random.code, random.reason, random.message), name
        assert_leaks_nothing(error, tenant_a)


def test_other_tenant_cannot_use_a_page_token_of_the_first(tenant_a: TenantA, tenant_b: Agent) -> None:
    error = refused(tenant_b, "MemoryView",
                    svc.MemoryViewRequest(subject="alice", page_size=1, page_token=tenant_a.page_token))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert set(error.violations) == {"page_token"}
    assert_leaks_nothing(error, tenant_a)


@pytest.mark.parametrize("mode", [svc.ERASE_MODE_FORGET, svc.ERASE_MODE_PURGE], ids=["forget", "purge"])
@pytest.mark.parametrize("selector", [
    pytest.param(lambda a: {"ids": svc.MemoryIds(ids=list(a.ids.values()))}, id="ids"),
    pytest.param(lambda a: {"key": "home_city"}, id="key"),
    pytest.param(lambda a: {"key": "org_policy"}, id="org-key"),
    pytest.param(lambda a: {"source_turn_id": "turn-a1"}, id="source-turn-id"),
    pytest.param(lambda a: {"category": pb.CATEGORY_FACT}, id="category"),
    pytest.param(lambda a: {"all_of_subject": True}, id="all-of-subject"),
])
def test_other_tenant_erase_removes_nothing(tenant_a: TenantA, tenant_b: Agent, mode: int,
                                            selector: Callable[[TenantA], dict[str, Any]]) -> None:
    before = tenant_a.snapshot()
    assert len(before) == 5
    receipt = tenant_b.erase("alice", mode=mode, **selector(tenant_a)).receipt
    assert receipt.counts == svc.StoreCounts()
    assert tenant_a.snapshot() == before
    assert [m.memory.text for m in tenant_a.agent.recall_keys("alice", "home_city").memories] == [tenant_a.texts[1]]


def test_other_tenant_writing_the_same_key_creates_its_own_memory(tenant_a: TenantA, tenant_b: Agent) -> None:
    before = tenant_a.snapshot()
    result = tenant_b.write("alice", draft("fact", "B: lives in Madrid", key="home_city")).results[0]
    assert result.outcome == svc.WRITE_OUTCOME_CREATED
    assert result.version == 1
    assert result.memory_id not in tenant_a.ids.values()
    assert [m.memory.text for m in tenant_b.recall_keys("alice", "home_city").memories] == ["B: lives in Madrid"]
    assert tenant_a.snapshot() == before


def test_idempotency_keys_are_per_tenant(tenant_a: TenantA, tenant_b: Agent) -> None:
    a_result = tenant_a.agent.write("alice", draft("event", "A-secret: flew to Rome"),
                                    idempotency_key="trip-1").results[0]
    b_result = tenant_b.write("alice", draft("event", "B: flew to Oslo"), idempotency_key="trip-1").results[0]
    assert b_result.outcome == svc.WRITE_OUTCOME_CREATED
    assert b_result.memory_id != a_result.memory_id
    assert [m.text for m in tenant_b.list("alice").memories] == ["B: flew to Oslo"]


def test_org_memories_are_invisible_to_another_tenant(tenant_a: TenantA, tenant_b: Agent) -> None:
    for subject in ("alice", "bob", "carol"):
        assert tenant_b.list_all(subject, filter=pb.MemoryFilter(include_org=True), statuses=ALL_STATUSES) == []
        recalled = tenant_b.recall_keys(subject, "org_policy", filter=pb.MemoryFilter(include_org=True))
        assert recalled.memories == []
    # Tenant A's own agents do see it, for any subject.
    seen = tenant_a.agent.list("carol", filter=pb.MemoryFilter(include_org=True)).memories
    assert [m.id for m in seen] == [tenant_a.ids["org_policy"]]

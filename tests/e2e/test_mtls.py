"""mTLS identity: client certificates with SPIFFE ids name the caller, as a mesh would."""

from __future__ import annotations

import subprocess

import grpc
import pytest
from cryptography import x509

from memoryd.v1 import memory_service_pb2 as svc

from memoryd.v1 import memory_pb2 as pb

from ..support import (
    ALL_FIELDS,
    MEMORYD,
    ROOT,
    Agent,
    ServerProcess,
    draft,
    fails,
    full_view,
    put_view,
    rule,
    server_env,
    token_for,
    unique,
)
from ..support_tls import TRUST_DOMAIN, Authority, Issued, spiffe_id

SECRET = "IBAN DE89 3704 0044 0532 0130 00"


def channel(server: ServerProcess, ca: Authority, client: Issued | None) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca.pem,
        private_key=client.key_pem if client else None,
        certificate_chain=client.cert_pem if client else None,
    )
    return grpc.secure_channel(server.target, credentials, options=[("grpc.ssl_target_name_override", "localhost")])


def test_a_client_certificate_names_the_caller_without_a_token(tls_server, ca, key_file):
    tenant = unique("tenant")
    with channel(tls_server, ca, ca.agent(tenant, "payment-agent")) as ch:
        put_view(ch, key_file, tenant, full_view("payment-agent"), admin_agent="payment-agent")
        agent = Agent(ch, token="")
        stub = agent.memory
        stub.Write(svc.WriteRequest(subject="alice", items=[draft("fact", "IBAN ends 0042", key="iban")]), timeout=30)
        [found] = stub.Recall(svc.RecallRequest(subject="alice", keys=["iban"]), timeout=30).memories
    assert found.memory.provenance.agent == "payment-agent"


def test_another_tenants_certificate_sees_nothing(tls_server, ca, key_file):
    tenant, other = unique("tenant"), unique("tenant")
    with channel(tls_server, ca, ca.agent(tenant, "a")) as ch:
        put_view(ch, key_file, tenant, full_view("a"), admin_agent="a")
        Agent(ch, "").memory.Write(svc.WriteRequest(subject="alice", items=[draft("fact", "secret", key="k")]),
                                   timeout=30)
    with channel(tls_server, ca, ca.agent(other, "a")) as ch:
        put_view(ch, key_file, other, full_view("a"), admin_agent="a")  # same agent name, full view
        assert Agent(ch, "").memory.Recall(svc.RecallRequest(subject="alice", keys=["k"]), timeout=30).memories == []


def test_a_token_must_name_the_same_caller_as_the_certificate(tls_server, ca, key_file):
    tenant = unique("tenant")
    with channel(tls_server, ca, ca.agent(tenant, "a")) as ch:
        put_view(ch, key_file, tenant, full_view("a"), admin_agent="a")
        same = Agent(ch, token_for(key_file, tenant, "a", subject="alice"))
        same.write("alice", draft("fact", "x", key="k"))  # the token adds a subject binding
        assert fails(same.write, "bob", draft("fact", "x", key="k")).reason == "SUBJECT_NOT_ALLOWED"
        other = Agent(ch, token_for(key_file, unique("tenant"), "a"))
        failure = fails(other.write, "alice", draft("fact", "x", key="k"))
        assert failure.code == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize(
    "make_client",
    [
        lambda ca, other: ca.agent(unique("tenant"), "a", domain="evil.example"),
        lambda ca, other: ca.issue([x509.DNSName("agent.example.org")]),
        lambda ca, other: ca.issue([x509.UniformResourceIdentifier("spiffe://example.org/workload/billing")]),
    ],
    ids=["other-trust-domain", "no-spiffe-id", "not-a-memoryd-id"],
)
def test_a_certificate_without_a_valid_memoryd_identity_is_unauthenticated(tls_server, ca, make_client):
    with channel(tls_server, ca, make_client(ca, None)) as ch:
        failure = fails(Agent(ch, "").memory.Recall, svc.RecallRequest(subject="alice", keys=["k"]), timeout=30)
    assert failure.code == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize("client", ["none", "other-ca"], ids=["no-certificate", "certificate-of-another-ca"])
def test_the_handshake_refuses_clients_without_a_trusted_certificate(tls_server, ca, client):
    issued = None if client == "none" else Authority("someone else").agent(unique("tenant"), "a")
    with channel(tls_server, ca, issued) as ch:
        failure = fails(Agent(ch, "").memory.Recall, svc.RecallRequest(subject="alice", keys=["k"]), timeout=10)
    assert failure.code == grpc.StatusCode.UNAVAILABLE


def test_the_health_probe_speaks_mtls_with_a_probe_certificate(tls_server, ca, tmp_path):
    # deploy/k8s/spiffe-direct-tls.yaml probes a server that requires client certificates with
    # `memoryd health --ca-file --cert-file --key-file --server-name`; the health service needs
    # no memoryd identity, only a certificate the handshake accepts.
    probe = ca.issue([x509.UniformResourceIdentifier(f"spiffe://{TRUST_DOMAIN}/ns/memoryd/sa/kubelet-probe")])
    for name, content in {"ca.crt": ca.pem, "probe.crt": probe.cert_pem, "probe.key": probe.key_pem}.items():
        (tmp_path / name).write_bytes(content)
    tls = ["--ca-file", str(tmp_path / "ca.crt"), "--server-name", "localhost"]
    with_cert = [*tls, "--cert-file", str(tmp_path / "probe.crt"), "--key-file", str(tmp_path / "probe.key")]
    ok = subprocess.run([*MEMORYD, "health", "--addr", tls_server.target, *with_cert], cwd=ROOT, env=server_env(),
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.strip().endswith(": SERVING"), ok.stderr
    refused = subprocess.run([*MEMORYD, "health", "--addr", tls_server.target, *tls], cwd=ROOT, env=server_env(),
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stderr.startswith("memoryd: error: ")


def texts(stub: object, subject: str) -> set[str]:
    listing = stub.MemoryView(svc.MemoryViewRequest(subject=subject), timeout=30)  # type: ignore[attr-defined]
    return {m.text for m in listing.memories}


def test_two_spiffe_ids_in_one_tenant_are_two_callers_with_their_own_views(tls_server, ca, key_file):
    tenant = unique("tenant")
    billing = pb.View(agent="billing", read_rules=[rule("fact", "iban")], write_rules=[rule("fact", "iban")],
                      visible_fields=ALL_FIELDS, description="billing reads the IBAN only")
    support = pb.View(agent="support", read_rules=[rule("preference")], write_rules=[rule("preference")],
                      visible_fields=ALL_FIELDS, description="support reads preferences only")
    with channel(tls_server, ca, ca.agent(tenant, "ops")) as ch:
        put_view(ch, key_file, tenant, billing, admin_agent="ops")
        put_view(ch, key_file, tenant, support, admin_agent="ops")
    with channel(tls_server, ca, ca.agent(tenant, "billing")) as b, channel(tls_server, ca, ca.agent(tenant, "support")) as s:
        as_billing, as_support = Agent(b, "").memory, Agent(s, "").memory
        as_billing.Write(svc.WriteRequest(subject="alice", items=[draft("fact", SECRET, key="iban")]), timeout=30)
        as_support.Write(svc.WriteRequest(subject="alice", items=[draft("preference", "likes tea", key="drink")]),
                         timeout=30)

        assert texts(as_billing, "alice") == {SECRET}
        assert texts(as_support, "alice") == {"likes tea"}
        [found] = as_billing.Recall(svc.RecallRequest(subject="alice", keys=["iban"]), timeout=30).memories
        assert found.memory.provenance.agent == "billing"
        # support may read preferences under any key, "iban" included: narrowed, not refused.
        assert as_support.Recall(svc.RecallRequest(subject="alice", keys=["iban"]), timeout=30).memories == []
        denied = fails(as_support.Recall, svc.RecallRequest(subject="alice", keys=["iban"],
                                                            filter=pb.MemoryFilter(categories=[pb.CATEGORY_FACT])),
                       timeout=30)
        assert denied.code == grpc.StatusCode.PERMISSION_DENIED and SECRET not in denied.message
        by_query = as_support.Recall(svc.RecallRequest(subject="alice", query="IBAN bank account"), timeout=30)
        assert SECRET not in {m.memory.text for m in by_query.memories}
        # Neither may write what only the other's view allows.
        refused = fails(as_support.Write, svc.WriteRequest(subject="alice", items=[draft("fact", "x", key="iban")]),
                        timeout=30)
        assert refused.code == grpc.StatusCode.PERMISSION_DENIED
        assert texts(as_billing, "alice") == {SECRET}


def _refused_clients(ca: Authority, tenant: str) -> dict[str, tuple[Issued, grpc.StatusCode]]:
    """Certificates naming the victim's own (tenant, agent) that must not be let in."""
    def uri(value: str) -> x509.UniformResourceIdentifier:
        return x509.UniformResourceIdentifier(value)

    serverauth = [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    return {
        "other-trust-domain": (ca.agent(tenant, "a", domain="evil.example"), grpc.StatusCode.UNAUTHENTICATED),
        "two-spiffe-ids": (ca.issue([uri(spiffe_id(tenant, "a")), uri(spiffe_id(tenant, "b"))]),
                           grpc.StatusCode.UNAUTHENTICATED),
        "the-same-spiffe-id-twice": (ca.issue([uri(spiffe_id(tenant, "a")), uri(spiffe_id(tenant, "a"))]),
                                     grpc.StatusCode.UNAUTHENTICATED),
        "a-second-spiffe-id-in-upper-case": (
            ca.issue([uri(spiffe_id(tenant, "a")), uri("SPIFFE" + spiffe_id(tenant, "b")[6:])]),
            grpc.StatusCode.UNAUTHENTICATED),
        # gRPC's TLS stack checks the client certificate's purpose: refused at the handshake.
        "server-auth-only-eku": (ca.agent(tenant, "a", usages=serverauth), grpc.StatusCode.UNAVAILABLE),
        "another-ca-with-the-same-name": (Authority("memoryd test CA").agent(tenant, "a"),
                                          grpc.StatusCode.UNAVAILABLE),
    }


def test_a_refused_certificate_naming_a_real_caller_reads_and_writes_nothing(tls_server, ca, key_file):
    # One server for every case: each would cost a server start of its own.
    tenant = unique("tenant")
    with channel(tls_server, ca, ca.agent(tenant, "a")) as ch:
        put_view(ch, key_file, tenant, full_view("a"), admin_agent="a")
        Agent(ch, "").memory.Write(svc.WriteRequest(subject="alice", items=[draft("fact", SECRET, key="iban")]),
                                   timeout=30)
        assert texts(Agent(ch, "").memory, "alice") == {SECRET}  # the victim's data is there

    for case, (client, code) in _refused_clients(ca, tenant).items():
        with channel(tls_server, ca, client) as ch:
            stub = Agent(ch, "").memory
            attempts = [
                fails(stub.Recall, svc.RecallRequest(subject="alice", keys=["iban"]), timeout=10),
                fails(stub.MemoryView, svc.MemoryViewRequest(subject="alice"), timeout=10),
                fails(stub.ExportMemories, svc.ExportMemoriesRequest(subject="alice"), timeout=10),
                fails(stub.Write, svc.WriteRequest(subject="alice", items=[draft("fact", "forged", key="iban")]),
                      timeout=10),
            ]
        for failure in attempts:
            assert failure.code == code, (case, failure)
            assert SECRET not in failure.message and "iban" not in failure.message.lower(), (case, failure)

    with channel(tls_server, ca, ca.agent(tenant, "a")) as ch:
        assert texts(Agent(ch, "").memory, "alice") == {SECRET}  # and nothing was written

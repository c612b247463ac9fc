"""mTLS identity: client certificates with SPIFFE ids name the caller, as a mesh would."""

from __future__ import annotations

import subprocess

import grpc
import pytest
from cryptography import x509

from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, ROOT, Agent, ServerProcess, draft, fails, full_view, put_view, server_env, token_for, unique
from ..support_tls import TRUST_DOMAIN, Authority, Issued


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

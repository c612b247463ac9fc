"""mTLS identity: client certificates with SPIFFE ids name the caller, as a mesh would."""

from __future__ import annotations

import datetime as dt
import ipaddress
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, ROOT, Agent, ServerProcess, draft, fails, full_view, put_view, server_env, token_for, unique

TRUST_DOMAIN = "example.org"


@dataclass(frozen=True)
class Issued:
    key_pem: bytes
    cert_pem: bytes


class Authority:
    """A throw-away certificate authority."""

    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, names: list[x509.GeneralName], *, server: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        cert = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memoryd")]))
            .issuer_name(self.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return Issued(key_pem, cert.public_bytes(serialization.Encoding.PEM))

    def agent(self, tenant: str, agent: str, domain: str = TRUST_DOMAIN) -> Issued:
        return self.issue([x509.UniformResourceIdentifier(f"spiffe://{domain}/tenant/{tenant}/agent/{agent}")])


@pytest.fixture(scope="module")
def ca() -> Authority:
    return Authority("memoryd test CA")


@pytest.fixture
def tls_server(tmp_path: Path, private_database: str, key_file: Path, ca: Authority) -> Iterator[ServerProcess]:
    server = ca.issue([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))], server=True)
    files = {"cert.pem": server.cert_pem, "key.pem": server.key_pem, "ca.pem": ca.pem}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_TLS_CERT_FILE=str(tmp_path / "cert.pem"),
                     MEMORYD_TLS_KEY_FILE=str(tmp_path / "key.pem"),
                     MEMORYD_TLS_CLIENT_CA_FILE=str(tmp_path / "ca.pem"), MEMORYD_TLS_TRUST_DOMAIN=TRUST_DOMAIN)
    process = ServerProcess(env, tmp_path / "server.log").start()
    yield process
    process.stop()


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

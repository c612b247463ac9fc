"""Throw-away certificate authorities and a memoryd that requires client certificates (mTLS).

The fixtures ``ca`` and ``tls_server`` are registered in tests/conftest.py for every test
that needs them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from memoryd.storage import EmbeddedPostgres

from .support import ServerProcess, fresh_database, server_env

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

    def issue(self, names: list[x509.GeneralName], *, server: bool = False,
              usages: list[x509.ObjectIdentifier] | None = None) -> Issued:
        """A leaf certificate; ``usages`` overrides its extended key usage ([]: no EKU extension)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        if usages is None:
            usages = [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memoryd")]))
            .issuer_name(self.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
        )
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return Issued(key_pem, cert.public_bytes(serialization.Encoding.PEM))

    def agent(self, tenant: str, agent: str, domain: str = TRUST_DOMAIN,
              usages: list[x509.ObjectIdentifier] | None = None) -> Issued:
        return self.issue([x509.UniformResourceIdentifier(spiffe_id(tenant, agent, domain))], usages=usages)


def spiffe_id(tenant: str, agent: str, domain: str = TRUST_DOMAIN) -> str:
    return f"spiffe://{domain}/tenant/{tenant}/agent/{agent}"


@pytest.fixture(scope="module")
def ca() -> Authority:
    return Authority("memoryd test CA")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, postgres: EmbeddedPostgres, key_file: Path,
               ca: Authority) -> Iterator[ServerProcess]:
    """One mTLS server per test module, on a database of its own: every test works in its own tenant.

    The CA's certificate is at ``tls_server.env["MEMORYD_TLS_CLIENT_CA_FILE"]``."""
    folder = tmp_path_factory.mktemp("tls")
    server = ca.issue([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))], server=True)
    files = {"cert.pem": server.cert_pem, "key.pem": server.key_pem, "ca.pem": ca.pem}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    with fresh_database(postgres.owner_dsn) as database:
        env = server_env(MEMORYD_DATA_DIR=str(folder), MEMORYD_POSTGRES_DSN=database,
                         MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_TLS_CERT_FILE=str(folder / "cert.pem"),
                         MEMORYD_TLS_KEY_FILE=str(folder / "key.pem"),
                         MEMORYD_TLS_CLIENT_CA_FILE=str(folder / "ca.pem"), MEMORYD_TLS_TRUST_DOMAIN=TRUST_DOMAIN)
        process = ServerProcess(env, folder / "server.log").start()
        yield process
        process.stop()

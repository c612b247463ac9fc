"""mTLS identity: a client certificate whose URI SAN is a SPIFFE id names the caller.

``spiffe://<trust-domain>/tenant/<tenant>/agent/<agent>`` → Principal(tenant, agent, roles
{"agent"}). A service mesh usually supplies such certificates. The TLS handshake (against
the configured client CA) proves possession of the key; this module only reads the verified
peer certificate that gRPC hands over, so nothing a client sends in metadata can stand in
for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from memoryd.domain import CONTRACT, Unauthenticated

from .._auth import Principal

_SPIFFE = re.compile(r"^spiffe://([A-Za-z0-9.-]+)/tenant/([^/]+)/agent/([^/]+)$")


@dataclass(frozen=True)
class TlsSettings:
    cert_file: str
    key_file: str
    client_ca_file: str = ""  # set: client certificates are required and name the caller
    trust_domain: str = ""  # set: only SPIFFE ids of this trust domain are accepted

    def server_credentials(self) -> grpc.ServerCredentials:
        ca = Path(self.client_ca_file).read_bytes() if self.client_ca_file else None
        pair = (Path(self.key_file).read_bytes(), Path(self.cert_file).read_bytes())
        return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=ca is not None)


def principal_from_spiffe(uri: str, trust_domain: str = "") -> Principal:
    invalid = Unauthenticated("the client certificate does not carry a memoryd SPIFFE id",
                              reason="TOKEN_INVALID")
    match = _SPIFFE.fullmatch(uri)
    if match is None:
        raise invalid
    domain, tenant, agent = match.groups()
    if trust_domain and domain != trust_domain:
        raise invalid
    if not (CONTRACT.tenant.fits(tenant) and CONTRACT.agent.fits(agent)):
        raise invalid
    return Principal(tenant, agent, frozenset({"agent"}))


def peer_principal(auth_context: Mapping[str, Iterable[bytes]], trust_domain: str = "") -> Principal | None:
    """The caller named by the verified client certificate, or None without one."""
    pems = list(auth_context.get("x509_pem_cert") or [])
    if not pems:
        return None
    certificate = x509.load_pem_x509_certificate(pems[0])
    # gRPC's TLS stack already refuses, at the handshake, a client certificate whose extended
    # key usage leaves out clientAuth (tests/e2e/test_mtls.py pins it). Checked again here so a
    # change of TLS stack or verifier cannot turn a server's certificate into a caller.
    try:
        usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None  # no EKU extension: any purpose, as in RFC 5280
    if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
        raise Unauthenticated("the client certificate is not meant for client authentication",
                              reason="TOKEN_INVALID")
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        names = None
    uris = names.get_values_for_type(x509.UniformResourceIdentifier) if names is not None else []
    # URI schemes are case-insensitive: a "SPIFFE://" id counts too, so another verifier can
    # never read a different caller from the same certificate.
    spiffe = [u for u in uris if u[:9].lower() == "spiffe://"]
    if len(spiffe) != 1:  # SPIFFE allows exactly one id per certificate
        raise Unauthenticated("the client certificate must carry exactly one SPIFFE id", reason="TOKEN_INVALID")
    return principal_from_spiffe(spiffe[0], trust_domain)

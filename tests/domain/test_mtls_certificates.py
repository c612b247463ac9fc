"""memoryd's own check of a client certificate's key usage, without a server (mTLS end to end:
tests/e2e/test_mtls.py)."""

from __future__ import annotations

import pytest
from cryptography import x509

from memoryd.domain import Unauthenticated
from memoryd.server._auth import Principal
from memoryd.server.credentials._mtls import peer_principal

from ..support import unique
from ..support_tls import TRUST_DOMAIN


@pytest.mark.parametrize("usages, accepted", [
    pytest.param([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH], True, id="client-auth"),
    pytest.param([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH], True,
                 id="server-and-client-auth"),
    pytest.param([], True, id="no-eku-extension"),
    pytest.param([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH], False, id="server-auth-only"),
    pytest.param([x509.oid.ExtendedKeyUsageOID.CODE_SIGNING], False, id="code-signing-only"),
])
def test_memoryd_itself_refuses_a_certificate_not_meant_for_client_authentication(ca, usages, accepted):
    # The handshake refuses these first (see above); this is the second line, for a TLS stack
    # that would not.
    tenant = unique("tenant")
    auth_context = {"x509_pem_cert": [ca.agent(tenant, "a", usages=usages).cert_pem]}
    if accepted:
        assert peer_principal(auth_context, TRUST_DOMAIN) == Principal(tenant, "a", frozenset({"agent"}))
    else:
        with pytest.raises(Unauthenticated):
            peer_principal(auth_context, TRUST_DOMAIN)

"""What a caller proves and what the server keeps secret: the versioned secrets under the keys
folder, page tokens bound to them, mTLS identities (SPIFFE ids) and the revocation list.

Bearer tokens themselves are ``memoryd.server._auth``, which the client commands load alone.
"""

from ._mtls import TlsSettings, peer_principal
from ._paging import PageTokens
from ._revocation import RevocationList
from ._secrets import (
    KeyFiles,
    Secrets,
    derive_secret,
    describe_keys,
    load_secrets,
    require_shared_master_key,
    require_shared_term_secret,
    retire_signing_key,
    rotate_page_secret,
    rotate_signing_key,
)

__all__ = ["KeyFiles", "PageTokens", "RevocationList", "Secrets", "TlsSettings", "derive_secret",
           "describe_keys", "load_secrets", "peer_principal", "require_shared_master_key",
           "require_shared_term_secret", "retire_signing_key", "rotate_page_secret", "rotate_signing_key"]

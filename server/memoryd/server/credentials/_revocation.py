"""The deny list of revoked tokens as the server reads it: per tenant, kept for a short time
(``view_cache_seconds``, default 1 s, like views) so a call does not pay a Postgres round
trip for it, and a revocation made anywhere takes effect on every replica within that time.
"""

from __future__ import annotations

import time
from typing import Protocol

MAX_CACHED_TENANTS = 10_000


class RevocationStore(Protocol):
    async def revoked(self, tenant: str) -> frozenset[str]: ...


class RevocationList:
    def __init__(self, store: RevocationStore, ttl_seconds: float = 1.0) -> None:
        self._store = store
        self._ttl = ttl_seconds
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def is_revoked(self, tenant: str, token_id: str) -> bool:
        now = time.monotonic()
        hit = self._cache.get(tenant)
        if hit is not None and hit[0] > now:
            return token_id in hit[1]
        # A failure here fails the call (UNAVAILABLE): a token is never let through unchecked.
        revoked = await self._store.revoked(tenant)
        if self._ttl > 0:
            if len(self._cache) >= MAX_CACHED_TENANTS:
                self._cache.clear()
            self._cache[tenant] = (now + self._ttl, revoked)
        return token_id in revoked

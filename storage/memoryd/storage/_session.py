"""The tenant-bound store session: one tenant's and one agent's handle on the stores.

``PostgresMemoryStore.session(tenant, agent)`` is how use cases, extraction, consolidation
and conflict resolution reach memories. The session carries the tenant into every query,
owns the tenant's transactions, and holds what belongs to the tenant: the subject keys, the
tenant's keyword term hasher and its policy. It builds the item writer — the only place
that does — so every write applies the same conflict policies, TTLs and trust levels.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from memoryd.domain import TenantPolicy

from ._envelope import DataKey, SubjectKeys
from ._keywords import TermHasher
from ._writes import ItemWriter

if TYPE_CHECKING:
    from ._memories import PostgresMemoryStore


class StoreSession:
    def __init__(self, store: PostgresMemoryStore, tenant: str, agent: str) -> None:
        self.store = store
        self.tenant = tenant
        self.agent = agent

    @property
    def keys(self) -> SubjectKeys:
        return self.store.keys

    @property
    def hasher(self) -> TermHasher:
        return self.store.term_hasher(self.tenant)

    @property
    def policy(self) -> TenantPolicy:
        return self.store.policy_for(self.tenant)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A transaction with this tenant set (row level security on)."""
        async with self.store.db.tenant_tx(self.tenant) as conn:
            yield conn

    def item_writer(self, conn: Any, subject: str, *, agent: str | None = None,
                    first_key: DataKey | None = None) -> ItemWriter:
        """The writer of ``subject``'s items in ``conn``'s transaction, as ``agent`` (default:
        the session's). Data keys are taken (and locked) once per owner; ``first_key`` is one
        the caller already holds for ``subject``."""
        held: dict[str, DataKey] = {subject: first_key} if first_key is not None else {}

        async def key_for(owner: str) -> DataKey:
            if owner not in held:
                held[owner] = await self.keys.for_write(conn, self.tenant, owner)
            return held[owner]

        return ItemWriter(conn, self.tenant, agent or self.agent, subject, self.hasher, key_for, self.policy)

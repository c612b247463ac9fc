"""The tenant-bound store session: one tenant's and one agent's handle on the stores.

``PostgresMemoryStore.session(tenant, agent)`` is how use cases, extraction, consolidation
and conflict resolution reach memories. The session carries the tenant into every query,
owns the tenant's transactions, and holds what belongs to the tenant: the subject keys, the
tenant's keyword term hasher and its policy. It builds the item writer — the only place
that does — so every write applies the same conflict policies, TTLs and trust levels.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryd.domain import (
    AuditTag,
    Draft,
    EraseMode,
    EraseSelector,
    ErasureReceipt,
    Listing,
    Memory,
    MemoryVersion,
    Page,
    ReadFilter,
    Resolution,
    TenantPolicy,
)

from ..keys import DataKey, SubjectKeys
from ..keywords import TermHasher
from ._writes import ItemWriter, Written

if TYPE_CHECKING:
    from ._erasure import VectorErasure
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
    async def transaction(self, *, pipelined: bool = False) -> AsyncIterator[Any]:
        """A transaction with this tenant set (row level security on); ``Postgres.tenant_tx``."""
        async with self.store.db.tenant_tx(self.tenant, pipelined=pipelined) as conn:
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

    # What use cases do with the store, the tenant (and the writing agent) already bound.

    async def write(self, subject: str, drafts: list[Draft], *, blind: list[bool], idempotency_key: str = "",
                    request_hash: bytes = b"", tag: AuditTag = AuditTag()) -> Written:
        return await self.store.write_with_index_state(self.tenant, self.agent, subject, drafts, blind=blind,
                                                       idempotency_key=idempotency_key, request_hash=request_hash,
                                                       tag=tag)

    async def pending_index_work(self, ids: list[str]) -> tuple[int, int]:
        return await self.store.pending_index_work(self.tenant, ids)

    async def fetch(self, flt: ReadFilter, ids: list[str], now: datetime) -> list[Memory]:
        return await self.store.fetch(self.tenant, flt, ids, now)

    async def list(self, flt: ReadFilter, page: Page) -> Listing:
        return await self.store.list(self.tenant, flt, page)

    async def history(self, flt: ReadFilter, memory_id: str, after_version: int,
                      size: int) -> tuple[builtins.list[MemoryVersion], bool]:
        return await self.store.history(self.tenant, flt, memory_id, after_version, size)

    async def resolve_conflict(self, subject: str, flt: ReadFilter, memory_id: str, resolution: Resolution,
                               pending_id: str, tag: AuditTag) -> Memory:
        return await self.store.resolve_conflict(self.tenant, self.agent, subject, flt, memory_id, resolution,
                                                 pending_id, tag)

    async def erase(self, subject: str, flt: ReadFilter, selector: EraseSelector, mode: EraseMode, *, reason: str,
                    tag: AuditTag,
                    after_commit: Callable[[builtins.list[str], frozenset[str]], Awaitable[VectorErasure]]
                    ) -> ErasureReceipt:
        return await self.store.erase(self.tenant, self.agent, subject, flt, selector, mode, reason=reason, tag=tag,
                                      after_commit=after_commit)

    async def enqueue_vector_deletes(self, subject: str, ids: builtins.list[str]) -> None:
        await self.store.enqueue_vector_deletes(self.tenant, subject, ids)

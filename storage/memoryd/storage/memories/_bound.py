"""What the stores opened once (``StoreParts``), what they are given once the process has built
it (the vectors' eraser, the outbox worker, the job queue: protocols here, implemented above),
and the tenant-bound base every part of the session builds on (``Bound``): its tenant, its
agent and its transactions.

The session (``_session.StoreSession``) is assembled from parts by concern — erasing
(``_erase``) and the rest — each a subclass of ``Bound`` in its own module, so no part needs
the module of the whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from memoryd.domain import AuditTag, EraseMode, ExtractionJob, ReadFilter, TenantPolicy, Turn

from .._filters import Tenanted
from ..keys import SubjectKeys, TenantKeys
from ..keywords import TermHasher
from ..postgres import Postgres, TenantConn
from ._labels import KeyNames, label_filter

if TYPE_CHECKING:
    from ..vectors import MilvusIndex


class IndexTarget(Protocol):
    """One collection to clear (``work.IndexTarget``): its index is all an erase needs."""

    @property
    def index(self) -> MilvusIndex: ...


class Indexes(Protocol):
    """Every collection to clear (an ``IndexSet``, or the outbox worker's targets)."""

    def targets(self) -> Sequence[IndexTarget]: ...


class VectorEraser(Protocol):
    """How an erase clears the vectors of what it erased (``IndexVectors``): given to the
    stores when the process has built its index set."""

    async def erase(self, scope: Tenanted, subject: str, ids: list[str], *, mode: EraseMode, whole_subject: bool,
                    counted: frozenset[str], defer: Callable[[str, list[str]], Awaitable[None]]) -> VectorErasure:
        """Clear the vectors of ``ids`` (and of the whole subject) in ``scope``'s tenant (the erase's
        session); ``defer(subject, ids)``
        leaves their deletion to the outbox when the index cannot be reached."""
        ...


@dataclass(frozen=True)
class VectorErasure:
    """What clearing the vector index did: vectors deleted, whether no deleted vector is left
    (by query, and in the files where they can be read), and what could not be checked."""

    deleted: int = 0
    verified: bool = True
    unchecked: tuple[str, ...] = ()
    counted: int = 0  # of ``deleted``, the vectors of the memories the receipt counts
    later: bool = False  # the files' compaction is left to the next background round


class IndexWork(Protocol):
    """This process's outbox worker, as a session nudges and waits on it (``work.OutboxWorker``)."""

    wakeup: asyncio.Event

    def next_settlement(self) -> asyncio.Event: ...


class JobDesk(Protocol):
    """The extraction job queue (``work.ExtractionJobs``), as a session queues its agent's
    jobs and reads them back."""

    async def enqueue(self, session: Any, subject: str, turns: tuple[Turn, ...], *, idempotency_key: str,
                      request_hash: bytes, tag: AuditTag, session_id: str = "") -> str: ...

    async def get(self, session: Any, subject: str, job_id: str) -> ExtractionJob: ...


@dataclass
class StoreParts:
    """What ``Stores`` opened and every session shares: the app-role pool, the subjects' keys
    (and their cached key names), the keyword term hashers, the tenant policy lookup, and
    what an erase needs (the vectors' eraser, the re-check round), and this process's outbox
    worker if it runs one (woken by a write, waited on by ``wait_indexed``), and the extraction
    job queue."""

    db: Postgres
    root_hasher: TermHasher
    keys: SubjectKeys
    policy_for: Callable[[str], TenantPolicy]
    erasure_round: float
    vectors: VectorEraser | None = None
    outbox: IndexWork | None = None
    jobs: JobDesk | None = None
    names: KeyNames = field(init=False)

    def __post_init__(self) -> None:
        self.names = KeyNames(self.keys)


class Bound:
    """One tenant's and one agent's handle on the stores' parts."""

    def __init__(self, parts: StoreParts, tenant: str, agent: str) -> None:
        self.parts = parts
        self.tenant = tenant
        self.agent = agent

    @property
    def keys(self) -> TenantKeys:
        """This tenant's key ring."""
        return self.parts.keys.of(self.tenant)

    @property
    def hasher(self) -> TermHasher:
        return self.parts.root_hasher.for_tenant(self.tenant)

    @property
    def policy(self) -> TenantPolicy:
        return self.parts.policy_for(self.tenant)

    @asynccontextmanager
    async def transaction(self, *, pipelined: bool = False) -> AsyncIterator[TenantConn]:
        """A transaction with this tenant set (row level security on); ``Postgres.tenant_tx``."""
        async with self.parts.db.tenant_tx(self.tenant, pipelined=pipelined) as conn:
            yield conn

    async def label(self, conn: Any, flt: ReadFilter) -> ReadFilter:
        """``flt`` with its key and tag labels (``_labels``); ``conn`` is used only if the
        filter names keys or tags and has no labels yet."""
        return await label_filter(conn, self.parts.names, self.hasher, flt)

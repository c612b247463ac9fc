"""The small interfaces the server needs from its stores (implemented in memoryd.storage).

(A ``MemoryStore`` protocol stood here, implemented by ``PostgresMemoryStore`` and used by
nothing: every caller holds the store itself. It is gone rather than kept in step by hand.)"""

from __future__ import annotations

from typing import Protocol

from ._model import AuditTag
from ._view import View, ViewChange


class ViewStore(Protocol):
    """Per-agent views, versioned. Every method is confined to ``tenant``; ``admin`` is the
    agent making the change, recorded in the audit log."""

    async def get(self, tenant: str, agent: str) -> View | None: ...

    async def put(self, tenant: str, admin: str, view: View, *, expected_version: int = 0,
                  tag: AuditTag = AuditTag()) -> ViewChange: ...  # noqa: B008 (frozen)

    async def put_first(self, tenant: str, admin: str, view: View) -> bool:
        """Store ``view`` only if the agent never had a view in ``tenant`` (a deleted one counts)."""
        ...

    async def delete(self, tenant: str, admin: str, agent: str, *, tag: AuditTag = AuditTag()) -> bool: ...  # noqa: B008 (frozen)

    async def list(self, tenant: str, after_agent: str, limit: int) -> tuple[list[View], bool]: ...


class Embedder(Protocol):
    """Turns text into L2-normalised vectors; ``model_id`` is stored with every vector."""

    model_id: str
    dim: int

    async def embed_passages(self, texts: list[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...

    async def warm_up(self) -> None:
        """Load the model, or learn the dimension from the endpoint, now rather than on the first call."""
        ...

    def close(self) -> None:
        """Let go of threads and connections; later calls raise ``Unavailable``."""
        ...


class KeyProvider(Protocol):
    """Wraps and unwraps subjects' data keys with a per-tenant key it holds (a local key file,
    or a cloud KMS): the data keys are stored only wrapped, next to the data they protect.

    ``unwrap`` raises ``DataKeyUnavailable`` when the wrapped key can never be unwrapped
    (another tenant key, damaged bytes) and ``Unavailable`` when the provider cannot be
    reached right now (a KMS outage), so callers can tell a lost key from a retryable failure.
    """

    @property
    def key_id(self) -> str:
        """Names the tenant-key material that wraps new data keys (stored with each key)."""
        ...

    async def wrap(self, tenant: str, subject: str, data_key: bytes) -> bytes: ...

    async def unwrap(self, tenant: str, subject: str, wrapped: bytes) -> bytes: ...

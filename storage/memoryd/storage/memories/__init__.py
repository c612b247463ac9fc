"""The memory rows in Postgres, the source of truth: the stores opened once and their
tenant-bound session — writes and their conflict policies, keyed reads, listings, history,
pending values, erasure end to end.
"""

from ._backfill import SealReport, seal_plaintext
from ._erase import PURGE_FALLBACK_SECONDS, forget_ids
from ._bound import IndexTarget, Indexes, VectorErasure
from ._erasure import NEXT_ROUND, Purged, erase_vectors
from ._rows import joined_turns, source_turns
from ._session import NO_SUCH_JOB, Stores, StoreSession
from ._writes import Written, claim_idempotency, store_idempotent_response
from .sessions import drop_subject_sessions, join_session, open_session_tenants

__all__ = ["NEXT_ROUND", "NO_SUCH_JOB", "PURGE_FALLBACK_SECONDS", "IndexTarget", "Indexes", "Purged", "SealReport",
           "StoreSession", "Stores", "VectorErasure", "Written", "claim_idempotency", "drop_subject_sessions", "erase_vectors", "forget_ids", "join_session",
           "joined_turns", "open_session_tenants", "seal_plaintext", "source_turns", "store_idempotent_response"]

"""The memory rows in Postgres, the source of truth: writes and their conflict policies, keyed
reads, listings, history, pending values, erasure of rows, and the tenant-bound session.
"""

from ._backfill import SealReport, seal_plaintext
from ._erasure import NEXT_ROUND, Purged, VectorErasure, erase_vectors
from ._memories import PURGE_FALLBACK_SECONDS, PostgresMemoryStore
from ._rows import joined_turns, source_turns
from ._session import StoreSession
from ._writes import Written

__all__ = ["NEXT_ROUND", "PURGE_FALLBACK_SECONDS", "PostgresMemoryStore", "Purged", "SealReport",
           "StoreSession", "VectorErasure", "Written", "erase_vectors", "joined_turns", "seal_plaintext",
           "source_turns"]

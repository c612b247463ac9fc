"""Presentation: every response message built from stored things, as the caller's guard decided.

- ``_memory``: a stored memory as a ``Memory`` message with only the fields the view shows —
  the one field mask every answer applies;
- ``_present``: the other answers (ScoredMemory, WriteResult, MemoryVersion, ExtractionJob,
  receipts, views, issued tokens), each set only as far as the guard's decisions allow;
- ``_changes``: Watch's changes and heartbeats, a change shown as ``_memory`` shows its version;
- ``_block``: Recall's prompt-ready block (memories framed as reference data, never as
  instructions), its lines masked by ``_memory``.

This package decides nothing and refuses nothing: the guard (``memoryd.server.guard``) decides,
and this package applies its decisions. Nothing outside it builds one of those messages (the
architecture test checks it).
"""

from ._block import BLOCK_FOOTER, BLOCK_HEADER, render_block
from ._changes import change, changed, erased, heartbeat
from ._memory import memory, pending, timestamp
from ._present import (
    answer,
    block,
    dropped_counts,
    extraction_job,
    issued_token,
    masked_result,
    memory_for,
    receipt,
    scored,
    tie_key,
    version,
    view,
    write_results,
)

__all__ = ["BLOCK_FOOTER", "BLOCK_HEADER", "answer", "block", "change", "changed", "dropped_counts", "erased",
           "extraction_job", "heartbeat", "issued_token", "masked_result", "memory", "memory_for", "pending", "receipt",
           "render_block", "scored", "tie_key", "timestamp", "version", "view", "write_results"]

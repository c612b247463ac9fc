"""Presentation: every response message built from stored things, through the caller's guard.

``_present`` sets a field of a Memory, ScoredMemory, WriteResult, MemoryVersion, PendingValue,
ExtractionJob or receipt only when the guard says the view shows what it is derived from;
``_block`` renders Recall's prompt-ready block (memories framed as reference data, never as
instructions). Nothing outside this package builds one of those messages (the architecture test
checks it); the guard decides, this package only applies its decisions.
"""

from ._block import BLOCK_FOOTER, BLOCK_HEADER, render_block
from ._present import (
    answer,
    block,
    dropped_counts,
    extraction_job,
    issued_token,
    masked_result,
    memory,
    memory_for,
    pending,
    receipt,
    scored,
    tie_key,
    timestamp,
    version,
    view,
    write_results,
)

__all__ = ["BLOCK_FOOTER", "BLOCK_HEADER", "answer", "block", "dropped_counts", "extraction_job", "issued_token",
           "masked_result", "memory", "memory_for", "pending", "receipt", "render_block", "scored", "tie_key",
           "timestamp", "version", "view", "write_results"]

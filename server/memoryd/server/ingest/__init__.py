"""From raw turns to memories: the extraction worker and its model, chunking, provenance of each
item, the one-sentence-once rule, what happens while the model is out, and consolidation of
episodic fragments into profile memories.
"""

from ._chunking import chunk_drafts
from ._consolidation import ConsolidationReport, Consolidator, consolidator
from ._extraction import ExtractionWorker, extraction_worker

__all__ = ["ConsolidationReport", "Consolidator", "ExtractionWorker", "chunk_drafts", "consolidator",
           "extraction_worker"]

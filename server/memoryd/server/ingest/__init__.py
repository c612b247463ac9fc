"""From raw turns to memories: the extraction worker and its model, chunking, provenance of each
item, the one-sentence-once rule, what happens while the model is out, and consolidation of
episodic fragments into profile memories, and a session's summary.
"""

from ._chunking import chunk_drafts
from ._consolidation import ConsolidationReport, Consolidator, consolidator
from ._extraction import ExtractionWorker, extraction_worker
from ._summary import ChatSummarizer, SummaryInput, summarizer, summary_of

__all__ = ["ChatSummarizer", "ConsolidationReport", "Consolidator", "ExtractionWorker", "SummaryInput",
           "chunk_drafts", "consolidator", "extraction_worker", "summarizer", "summary_of"]

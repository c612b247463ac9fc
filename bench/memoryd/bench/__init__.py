"""Benchmarks against a real memoryd over gRPC (``memoryd bench ...``): the memoryd-bench
distribution (``bench/``), installed by ``make install`` and not part of the server's wheel.
``add_bench_commands`` adds its commands to the ``memoryd`` command.

``run_locomo`` runs the LoCoMo retrieval benchmark (see bench/README.md for the protocol and
the dataset's licence); the metric arithmetic lives in pure functions (``recall_at_k``,
``summarise``, ``percentile``) and the dataset reading in ``load_locomo``.
"""

from ._cli import add_bench_commands
from ._dataset import (CATEGORY_NAMES, SCORED_CATEGORIES, Conversation, DatasetError, Question, Turn,
                       canonical_dia_id, load_locomo, parse_conversation, parse_session_time, resolve_dataset,
                       select_conversations, split_evidence, subject_for, turn_text)
from .load import LoadOptions, LoadResult, run_load
from ._locomo import BenchError, LocomoOptions, LocomoResult, run_locomo
from ._metrics import QuestionResult, Row, Summary, channel_hits, percentile, recall_at_k, summarise
from ._server import EmbeddedServer, ServerError, sigterm_unwinds

__all__ = [
    "add_bench_commands", "CATEGORY_NAMES", "SCORED_CATEGORIES", "BenchError", "Conversation", "DatasetError", "EmbeddedServer",
    "LoadOptions", "LoadResult", "LocomoOptions", "LocomoResult", "Question", "QuestionResult", "Row",
    "ServerError", "Summary", "Turn",
    "canonical_dia_id", "channel_hits", "load_locomo", "parse_conversation", "parse_session_time", "percentile",
    "recall_at_k", "resolve_dataset", "run_load", "run_locomo", "select_conversations", "sigterm_unwinds",
    "split_evidence", "subject_for", "summarise", "turn_text",
]

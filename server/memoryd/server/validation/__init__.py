"""Request validation: protobuf requests in, typed commands out, or InvalidArgument.

One validator per RPC, each filling one ``Checker`` so a response names every invalid field at
once with its path (``items[3].key``); nothing is written before a request has passed. Fixed
limits and identifier grammars are the protos' ``buf.validate`` annotations, which ``_schema``
enforces on the whole request first (``tests/domain/test_contract_limits.py`` holds them equal to
``memoryd.domain.CONTRACT``); configurable ones come from ``Limits``, and rules across fields are
written here. Modules: ``_checker`` (the collector and the field kinds), ``_schema`` (the
annotations), ``_memories`` (Write,
Recall, MemoryView, GetHistory, Erase), ``_turns`` (turns and extraction jobs), ``_conflicts``,
``_watch``, ``_tokens`` and ``_views`` (the admin services).
"""

from ._checker import Checker, uuid_field
from ._conflicts import ResolveConflictCommand, validate_resolve_conflict
from ._memories import (
    EraseCommand,
    HistoryCommand,
    ListCommand,
    RecallCommand,
    Weights,
    WriteCommand,
    draft_from_message,
    validate_erase,
    validate_history,
    validate_memory_view,
    validate_recall,
    validate_write,
)
from ._tokens import IssueTokenCommand, validate_issue_token
from ._turns import JobCommand, validate_get_extraction_job
from ._watch import WatchCommand, validate_watch
from ._views import (
    AgentCommand,
    ListViewsCommand,
    PutViewCommand,
    read_view,
    validate_agent,
    validate_list_views,
    validate_put_view,
)

__all__ = [
    "AgentCommand", "Checker", "EraseCommand", "HistoryCommand", "IssueTokenCommand",
    "JobCommand", "ListCommand", "ListViewsCommand", "PutViewCommand", "RecallCommand", "ResolveConflictCommand",
    "Weights", "WriteCommand", "draft_from_message", "read_view", "uuid_field", "validate_agent", "validate_erase",
    "validate_get_extraction_job", "validate_history", "validate_issue_token", "validate_list_views",
    "validate_memory_view", "validate_put_view", "validate_recall", "validate_resolve_conflict", "validate_watch",
    "validate_write", "WatchCommand",
]

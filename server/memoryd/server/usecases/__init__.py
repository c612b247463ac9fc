"""The use cases of MemoryService (and TokenAdminService.IssueToken), one function per RPC,
each readable top to bottom: ask the guard, use the call's store session, answer through the
guard."""

from ._access import AccessRecorder
from ._change import erase, resolve_conflict
from ._read import export, extraction_job, history, memory_view, recall
from ._tokens import AdminCall
from ._tokens import issue as issue_token
from ._services import CallContext, Services, TokenMint
from ._streams import WatchHub
from ._transfer import validate_export, validate_import
from ._watch import watch
from ._write import import_archive, write

__all__ = ["AccessRecorder", "AdminCall", "CallContext", "Services", "TokenMint", "erase", "export", "extraction_job",
           "history", "import_archive", "issue_token", "memory_view", "recall", "resolve_conflict", "validate_export",
           "validate_import", "watch", "WatchHub", "write"]

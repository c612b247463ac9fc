"""Watch's messages: a change to a memory the caller reads, as a read presents it, and the
heartbeat of an idle stream.

A change to a memory that still exists shows its version as ``_memory.memory`` shows any
memory (the one field mask). A purged memory can no longer be read: its change shows only the
fields that identify it (those of them the view shows), and a subject's erasure only the
subject.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memoryd.domain import (Category, ChangeKind, LoggedChange, Memory, SourceKind, Stability,
                            Status)
from memoryd.v1 import memory_service_pb2 as svc

from .._enums import MEMORY_CHANGE_KIND
from ..guard import Guard
from ._memory import memory, timestamp

# What identifies a memory: all that the change of a purged one shows (as far as the view does).
IDENTIFYING = frozenset({"id", "subject", "scope", "session_id", "category", "key"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def change(guard: Guard, kind: ChangeKind, m: Memory) -> svc.MemoryChange:
    """A created, changed or forgotten memory: its version as the view shows it."""
    return svc.MemoryChange(kind=MEMORY_CHANGE_KIND.to_proto[kind], memory=memory(m, guard.visible))


def erased(guard: Guard, c: LoggedChange) -> svc.MemoryChange:
    """A purged memory (ERASED: what identifies it) or subject (SUBJECT_ERASED: the subject)."""
    shown = IDENTIFYING if c.kind is ChangeKind.ERASED else frozenset({"subject"})
    gone = Memory(c.memory_id, c.subject, c.scope, c.session_id, c.category or Category.FACT, c.key or "", "", None,
                  0.0, 0.0, Stability.STABLE, False, (), None, None, "", SourceKind.INPUT, (), c.version,
                  Status.FORGOTTEN, _EPOCH, _EPOCH)
    return svc.MemoryChange(kind=MEMORY_CHANGE_KIND.to_proto[c.kind], memory=memory(gone, guard.visible & shown))


def changed(cursor: str, event: svc.MemoryChange) -> svc.WatchResponse:
    return svc.WatchResponse(cursor=cursor, change=event)


def heartbeat(cursor: str, now: datetime) -> svc.WatchResponse:
    return svc.WatchResponse(cursor=cursor, heartbeat=svc.WatchHeartbeat(server_time=timestamp(now)))

"""memoryd.client — Python clients for memoryd, blocking and asyncio.

    from memoryd.client import MemorydClient, InvalidArgument
    from memoryd.v1 import memory_pb2 as pb

    with MemorydClient("127.0.0.1:50051", token=token) as client:
        client.write(subject="user-42", items=[
            pb.MemoryDraft(category=pb.CATEGORY_PREFERENCE, key="language", text="Rust")])
        print(client.recall(subject="user-42", keys=["language"]).memories[0].memory.text)

Both clients have one method per RPC of ``memoryd.v1.MemoryService`` and
``ViewAdminService`` (``write``, ``recall``, ``erase``, ``memory_view`` + ``iter_memories``,
``get_history``, ``get_extraction_job``, ``resolve_conflict``, ``export_memories``,
``import_memories``, ``put_view``, ``get_view``, ``list_views`` + ``iter_views``,
``delete_view``, ``end_session``, ``resume_session``); each takes the request message or its fields as keyword arguments.
Calls have a default deadline, are retried with exponential backoff and jitter when UNAVAILABLE
(only when that is safe), and raise the :class:`MemorydError` tree on failure. ``watch`` streams
the changes a view reads through an iterator that resumes from its last cursor by itself. ``token=`` is a
token or a provider called before every attempt; with ``opentelemetry-api`` installed, calls
made inside an active span carry its W3C trace context (``traceparent``/``tracestate``).
"""

from ._async import AsyncMemorydClient
from ._errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MemorydError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
    from_rpc_error,
)
from ._names import enum_name
from ._options import DEFAULT_TIMEOUT, KEEPALIVE, NO_RETRY, TLS, AsyncToken, Keepalive, RetryPolicy, Token
from ._sync import MemorydClient
from ._watch import WATCH_HEARTBEAT, WATCH_STALL_FACTOR, AsyncWatch, Watch

__all__ = [
    "AsyncMemorydClient", "MemorydClient", "Watch", "AsyncWatch", "WATCH_HEARTBEAT", "WATCH_STALL_FACTOR", "TLS", "Keepalive", "KEEPALIVE", "RetryPolicy", "NO_RETRY", "DEFAULT_TIMEOUT", "Token", "AsyncToken",
    "MemorydError", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
    "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated", "from_rpc_error",
    "enum_name",
]

"""Calls under a trace id the benchmark chose, through ``memoryd.client``.

The client sends the active OpenTelemetry span's context as ``traceparent``; a benchmark that
wants to find a call's server spans afterwards (``memoryd bench quick``'s overhead split) makes
the call inside ``traced(trace_id)``: a sampled, non-recording span with that trace id is active
for the call, so the server's spans of it carry the id.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["new_trace_id", "traced"]


def new_trace_id() -> str:
    """A fresh W3C trace id (32 hex digits)."""
    return secrets.token_hex(16)


@contextmanager
def traced(trace_id: str) -> Iterator[None]:
    """Make calls in the block part of trace ``trace_id`` (sampled)."""
    from opentelemetry import trace  # deferred: see memoryd.cli (commands start light)

    context = trace.SpanContext(trace_id=int(trace_id, 16), span_id=int(secrets.token_hex(8), 16), is_remote=False,
                                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    with trace.use_span(trace.NonRecordingSpan(context), end_on_exit=False):
        yield

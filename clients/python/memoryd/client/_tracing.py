"""The OpenTelemetry hook: W3C trace context (``traceparent``, and ``tracestate`` when set) from
the caller's active span, sent as metadata with every attempt of a call, so memoryd's server
span joins the caller's trace.

OpenTelemetry is optional: without ``opentelemetry-api`` installed (``pip install
'memoryd-client[otel]'`` adds it), or outside an active span, nothing is sent.
"""

from __future__ import annotations

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the client works without OpenTelemetry
    _trace = None  # type: ignore[assignment]
    _W3C = None
else:
    # W3C trace context only, as every memoryd client sends (clients/conformance/policy.json),
    # whatever the application's global propagators are.
    _W3C = TraceContextTextMapPropagator()

__all__ = ["trace_metadata"]

_HEADERS = ("traceparent", "tracestate")


def trace_metadata() -> tuple[tuple[str, str], ...]:
    """``traceparent``/``tracestate`` for the active span; () without one or without OpenTelemetry."""
    if _trace is None or _W3C is None:
        return ()
    if not _trace.get_current_span().get_span_context().is_valid:
        return ()
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return tuple((name, carrier[name]) for name in _HEADERS if carrier.get(name))

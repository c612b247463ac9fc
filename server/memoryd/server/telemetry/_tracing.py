"""OpenTelemetry tracing: a tracer provider whose exporter is off unless configured, and the
caller's W3C trace context (``traceparent``/``tracestate`` metadata) read from each call."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ._build import resource
from .._config import Config

# W3C trace context only, whatever OTEL_PROPAGATORS says: it is what every memoryd client sends
# (clients/conformance/policy.json), and baggage from a caller is not ours to carry.
_W3C = TraceContextTextMapPropagator()


def tracer_provider(config: Config, exporter: SpanExporter | None = None) -> TracerProvider:
    """A provider for memoryd's spans. ``exporter`` overrides the configured one (tests)."""
    provider = TracerProvider(resource=resource())
    if exporter is None and config.trace_exporter == "console":
        exporter = ConsoleSpanExporter()
    elif exporter is None and config.trace_exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise RuntimeError("trace_exporter 'otlp' needs: pip install 'memoryd[otlp]'") from exc
        exporter = OTLPSpanExporter(endpoint=config.otlp_endpoint or None)
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def tracer(provider: TracerProvider) -> trace.Tracer:
    return provider.get_tracer("memoryd.server")


def caller_context(metadata: Mapping[str, tuple[str, ...]]) -> Context | None:
    """The caller's span as the parent of ours, from ``traceparent`` (and ``tracestate``).

    Absent or malformed (a bad version, length, all-zero ids, two values) → None: the call
    starts a trace of its own; a caller's broken header is never an error.
    """
    values = metadata.get("traceparent", ())
    if len(values) != 1:
        return None
    carrier = {"traceparent": values[0]}
    state = metadata.get("tracestate", ())
    if state:
        carrier["tracestate"] = ",".join(state)
    try:
        context = _W3C.extract(carrier)
    except Exception:  # the propagator does not raise on bad input today; a header must never fail a call
        return None
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def current_trace_id() -> str:
    """The running span's trace id (32 hex digits), or "" outside a sampled span."""
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else ""

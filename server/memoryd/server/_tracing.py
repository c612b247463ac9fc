"""OpenTelemetry tracing: a tracer provider whose exporter is off unless configured."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from ._build import resource
from ._config import Config


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


def current_trace_id() -> str:
    """The running span's trace id (32 hex digits), or "" outside a sampled span."""
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else ""

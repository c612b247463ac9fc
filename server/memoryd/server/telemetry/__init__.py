"""What the process tells its operator: log lines (text or JSON), OpenTelemetry metrics and traces,
and the build it is running.
"""

from ._logging import configure_logging, log_access
from ._metrics import Metrics, MetricsRefresher, SERVER_ERRORS
from ._tracing import caller_context, current_trace_id, tracer, tracer_provider

__all__ = ["Metrics", "MetricsRefresher", "SERVER_ERRORS", "caller_context", "configure_logging",
           "current_trace_id", "log_access", "tracer", "tracer_provider"]

"""The interceptor chain is declared once, in order (docs/conventions.md, "One guard"): request
id, tracing, access log, metrics, error mapping, authentication, caller scope, validation. Each
step in behaviour: tests/server/test_interceptor_chain.py."""

from __future__ import annotations

from memoryd.server import Config, build_chain
from memoryd.server._auth import TokenVerifier


def test_chain_order_is_request_id_tracing_access_log_metrics_errors_auth_scope_validation(known_commit):
    from opentelemetry import trace

    chain = build_chain(verifier=TokenVerifier([]), services=None, config=Config(),  # type: ignore[arg-type]
                        tracer=trace.get_tracer("t"))
    assert [type(step).__name__ for step in chain] == [
        "RequestId", "Tracing", "AccessLog", "RpcMetrics", "ErrorMapping", "Authentication", "CallerScopeStep", "Validation",
    ]

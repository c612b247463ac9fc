// W3C trace context on every call, from the caller's OpenTelemetry context, so memoryd's spans
// join the caller's trace. @opentelemetry/api is an optional peer dependency: one copy, the
// application's, must hold the context (a second copy bundled here would register its own
// globals and could refuse the application's on a version mismatch), and an application
// without OpenTelemetry loads nothing.
//
// The application's propagator is used (it may add baggage, or its own formats); when it wrote
// no traceparent — no propagator registered, or one without W3C — the active span's context is
// written as W3C traceparent/tracestate anyway, because that is what memoryd reads. With no
// valid active span nothing is sent.

type OtelApi = typeof import("@opentelemetry/api");

// Started when the client module loads, so the first call rarely waits on it.
const otel: Promise<OtelApi | null> = import("@opentelemetry/api").then(
  (api) => api,
  () => null,
);

/** traceHeaders is the trace context of the caller's active OpenTelemetry span, as gRPC metadata. */
export async function traceHeaders(): Promise<Record<string, string>> {
  const api = await otel;
  if (api === null) return {};
  const active = api.context.active();
  const spanContext = api.trace.getSpanContext(active);
  if (spanContext === undefined || !api.trace.isSpanContextValid(spanContext)) return {};
  const carrier: Record<string, string> = {};
  api.propagation.inject(active, carrier);
  if (!carrier["traceparent"]) {
    const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, "0");
    carrier["traceparent"] = `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
    const state = spanContext.traceState?.serialize();
    if (state) carrier["tracestate"] = state;
  }
  return carrier;
}

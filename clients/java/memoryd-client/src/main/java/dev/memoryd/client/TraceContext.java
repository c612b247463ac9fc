package dev.memoryd.client;

import io.grpc.ClientInterceptor;

/**
 * The OpenTelemetry hook: when the OpenTelemetry API is on the classpath, an interceptor that
 * puts the active span's W3C trace context ({@code traceparent}, and {@code tracestate} when set)
 * into each call's metadata. The API is an optional dependency: without it this class loads no
 * OpenTelemetry class and the client sends no trace context.
 */
final class TraceContext {
  private TraceContext() {}

  /** The interceptor, or null when the OpenTelemetry API is absent. */
  static ClientInterceptor interceptorIfAvailable() {
    ClassLoader loader = TraceContext.class.getClassLoader();
    try {
      Class.forName("io.opentelemetry.context.Context", false, loader);
      Class.forName("io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator", false, loader);
    } catch (ClassNotFoundException | LinkageError absent) {
      return null;
    }
    return new OpenTelemetryInterceptor();  // loaded only here, once the API is known present
  }
}

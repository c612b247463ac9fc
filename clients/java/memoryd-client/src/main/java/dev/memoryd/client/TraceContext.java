package dev.memoryd.client;

import io.grpc.ClientInterceptor;
import java.util.function.Consumer;

/**
 * The OpenTelemetry hook: when the OpenTelemetry API is on the classpath, an interceptor that
 * puts the active span's W3C trace context ({@code traceparent}, and {@code tracestate} when set)
 * into each call's metadata. The API is an optional dependency: without it this class loads no
 * OpenTelemetry class and the client sends no trace context.
 */
final class TraceContext {
  private static final boolean AVAILABLE = available();

  private TraceContext() {}

  private static boolean available() {
    ClassLoader loader = TraceContext.class.getClassLoader();
    try {
      Class.forName("io.opentelemetry.context.Context", false, loader);
      Class.forName("io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator", false, loader);
      return true;
    } catch (ClassNotFoundException | LinkageError absent) {
      return false;
    }
  }

  /** The interceptor, or null when the OpenTelemetry API is absent. */
  static ClientInterceptor interceptorIfAvailable() {
    return AVAILABLE ? new OpenTelemetryInterceptor() : null;  // loaded only once the API is known present
  }

  /**
   * Runs what it is given in the OpenTelemetry context current now (directly without the API): a
   * watcher opens its stream again later, on the reader's thread, in the trace that watched.
   */
  static Consumer<Runnable> captureIfAvailable() {
    return AVAILABLE ? OpenTelemetryInterceptor.capture() : Runnable::run;
  }
}

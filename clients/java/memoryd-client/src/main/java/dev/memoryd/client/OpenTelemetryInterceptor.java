package dev.memoryd.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall.SimpleForwardingClientCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.TextMapSetter;
import java.util.function.Consumer;

/**
 * Injects the caller's {@link Context} (taken on the caller's thread, when the call is made) with
 * the W3C trace-context propagator. The propagator writes nothing unless the context holds a
 * valid span, so a call made outside any span carries no trace headers. W3C is used whatever
 * propagators the application configured globally: it is the format memoryd reads.
 */
final class OpenTelemetryInterceptor implements ClientInterceptor {
  private static final TextMapSetter<Metadata> SETTER = (headers, key, value) -> {
    if (headers != null) {
      headers.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);
    }
  };

  /** Runs what it is given with the context current now made current again. */
  static Consumer<Runnable> capture() {
    Context captured = Context.current();
    return task -> {
      try (Scope ignored = captured.makeCurrent()) {
        task.run();
      }
    };
  }

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options,
      Channel next) {
    Context caller = Context.current();
    return new SimpleForwardingClientCall<>(next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        W3CTraceContextPropagator.getInstance().inject(caller, headers, SETTER);
        super.start(listener, headers);
      }
    };
  }
}

package dev.memoryd.client;

import io.grpc.CallCredentials;
import io.grpc.Metadata;
import io.grpc.Status;
import java.io.UncheckedIOException;
import java.util.concurrent.Executor;
import java.util.function.Supplier;

/**
 * {@code authorization: Bearer <token>} from a provider that gRPC calls before every attempt, so
 * a refreshed token is used from the next attempt on without rebuilding the client. An empty or
 * null token sends no {@code authorization} metadata (the server then answers
 * {@code UNAUTHENTICATED}/{@code TOKEN_MISSING}).
 */
final class BearerTokenCredentials extends CallCredentials {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final Supplier<String> tokens;

  BearerTokenCredentials(Supplier<String> tokens) {
    this.tokens = tokens;
  }

  @Override
  public void applyRequestMetadata(RequestInfo info, Executor appExecutor, MetadataApplier applier) {
    // The provider may block (a refresh over the network): run it on the application's executor,
    // never on a transport thread.
    appExecutor.execute(() -> {
      String token;
      try {
        token = tokens.get();
      } catch (UncheckedIOException e) {
        // As grpc-auth does: a provider that could not reach its source is a transient failure,
        // so the call's retry policy may try again (and the provider with it).
        applier.fail(Status.UNAVAILABLE.withDescription("the token provider failed: " + e.getMessage())
            .withCause(e));
        return;
      } catch (RuntimeException e) {
        applier.fail(Status.UNAUTHENTICATED.withDescription("the token provider failed: " + e)
            .withCause(e));
        return;
      }
      Metadata headers = new Metadata();
      if (token != null && !token.isEmpty()) {
        headers.put(AUTHORIZATION, "Bearer " + token);
      }
      applier.apply(headers);
    });
  }
}

package dev.memoryd.client;

import io.grpc.CallCredentials;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.EraseRequest;
import dev.memoryd.v1.EraseResponse;
import dev.memoryd.v1.ExportMemoriesRequest;
import dev.memoryd.v1.ExportMemoriesResponse;
import dev.memoryd.v1.GetExtractionJobRequest;
import dev.memoryd.v1.GetExtractionJobResponse;
import dev.memoryd.v1.GetHistoryRequest;
import dev.memoryd.v1.GetHistoryResponse;
import dev.memoryd.v1.ImportMemoriesRequest;
import dev.memoryd.v1.ImportMemoriesResponse;
import dev.memoryd.v1.MemoryViewRequest;
import dev.memoryd.v1.MemoryViewResponse;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.RecallResponse;
import dev.memoryd.v1.ResolveConflictRequest;
import dev.memoryd.v1.ResolveConflictResponse;
import dev.memoryd.v1.WriteRequest;
import dev.memoryd.v1.WriteResponse;
import dev.memoryd.v1.ViewAdminServiceGrpc;
import dev.memoryd.v1.DeleteViewRequest;
import dev.memoryd.v1.DeleteViewResponse;
import dev.memoryd.v1.GetViewRequest;
import dev.memoryd.v1.GetViewResponse;
import dev.memoryd.v1.ListViewsRequest;
import dev.memoryd.v1.ListViewsResponse;
import dev.memoryd.v1.PutViewRequest;
import dev.memoryd.v1.PutViewResponse;

/**
 * A thin client for memoryd's {@code MemoryService} and {@code ViewAdminService}.
 *
 * <p>Every call gets the default deadline and is retried with exponential backoff and full
 * jitter when the server is {@code UNAVAILABLE} (and on no other code). A {@code Write} without
 * an idempotency key gets a generated one, so a retried write is applied once. A failed call
 * throws {@link MemorydException} with the status code, the {@code ErrorInfo} reason, the
 * {@code BadRequest} violations and the request id.
 *
 * <pre>{@code
 * try (MemorydClient client = MemorydClient.newBuilder("127.0.0.1:50051").bearerToken(token).build()) {
 *   client.write(WriteRequest.newBuilder().setSubject("user-42").addItems(...).build());
 * }
 * }</pre>
 */
public final class MemorydClient implements AutoCloseable {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final ManagedChannel channel;
  private final boolean ownsChannel;
  private final MemoryServiceGrpc.MemoryServiceBlockingStub memory;
  private final ViewAdminServiceGrpc.ViewAdminServiceBlockingStub admin;
  private final Duration deadline;
  private final int maxAttempts;
  private final Duration initialBackoff;
  private final Duration maxBackoff;

  private MemorydClient(Builder b) {
    if (b.channel != null) {
      this.channel = b.channel;
      this.ownsChannel = false;
    } else {
      this.channel = Grpc.newChannelBuilder(b.target, b.credentials()).build();
      this.ownsChannel = true;
    }
    MemoryServiceGrpc.MemoryServiceBlockingStub m = MemoryServiceGrpc.newBlockingStub(channel);
    ViewAdminServiceGrpc.ViewAdminServiceBlockingStub a = ViewAdminServiceGrpc.newBlockingStub(channel);
    if (b.token != null && !b.token.isEmpty()) {
      CallCredentials bearer = new BearerToken(b.token);
      m = m.withCallCredentials(bearer);
      a = a.withCallCredentials(bearer);
    }
    this.memory = m;
    this.admin = a;
    this.deadline = b.deadline;
    this.maxAttempts = b.maxAttempts;
    this.initialBackoff = b.initialBackoff;
    this.maxBackoff = b.maxBackoff;
  }

  /** A builder for a client of the memoryd at {@code target} ({@code host:port}). */
  public static Builder newBuilder(String target) {
    return new Builder(target, null);
  }

  /** A builder for a client on a channel the caller owns (and closes). */
  public static Builder forChannel(ManagedChannel channel) {
    return new Builder(null, channel);
  }

  // ---- MemoryService ----

  /** Stores memories; a request without an idempotency key gets a generated one. */
  public WriteResponse write(WriteRequest request) {
    WriteRequest keyed = request.getIdempotencyKey().isEmpty()
        ? request.toBuilder().setIdempotencyKey(UUID.randomUUID().toString()).build()
        : request;
    return call(memory, s -> s.write(keyed));
  }

  public RecallResponse recall(RecallRequest request) {
    return call(memory, s -> s.recall(request));
  }

  public EraseResponse erase(EraseRequest request) {
    return call(memory, s -> s.erase(request));
  }

  public MemoryViewResponse memoryView(MemoryViewRequest request) {
    return call(memory, s -> s.memoryView(request));
  }

  public GetHistoryResponse getHistory(GetHistoryRequest request) {
    return call(memory, s -> s.getHistory(request));
  }

  public GetExtractionJobResponse getExtractionJob(GetExtractionJobRequest request) {
    return call(memory, s -> s.getExtractionJob(request));
  }

  public ResolveConflictResponse resolveConflict(ResolveConflictRequest request) {
    return call(memory, s -> s.resolveConflict(request));
  }

  public ExportMemoriesResponse exportMemories(ExportMemoriesRequest request) {
    return call(memory, s -> s.exportMemories(request));
  }

  public ImportMemoriesResponse importMemories(ImportMemoriesRequest request) {
    return call(memory, s -> s.importMemories(request));
  }

  // ---- ViewAdminService ----

  public PutViewResponse putView(PutViewRequest request) {
    return call(admin, s -> s.putView(request));
  }

  public GetViewResponse getView(GetViewRequest request) {
    return call(admin, s -> s.getView(request));
  }

  public ListViewsResponse listViews(ListViewsRequest request) {
    return call(admin, s -> s.listViews(request));
  }

  public DeleteViewResponse deleteView(DeleteViewRequest request) {
    return call(admin, s -> s.deleteView(request));
  }

  /** The channel, for stubs of your own. */
  public ManagedChannel channel() {
    return channel;
  }

  @Override
  public void close() {
    if (!ownsChannel) {
      return;
    }
    channel.shutdown();
    try {
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  private <S extends io.grpc.stub.AbstractStub<S>, R> R call(S stub, Function<S, R> rpc) {
    for (int attempt = 1; ; attempt++) {
      try {
        return rpc.apply(stub.withDeadlineAfter(deadline.toNanos(), TimeUnit.NANOSECONDS));
      } catch (StatusRuntimeException e) {
        if (e.getStatus().getCode() != Status.Code.UNAVAILABLE || attempt >= maxAttempts) {
          throw MemorydException.from(e);
        }
        if (!sleep(backoff(attempt))) {
          throw MemorydException.from(e);  // interrupted: give up with the last failure
        }
      }
    }
  }

  /** Full jitter: uniform in [0, min(max, initial * 2^(attempt-1))]. */
  private Duration backoff(int attempt) {
    long cap = Math.min(maxBackoff.toNanos(), initialBackoff.toNanos() << Math.min(attempt - 1, 30));
    return Duration.ofNanos(ThreadLocalRandom.current().nextLong(cap + 1));
  }

  private static boolean sleep(Duration d) {
    try {
      Thread.sleep(d.toMillis(), d.toNanosPart() % 1_000_000);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** Sends {@code authorization: Bearer <token>} on every call. */
  private static final class BearerToken extends CallCredentials {
    private final String value;

    BearerToken(String token) {
      this.value = "Bearer " + token;
    }

    @Override
    public void applyRequestMetadata(RequestInfo info, Executor executor, MetadataApplier applier) {
      Metadata headers = new Metadata();
      headers.put(AUTHORIZATION, value);
      applier.apply(headers);
    }
  }

  /** Configures a {@link MemorydClient}; plaintext unless {@link #tls} or {@link #mtls} is set. */
  public static final class Builder {
    private final String target;
    private final ManagedChannel channel;
    private String token;
    private File caCert;
    private File clientCert;
    private File clientKey;
    private boolean tls;
    private Duration deadline = Duration.ofSeconds(30);
    private int maxAttempts = 4;
    private Duration initialBackoff = Duration.ofMillis(100);
    private Duration maxBackoff = Duration.ofSeconds(2);

    private Builder(String target, ManagedChannel channel) {
      this.target = target;
      this.channel = channel;
    }

    /** The agent's signed token, sent as {@code authorization: Bearer <token>}. */
    public Builder bearerToken(String token) {
      this.token = token;
      return this;
    }

    /** TLS, trusting {@code caCert} (PEM), or the system's roots when it is null. */
    public Builder tls(File caCert) {
      this.tls = true;
      this.caCert = caCert;
      return this;
    }

    /** Mutual TLS: the client presents {@code cert}/{@code key} (PEM) and trusts {@code caCert}. */
    public Builder mtls(File caCert, File cert, File key) {
      this.tls = true;
      this.caCert = caCert;
      this.clientCert = cert;
      this.clientKey = key;
      return this;
    }

    /** The deadline of each attempt (default 30 s). */
    public Builder deadline(Duration deadline) {
      this.deadline = deadline;
      return this;
    }

    /** Attempts per call when the server is UNAVAILABLE, the first included (default 4). */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 1) {
        throw new IllegalArgumentException("maxAttempts must be at least 1");
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    /** The backoff before the first retry and its cap (defaults 100 ms and 2 s). */
    public Builder backoff(Duration initial, Duration max) {
      this.initialBackoff = initial;
      this.maxBackoff = max;
      return this;
    }

    public MemorydClient build() {
      return new MemorydClient(this);
    }

    private ChannelCredentials credentials() {
      if (!tls) {
        return InsecureChannelCredentials.create();
      }
      try {
        TlsChannelCredentials.Builder creds = TlsChannelCredentials.newBuilder();
        if (caCert != null) {
          creds.trustManager(caCert);
        }
        if (clientCert != null) {
          creds.keyManager(clientCert, clientKey);
        }
        return creds.build();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot read the TLS files", e);
      }
    }
  }
}

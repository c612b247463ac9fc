package dev.memoryd.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.RetryInfo;
import dev.memoryd.v1.DeleteViewRequest;
import dev.memoryd.v1.DeleteViewResponse;
import dev.memoryd.v1.EndSessionRequest;
import dev.memoryd.v1.EndSessionResponse;
import dev.memoryd.v1.EraseRequest;
import dev.memoryd.v1.EraseResponse;
import dev.memoryd.v1.ExportMemoriesRequest;
import dev.memoryd.v1.ExportMemoriesResponse;
import dev.memoryd.v1.GetExtractionJobRequest;
import dev.memoryd.v1.GetExtractionJobResponse;
import dev.memoryd.v1.GetHistoryRequest;
import dev.memoryd.v1.GetHistoryResponse;
import dev.memoryd.v1.GetViewRequest;
import dev.memoryd.v1.GetViewResponse;
import dev.memoryd.v1.ImportMemoriesRequest;
import dev.memoryd.v1.ImportMemoriesResponse;
import dev.memoryd.v1.ListViewsRequest;
import dev.memoryd.v1.ListViewsResponse;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.MemoryViewRequest;
import dev.memoryd.v1.MemoryViewResponse;
import dev.memoryd.v1.PutViewRequest;
import dev.memoryd.v1.PutViewResponse;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.RecallResponse;
import dev.memoryd.v1.ResolveConflictRequest;
import dev.memoryd.v1.ResolveConflictResponse;
import dev.memoryd.v1.ResumeSessionRequest;
import dev.memoryd.v1.ResumeSessionResponse;
import dev.memoryd.v1.View;
import dev.memoryd.v1.ViewAdminServiceGrpc;
import dev.memoryd.v1.WatchRequest;
import dev.memoryd.v1.WriteRequest;
import dev.memoryd.v1.WriteResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.Context;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.ClientCalls;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;

/**
 * A client for memoryd's {@code MemoryService} and {@code ViewAdminService}, following the policy
 * every memoryd client shares ({@link RetryPolicy}, clients/conformance/policy.json):
 *
 * <ul>
 *   <li>Each attempt has a deadline (30 s unless {@link Builder#deadline} says otherwise); a
 *       deadline on the caller's {@link io.grpc.Context} bounds the whole call, retries included.
 *   <li>A call that fails with {@code UNAVAILABLE} is tried again, up to 4 attempts, after an
 *       exponential backoff with jitter (or the server's {@code RetryInfo} delay when longer) —
 *       unless its replay could apply twice: {@code ResolveConflict}, {@code ImportMemories} and
 *       {@code PutView} with an {@code expected_version} are tried once. A {@code Write} without
 *       an idempotency key gets a generated one before the first attempt, so a retried write is
 *       applied once.
 *   <li>The bearer token comes from a provider called before every attempt ({@link
 *       Builder#tokenProvider}): a refreshed token needs no new client. No token, no
 *       {@code authorization} metadata.
 *   <li>With the OpenTelemetry API on the classpath, each call carries the active span's W3C
 *       {@code traceparent}/{@code tracestate}; outside a span, nothing.
 *   <li>{@link #memoryViewAll} and {@link #listViewsAll} walk every page of a listing.
 *   <li>{@link #watch} returns a {@link Watcher} that keeps the change stream open: it resumes
 *       from the last cursor when the stream breaks, ends or stalls.
 * </ul>
 *
 * <p>A failed call throws {@link MemorydException} with the status code, the {@code ErrorInfo}
 * reason, the {@code BadRequest} violations and the request id.
 *
 * <pre>{@code
 * try (MemorydClient client = MemorydClient.newBuilder("127.0.0.1:50051").tokenProvider(tokens::current).build()) {
 *   client.write(WriteRequest.newBuilder().setSubject("user-42").addItems(...).build());
 * }
 * }</pre>
 */
public final class MemorydClient implements AutoCloseable {
  private final ManagedChannel ownedChannel;
  private final ManagedChannel channel;
  private final Channel calls;
  private final UnaryOperator<Channel> intercept;
  private final Supplier<ManagedChannel> redial;
  private final CallOptions options;
  private final Duration deadline;
  private final int maxAttempts;
  private final Duration initialBackoff;
  private final Duration maxBackoff;
  private final Duration heartbeatInterval;

  private MemorydClient(Builder b) {
    if (b.channel != null) {
      this.channel = b.channel;
      this.ownedChannel = null;
    } else {
      this.channel = b.channelBuilder().build();
      this.ownedChannel = channel;
    }
    ClientInterceptor tracing = TraceContext.interceptorIfAvailable();
    this.intercept = ch -> tracing == null ? ch : ClientInterceptors.intercept(ch, tracing);
    this.calls = intercept.apply(channel);
    // A watcher whose stream went silent reopens on a channel of its own, made like this one.
    this.redial = b.channel != null ? null : () -> b.channelBuilder().build();
    this.options = b.tokens == null ? CallOptions.DEFAULT
        : CallOptions.DEFAULT.withCallCredentials(new BearerTokenCredentials(b.tokens));
    this.deadline = b.deadline;
    this.maxAttempts = b.maxAttempts;
    this.initialBackoff = b.initialBackoff;
    this.maxBackoff = b.maxBackoff;
    this.heartbeatInterval = b.heartbeatInterval;
  }

  /** A builder for a client of the memoryd at {@code target} ({@code host:port}). */
  public static Builder newBuilder(String target) {
    return new Builder(Objects.requireNonNull(target, "target"), null);
  }

  /** A builder for a client on a channel the caller owns (and closes). */
  public static Builder forChannel(ManagedChannel channel) {
    return new Builder(null, Objects.requireNonNull(channel, "channel"));
  }

  // ---- MemoryService ----

  /**
   * Write stores memories; a request without an idempotency key gets a generated one, kept for
   * every retry.
   */
  public WriteResponse write(WriteRequest request) {
    WriteRequest keyed = request.getIdempotencyKey().isEmpty()
        ? request.toBuilder().setIdempotencyKey(UUID.randomUUID().toString()).build()
        : request;
    return call(MemoryServiceGrpc.getWriteMethod(), keyed);
  }

  /**
   * Recall returns the memories relevant to a query, a conversation (the request's context: its
   * recent turns, most recent last; a query is then optional) or keys, within the caller's view.
   */
  public RecallResponse recall(RecallRequest request) {
    return call(MemoryServiceGrpc.getRecallMethod(), request);
  }

  /** Erase forgets or purges memories; a replay erases nothing more. */
  public EraseResponse erase(EraseRequest request) {
    return call(MemoryServiceGrpc.getEraseMethod(), request);
  }

  /** MemoryView lists one page of a subject's memories; see {@link #memoryViewAll} for all. */
  public MemoryViewResponse memoryView(MemoryViewRequest request) {
    return call(MemoryServiceGrpc.getMemoryViewMethod(), request);
  }

  /**
   * Every memory of the listing, page after page from {@code request}'s page token on (each page
   * one {@code MemoryView} call, fetched when the iteration reaches it).
   */
  public Pages<Memory> memoryViewAll(MemoryViewRequest request) {
    return new Pages<>(request.getPageToken(), token -> {
      MemoryViewResponse page = memoryView(request.toBuilder().setPageToken(token).build());
      return new Pages.Page<>(page.getMemoriesList(), page.getNextPageToken());
    });
  }

  /** GetHistory returns the versions of one memory. */
  public GetHistoryResponse getHistory(GetHistoryRequest request) {
    return call(MemoryServiceGrpc.getGetHistoryMethod(), request);
  }

  /** GetExtractionJob returns the state of an extraction job. */
  public GetExtractionJobResponse getExtractionJob(GetExtractionJobRequest request) {
    return call(MemoryServiceGrpc.getGetExtractionJobMethod(), request);
  }

  /** ResolveConflict settles a pending value; never retried (a replay could apply twice). */
  public ResolveConflictResponse resolveConflict(ResolveConflictRequest request) {
    return call(MemoryServiceGrpc.getResolveConflictMethod(), request);
  }

  /** ExportMemories returns a subject's memories for export. */
  public ExportMemoriesResponse exportMemories(ExportMemoriesRequest request) {
    return call(MemoryServiceGrpc.getExportMemoriesMethod(), request);
  }

  /** ImportMemories stores exported memories; never retried (no idempotency key). */
  public ImportMemoriesResponse importMemories(ImportMemoriesRequest request) {
    return call(MemoryServiceGrpc.getImportMemoriesMethod(), request);
  }

  /**
   * Watch opens a stream of the changes to the request's subject (or, with {@code all_subjects},
   * every subject) that the caller's view reads, from its cursor if set, else from now; the
   * {@link Watcher} returns the changes and resumes the stream by itself (heartbeats are read, not
   * returned). The stream has no deadline: close the watcher to end it.
   */
  public Watcher watch(WatchRequest request) {
    return new Watcher(calls, redial, intercept, options, request, false, heartbeatInterval, initialBackoff,
        maxBackoff);
  }

  /** As {@link #watch}, and the watcher returns the server's heartbeats too. */
  public Watcher watchWithHeartbeats(WatchRequest request) {
    return new Watcher(calls, redial, intercept, options, request, true, heartbeatInterval, initialBackoff,
        maxBackoff);
  }

  /** EndSession ends a session and returns its snapshot; retried (ending again rebuilds it). */
  public EndSessionResponse endSession(EndSessionRequest request) {
    return call(MemoryServiceGrpc.getEndSessionMethod(), request);
  }

  /**
   * ResumeSession returns the latest session snapshot of a subject (or the one of the request's
   * session id) that the caller's view reads, from any agent or device.
   */
  public ResumeSessionResponse resumeSession(ResumeSessionRequest request) {
    return call(MemoryServiceGrpc.getResumeSessionMethod(), request);
  }

  // ---- ViewAdminService ----

  /** PutView stores an agent's view; retried only when {@code expected_version} is 0. */
  public PutViewResponse putView(PutViewRequest request) {
    return call(ViewAdminServiceGrpc.getPutViewMethod(), request);
  }

  /** GetView returns an agent's view. */
  public GetViewResponse getView(GetViewRequest request) {
    return call(ViewAdminServiceGrpc.getGetViewMethod(), request);
  }

  /** ListViews lists one page of the tenant's views; see {@link #listViewsAll} for all. */
  public ListViewsResponse listViews(ListViewsRequest request) {
    return call(ViewAdminServiceGrpc.getListViewsMethod(), request);
  }

  /** Every view of the tenant, page after page from {@code request}'s page token on. */
  public Pages<View> listViewsAll(ListViewsRequest request) {
    return new Pages<>(request.getPageToken(), token -> {
      ListViewsResponse page = listViews(request.toBuilder().setPageToken(token).build());
      return new Pages.Page<>(page.getViewsList(), page.getNextPageToken());
    });
  }

  /** DeleteView removes an agent's view; a replay finds nothing to delete. */
  public DeleteViewResponse deleteView(DeleteViewRequest request) {
    return call(ViewAdminServiceGrpc.getDeleteViewMethod(), request);
  }

  /** The channel, for stubs of your own (without this client's retries, token or tracing). */
  public ManagedChannel channel() {
    return channel;
  }

  @Override
  public void close() {
    if (ownedChannel == null) {
      return;
    }
    ownedChannel.shutdown();
    try {
      if (!ownedChannel.awaitTermination(5, TimeUnit.SECONDS)) {
        ownedChannel.shutdownNow();
      }
    } catch (InterruptedException e) {
      ownedChannel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  private <Q, R> R call(MethodDescriptor<Q, R> method, Q request) {
    boolean retryable = RetryPolicy.mayRetry(method, request);
    Deadline overall = Context.current().getDeadline();  // the caller's budget, if it set one
    for (int attempt = 1; ; attempt++) {
      try {
        CallOptions attemptOptions = options.withDeadlineAfter(deadline.toNanos(), TimeUnit.NANOSECONDS);
        return ClientCalls.blockingUnaryCall(calls, method, attemptOptions, request);
      } catch (StatusRuntimeException e) {
        if (!retryable || attempt >= maxAttempts
            || !RetryPolicy.RETRY_CODES.contains(e.getStatus().getCode())) {
          throw MemorydException.from(e);
        }
        Duration wait = RetryPolicy.backoff(attempt, initialBackoff, maxBackoff,
            ThreadLocalRandom.current().nextDouble());
        Duration asked = retryDelay(e);
        if (asked != null && asked.compareTo(wait) > 0) {
          wait = asked;
        }
        if (overall != null && overall.timeRemaining(TimeUnit.NANOSECONDS) <= wait.toNanos()) {
          throw MemorydException.from(e);  // the caller's deadline would pass before the retry
        }
        if (!sleep(wait)) {
          throw MemorydException.from(e);  // interrupted: give up with the last failure
        }
      }
    }
  }

  /** The delay a {@code google.rpc.RetryInfo} detail asks for, or null. */
  static Duration retryDelay(StatusRuntimeException e) {
    com.google.rpc.Status status = StatusProto.fromThrowable(e);
    if (status == null) {
      return null;
    }
    for (Any detail : status.getDetailsList()) {
      if (detail.is(RetryInfo.class)) {
        try {
          com.google.protobuf.Duration d = detail.unpack(RetryInfo.class).getRetryDelay();
          return Duration.ofSeconds(d.getSeconds(), d.getNanos());
        } catch (InvalidProtocolBufferException ignored) {
          return null;  // a malformed detail asks for nothing
        }
      }
    }
    return null;
  }

  private static boolean sleep(Duration d) {
    try {
      TimeUnit.NANOSECONDS.sleep(d.toNanos());
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** Configures a {@link MemorydClient}; plaintext unless {@link #tls} or {@link #mtls} is set. */
  public static final class Builder {
    private final String target;
    private final ManagedChannel channel;
    private Supplier<String> tokens;
    private File caCert;
    private File clientCert;
    private File clientKey;
    private boolean tls;
    private Duration deadline = RetryPolicy.DEFAULT_DEADLINE;
    private int maxAttempts = RetryPolicy.MAX_ATTEMPTS;
    private Duration initialBackoff = RetryPolicy.INITIAL_BACKOFF;
    private Duration maxBackoff = RetryPolicy.MAX_BACKOFF;
    private Duration heartbeatInterval = RetryPolicy.DEFAULT_HEARTBEAT_INTERVAL;
    Duration keepAliveTime = RetryPolicy.KEEPALIVE_TIME; // null: no pings
    Duration keepAliveTimeout = RetryPolicy.KEEPALIVE_TIMEOUT;

    private Builder(String target, ManagedChannel channel) {
      this.target = target;
      this.channel = channel;
    }

    /**
     * A fixed token, sent as {@code authorization: Bearer <token>}; empty or null sends none.
     * For a token that changes, use {@link #tokenProvider}.
     */
    public Builder bearerToken(String token) {
      this.tokens = token == null || token.isEmpty() ? null : () -> token;
      return this;
    }

    /**
     * A provider asked for the token before every attempt of every call (on the application's
     * executor, so it may block to refresh). An empty or null answer sends no
     * {@code authorization} metadata. If it throws {@link UncheckedIOException} the attempt fails
     * with {@code UNAVAILABLE} (and is retried like one); any other exception fails it with
     * {@code UNAUTHENTICATED}.
     */
    public Builder tokenProvider(Supplier<String> provider) {
      this.tokens = Objects.requireNonNull(provider, "provider");
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

    /** The deadline of each attempt (default {@link RetryPolicy#DEFAULT_DEADLINE}, 30 s). */
    public Builder deadline(Duration deadline) {
      if (deadline.isNegative() || deadline.isZero()) {
        throw new IllegalArgumentException("the deadline must be positive");
      }
      this.deadline = deadline;
      return this;
    }

    /** Attempts per retryable call, the first included (default 4); 1 turns retries off. */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 1) {
        throw new IllegalArgumentException("maxAttempts must be at least 1");
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    /** The backoff before the first retry and its cap, before jitter (defaults 100 ms and 2 s). */
    public Builder backoff(Duration initial, Duration max) {
      this.initialBackoff = Objects.requireNonNull(initial, "initial");
      this.maxBackoff = Objects.requireNonNull(max, "max");
      return this;
    }

    /**
     * The server's {@code Watch} heartbeat interval (default {@link
     * RetryPolicy#DEFAULT_HEARTBEAT_INTERVAL}, 15 s, the server's default): a {@link Watcher} that
     * receives nothing for {@link RetryPolicy#WATCH_STALL_FACTOR} intervals opens its stream again.
     */
    public Builder heartbeatInterval(Duration interval) {
      if (interval.isNegative() || interval.isZero()) {
        throw new IllegalArgumentException("the heartbeat interval must be positive");
      }
      this.heartbeatInterval = interval;
      return this;
    }

    /**
     * HTTP/2 keepalive pings of the client's connections (defaults {@link
     * RetryPolicy#KEEPALIVE_TIME}, 30 s, and {@link RetryPolicy#KEEPALIVE_TIMEOUT}, 10 s, with or
     * without calls open); a null {@code time} sends none. A time under the server's accepted
     * interval (5 s by default) gets the connection closed with GOAWAY "too_many_pings".
     */
    public Builder keepAlive(Duration time, Duration timeout) {
      this.keepAliveTime = time;
      this.keepAliveTimeout = Objects.requireNonNull(timeout, "timeout");
      return this;
    }

    ManagedChannelBuilder<?> channelBuilder() {
      ManagedChannelBuilder<?> builder = Grpc.newChannelBuilder(target, credentials());
      if (keepAliveTime != null) {
        builder.keepAliveTime(keepAliveTime.toNanos(), TimeUnit.NANOSECONDS)
            .keepAliveTimeout(keepAliveTimeout.toNanos(), TimeUnit.NANOSECONDS)
            .keepAliveWithoutCalls(RetryPolicy.KEEPALIVE_WITHOUT_CALLS);
      }
      return builder;
    }

    /** The client; on a channel of its own (closed by {@link MemorydClient#close}) unless built
     * with {@link MemorydClient#forChannel}. */
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

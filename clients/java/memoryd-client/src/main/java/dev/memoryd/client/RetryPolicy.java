package dev.memoryd.client;

import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.PutViewRequest;
import dev.memoryd.v1.TokenAdminServiceGrpc;
import dev.memoryd.v1.ViewAdminServiceGrpc;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * When a failed call is tried again, and after how long: the policy every memoryd client follows
 * (clients/conformance/policy.json, which a test of this client reads and compares).
 *
 * <ul>
 *   <li>Each attempt has its own deadline, {@link #DEFAULT_DEADLINE} unless the client sets one.
 *   <li>Only {@link #RETRY_CODES} are retried, at most {@link #MAX_ATTEMPTS} attempts in all.
 *   <li>Before retry {@code n} (1 for the first retry) the client waits
 *       {@code min(MAX_BACKOFF, INITIAL_BACKOFF * MULTIPLIER^(n-1))}, scaled by a uniform random
 *       factor in {@code [1 - JITTER, 1]} so clients that failed together do not return together;
 *       a longer delay the server asks for in a {@code google.rpc.RetryInfo} detail wins.
 *   <li>Whether a method may be retried at all is its {@link Rule} in {@link #METHODS}: a call
 *       whose replay could apply twice is tried once.
 * </ul>
 */
public final class RetryPolicy {
  /** The deadline of each attempt unless the client sets another. */
  public static final Duration DEFAULT_DEADLINE = Duration.ofSeconds(30);
  /** Attempts per call, the first included. */
  public static final int MAX_ATTEMPTS = 4;
  /** The backoff before the first retry, before jitter. */
  public static final Duration INITIAL_BACKOFF = Duration.ofMillis(100);
  /** The longest backoff, before jitter. */
  public static final Duration MAX_BACKOFF = Duration.ofSeconds(2);
  /** The growth of the backoff from one retry to the next. */
  public static final double MULTIPLIER = 2.0;
  /** The share of a backoff that is randomly cut: the wait is in [(1 - JITTER) * b, b]. */
  public static final double JITTER = 0.5;
  /** How often the server sends a heartbeat on an idle {@code Watch} stream (its default). */
  public static final Duration DEFAULT_HEARTBEAT_INTERVAL = Duration.ofSeconds(15);
  /**
   * A {@code Watch} stream on which nothing, not even a heartbeat, arrived for this many heartbeat
   * intervals is taken for dead (a half-open connection) and opened again from its cursor.
   */
  public static final int WATCH_STALL_FACTOR = 3;
  /**
   * A connection that received nothing for this long is pinged (HTTP/2 keepalive), with or without
   * a call open ({@link #KEEPALIVE_WITHOUT_CALLS}); without an answer within {@link
   * #KEEPALIVE_TIMEOUT} it is closed, so the next call connects afresh instead of waiting out its
   * deadline on a connection a NAT or proxy dropped. A memoryd server accepts a ping every 5 s
   * and answers faster ones with GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
   */
  public static final Duration KEEPALIVE_TIME = Duration.ofSeconds(30);
  /** How long a keepalive ping's answer is waited for before the connection is closed. */
  public static final Duration KEEPALIVE_TIMEOUT = Duration.ofSeconds(10);
  /** Whether a connection with no call open is pinged too. */
  public static final boolean KEEPALIVE_WITHOUT_CALLS = true;
  /** The only status codes that are retried: the server was not reached or could not serve. */
  public static final Set<Status.Code> RETRY_CODES = Set.of(Status.Code.UNAVAILABLE);

  /** Whether a method may be retried. */
  public enum Rule {
    /** Idempotent (or made so by the client, as Write with its idempotency key). */
    ALWAYS,
    /** A replay could apply twice: the contract gives it no idempotency key. */
    NEVER,
    /** PutView: retried only without {@code expected_version}; with one, a replay fails on the
     * version the first attempt bumped. */
    UNLESS_EXPECTED_VERSION,
    /** Watch: a stream, opened again from the last cursor received ({@link Watcher}), never replayed. */
    RESUME
  }

  /** Every method the client calls, by full gRPC name ({@code memoryd.v1.MemoryService/Write}). */
  public static final Map<String, Rule> METHODS = methods();

  private RetryPolicy() {}

  private static Map<String, Rule> methods() {
    Map<String, Rule> m = new LinkedHashMap<>();
    m.put(MemoryServiceGrpc.getWriteMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getRecallMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getEraseMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getMemoryViewMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getGetHistoryMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getGetExtractionJobMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getResolveConflictMethod().getFullMethodName(), Rule.NEVER);
    m.put(MemoryServiceGrpc.getExportMemoriesMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getImportMemoriesMethod().getFullMethodName(), Rule.NEVER);
    m.put(MemoryServiceGrpc.getWatchMethod().getFullMethodName(), Rule.RESUME);
    // Ending a session again rebuilds the same snapshot: no second effect.
    m.put(MemoryServiceGrpc.getEndSessionMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(MemoryServiceGrpc.getResumeSessionMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(ViewAdminServiceGrpc.getPutViewMethod().getFullMethodName(), Rule.UNLESS_EXPECTED_VERSION);
    m.put(ViewAdminServiceGrpc.getGetViewMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(ViewAdminServiceGrpc.getListViewsMethod().getFullMethodName(), Rule.ALWAYS);
    m.put(ViewAdminServiceGrpc.getDeleteViewMethod().getFullMethodName(), Rule.ALWAYS);
    // A replay would mint a second token.
    m.put(TokenAdminServiceGrpc.getIssueTokenMethod().getFullMethodName(), Rule.NEVER);
    return Map.copyOf(m);
  }

  /** Whether this request to this method may be sent again after a retryable failure. */
  static boolean mayRetry(MethodDescriptor<?, ?> method, Object request) {
    Rule rule = METHODS.get(method.getFullMethodName());
    if (rule == null) {
      return false;  // a method this table does not know is not assumed to be idempotent
    }
    return switch (rule) {
      case ALWAYS -> true;
      case NEVER, RESUME -> false;
      case UNLESS_EXPECTED_VERSION -> ((PutViewRequest) request).getExpectedVersion() == 0;
    };
  }

  /**
   * The wait before retry {@code retry} (1 for the first): {@code min(max, initial *
   * MULTIPLIER^(retry-1))} scaled by {@code 1 - JITTER * random}, {@code random} in [0, 1).
   */
  static Duration backoff(int retry, Duration initial, Duration max, double random) {
    double base = Math.min(max.toNanos(), initial.toNanos() * Math.pow(MULTIPLIER, retry - 1));
    return Duration.ofNanos((long) (base * (1 - JITTER * random)));
  }
}

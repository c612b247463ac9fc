package dev.memoryd.client;

import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.WatchRequest;
import dev.memoryd.v1.WatchResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import java.time.Duration;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;

/**
 * A {@code Watch} stream that keeps itself open ({@link MemorydClient#watch}). It remembers the
 * cursor of the last message received ({@link #cursor()}); when the stream fails with
 * {@code UNAVAILABLE}, ends without an error, or stalls (nothing, not even a heartbeat, for
 * {@link RetryPolicy#WATCH_STALL_FACTOR} heartbeat intervals), it opens the stream again from that
 * cursor after the retry policy's backoff, as often as it takes: the changes it returns are every
 * change after the start, each exactly once, in commit order. Any other error ({@code
 * INVALID_ARGUMENT}, {@code PERMISSION_DENIED}, {@code UNAUTHENTICATED}, {@code
 * FAILED_PRECONDITION CURSOR_EXPIRED}, {@code RESOURCE_EXHAUSTED TOO_MANY_STREAMS}, ...) ends the
 * watch: it is thrown as a {@link MemorydException}, then again on every later read.
 *
 * <p>The stream has no deadline; {@link #close} ends it (from any thread: a waiting read then
 * returns). Reads ({@link #poll}, {@link #hasNext}, {@link #next}) are for one thread. The client
 * asks the server for one message at a time, so a slow reader holds at most one in memory.
 *
 * <pre>{@code
 * try (Watcher changes = client.watch(WatchRequest.newBuilder().setSubject("user-42").build())) {
 *   while (changes.hasNext()) {
 *     MemoryChange change = changes.next().getChange();
 *     ...
 *     store.save(changes.cursor());  // to resume after a restart: setCursor(saved)
 *   }
 * }
 * }</pre>
 */
public final class Watcher implements Iterator<WatchResponse>, AutoCloseable {
  /** How a stream ended: its status and trailers. */
  private record Ended(Status status, Metadata trailers) {}

  private final CallOptions options;
  private final Supplier<ManagedChannel> redial;  // null: on the caller's channel only
  private final UnaryOperator<Channel> intercept;
  private Channel channel;  // the client's, or over own after a silence
  private ManagedChannel own;  // the watch's own channel, once a stream went silent (guarded by this)
  private final WatchRequest request;
  private final boolean heartbeats;
  private final long stallNanos;
  private final Duration initialBackoff;
  private final Duration maxBackoff;
  private final CountDownLatch closed = new CountDownLatch(1);
  private final Consumer<Runnable> inWatchersTrace = TraceContext.captureIfAvailable();

  private volatile Stream live;  // the open stream; null between a failure and the next open
  private String cursor;
  private int failures;  // opens in a row that delivered nothing
  private long reopenAt;  // a nanoTime: when to open again, while live is null
  private MemorydException failure;  // what ended the watch
  private WatchResponse pending;  // read by hasNext, returned by next

  Watcher(Channel channel, Supplier<ManagedChannel> redial, UnaryOperator<Channel> intercept, CallOptions options,
      WatchRequest request, boolean heartbeats, Duration heartbeatInterval, Duration initialBackoff,
      Duration maxBackoff) {
    this.channel = channel;
    this.redial = redial;
    this.intercept = intercept;
    this.options = options;
    this.request = request;
    this.heartbeats = heartbeats;
    this.stallNanos = heartbeatInterval.toNanos() * RetryPolicy.WATCH_STALL_FACTOR;
    this.initialBackoff = initialBackoff;
    this.maxBackoff = maxBackoff;
    this.cursor = request.getCursor();
    open();
  }

  /** One open {@code Watch} call; its listener queues what arrives, one message at a time. */
  private static final class Stream extends ClientCall.Listener<WatchResponse> {
    final ClientCall<WatchRequest, WatchResponse> call;
    final BlockingQueue<Object> events = new LinkedBlockingQueue<>();  // WatchResponse, then Ended
    final CountDownLatch accepted = new CountDownLatch(1);  // the response headers came, or the end
    volatile long waitingSince;  // when the server was last asked for a message

    Stream(ClientCall<WatchRequest, WatchResponse> call) {
      this.call = call;
    }

    void requestOne() {
      waitingSince = System.nanoTime();
      call.request(1);
    }

    @Override
    public void onHeaders(Metadata headers) {
      accepted.countDown();
    }

    @Override
    public void onMessage(WatchResponse message) {
      events.add(message);
    }

    @Override
    public void onClose(Status status, Metadata trailers) {
      events.add(new Ended(status, trailers));
      accepted.countDown();
    }
  }

  /** The cursor of the last message received (heartbeats included), or the request's before any. */
  public String cursor() {
    return cursor;
  }

  /**
   * The next change (or heartbeat, with {@link MemorydClient#watchWithHeartbeats}), waiting at most
   * {@code timeout}; null when none came in that time, or once the watcher is closed. The stream
   * stays open either way.
   *
   * @throws MemorydException the error that ended the watch
   */
  public WatchResponse poll(Duration timeout) {
    if (pending != null) {
      WatchResponse next = pending;
      pending = null;
      return next;
    }
    return read(System.nanoTime() + timeout.toNanos(), false);
  }

  /** Waits for the next change; false only once the watcher is closed. */
  @Override
  public boolean hasNext() {
    if (pending == null) {
      pending = read(0, true);
    }
    return pending != null;
  }

  /** The next change, waiting as long as it takes. */
  @Override
  public WatchResponse next() {
    if (!hasNext()) {
      throw new NoSuchElementException("the watcher is closed");
    }
    WatchResponse next = pending;
    pending = null;
    return next;
  }

  /**
   * Waits until the server has accepted the watcher's stream (its response headers arrived), so
   * that a change committed afterwards is delivered; at most {@code timeout}. True when it was
   * accepted, or when it failed meanwhile (the next read says how, or resumes it); false when the
   * time ran out first.
   */
  public boolean awaitOpen(Duration timeout) {
    if (failure != null) {
      throw failure;
    }
    long end = System.nanoTime() + timeout.toNanos();
    while (live == null && !isClosed()) {
      long now = System.nanoTime();
      if (reopenAt - now <= 0) {
        open();
      } else if (end - now <= 0) {
        return false;
      } else {
        await(Math.min(reopenAt - now, end - now));
      }
    }
    Stream stream = live;
    try {
      return stream == null || stream.accepted.await(end - System.nanoTime(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** Ends the watch and its stream; a read waiting in another thread returns. */
  @Override
  public void close() {
    closed.countDown();
    Stream stream = live;
    if (stream != null) {
      stream.call.cancel("the watcher was closed", null);
    }
    ManagedChannel mine;
    synchronized (this) {
      mine = own;
      own = null;
    }
    if (mine != null) {
      mine.shutdownNow();
    }
  }

  /** Waits until the watcher closes or {@code nanos} pass. */
  private void await(long nanos) {
    try {
      closed.await(nanos, TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private boolean isClosed() {
    return closed.getCount() == 0;
  }

  /** The next message to return, or null when {@code end} (a nanoTime; unless forever) passed. */
  private WatchResponse read(long end, boolean forever) {
    while (true) {
      if (failure != null) {
        throw failure;
      }
      if (isClosed()) {
        return null;
      }
      long now = System.nanoTime();
      if (live == null) {
        long left = reopenAt - now;
        if (left <= 0) {
          open();
          continue;
        }
        if (!forever && end - now <= 0) {
          return null;
        }
        await(forever ? left : Math.min(left, end - now));
        if (Thread.currentThread().isInterrupted()) {
          return null;
        }
        continue;
      }
      Stream stream = live;
      long wait = forever ? Long.MAX_VALUE : end - now;
      long stallLeft = stream.waitingSince + stallNanos - now;
      Object event;
      try {
        event = stream.events.poll(Math.max(0, Math.min(wait, stallLeft)), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return null;
      }
      if (event == null) {
        if (System.nanoTime() - (stream.waitingSince + stallNanos) >= 0) {
          // Silent for too long (a half-open connection): open it again from the cursor.
          stream.call.cancel("nothing arrived, not even a heartbeat", null);
          live = null;
          reconnect();
          scheduleReopen(null);
          continue;
        }
        if (forever) {
          continue;
        }
        return null;
      }
      if (event instanceof WatchResponse message) {
        stream.requestOne();
        failures = 0;
        cursor = message.getCursor();
        if (message.hasHeartbeat() && !heartbeats) {
          continue;
        }
        return message;
      }
      Ended ended = (Ended) event;
      live = null;
      if (isClosed()) {
        return null;
      }
      if (!resumable(ended.status())) {
        failure = MemorydException.from(ended.status().asRuntimeException(ended.trailers()));
        throw failure;
      }
      scheduleReopen(MemorydClient.retryDelay(ended.status().asRuntimeException(ended.trailers())));
    }
  }

  /**
   * Moves the watch to a channel of its own (when the client made its channel): a silent stream
   * may sit on a half-open connection, which gRPC keeps until TCP gives up, and a stream reopened
   * on it would go silent again.
   */
  private void reconnect() {
    if (redial == null) {
      return;
    }
    ManagedChannel fresh = redial.get();
    ManagedChannel old;
    synchronized (this) {
      if (isClosed()) {
        old = fresh;
      } else {
        old = own;
        own = fresh;
        channel = intercept.apply(fresh);
      }
    }
    if (old != null) {
      old.shutdownNow();
    }
  }

  /** A stream that ended without an error (a server shutting down) or with UNAVAILABLE resumes. */
  private static boolean resumable(Status status) {
    return status.isOk() || RetryPolicy.RETRY_CODES.contains(status.getCode());
  }

  /**
   * Counts a failed stream and sets when to open the next: after the policy's backoff for the
   * failures in a row (or the server's RetryInfo {@code asked} delay when longer). A read whose
   * time runs out first leaves the time set, so short reads still reach it.
   */
  private void scheduleReopen(Duration asked) {
    failures++;
    Duration wait = RetryPolicy.backoff(failures, initialBackoff, maxBackoff, ThreadLocalRandom.current().nextDouble());
    if (asked != null && asked.compareTo(wait) > 0) {
      wait = asked;
    }
    reopenAt = System.nanoTime() + wait.toNanos();
  }

  /**
   * Starts a stream from the cursor, in the trace of the span that watched; the token provider
   * runs as the call starts.
   */
  private void open() {
    inWatchersTrace.accept(this::start);
  }

  private void start() {
    WatchRequest from = cursor.equals(request.getCursor()) ? request : request.toBuilder().setCursor(cursor).build();
    ClientCall<WatchRequest, WatchResponse> call = channel.newCall(MemoryServiceGrpc.getWatchMethod(), options);
    Stream stream = new Stream(call);
    call.start(stream, new Metadata());
    call.sendMessage(from);
    call.halfClose();
    stream.requestOne();
    live = stream;
    if (isClosed()) {
      call.cancel("the watcher was closed", null);
    }
  }
}

package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.rpc.Code;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.MemoryChange;
import dev.memoryd.v1.MemoryChangeKind;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.WatchHeartbeat;
import dev.memoryd.v1.WatchRequest;
import dev.memoryd.v1.WatchResponse;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Scope;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The {@link Watcher} against a real gRPC server (in-process transport) that serves a log of
 * events "c1", "c2", ...: a stream from cursor "cN" sends the events after N, so a watcher that
 * resumes wrongly sees a gap or a repeat. Each test scripts how each stream ends.
 */
class WatcherTest {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Metadata.Key<String> TRACEPARENT =
      Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);
  /** A stream that stays silent until the client goes away. */
  private static final StatusRuntimeException HANG = Status.INTERNAL.withDescription("hang").asRuntimeException();

  /** How stream n (0 for the first) behaves: how many events it sends, then how it ends (null: OK). */
  private record Script(int send, StatusRuntimeException end) {}

  private final List<WatchResponse> log = new ArrayList<>();
  private volatile IntFunction<Script> script = n -> new Script(99, HANG);
  private final List<String> cursors = Collections.synchronizedList(new ArrayList<>());
  private final List<String> tokens = Collections.synchronizedList(new ArrayList<>());
  private final List<Boolean> deadlines = Collections.synchronizedList(new ArrayList<>());
  private final List<String> traces = Collections.synchronizedList(new ArrayList<>());
  private Server server;
  private ManagedChannel channel;

  private static WatchResponse event(int n, boolean heartbeat) {
    WatchResponse.Builder b = WatchResponse.newBuilder().setCursor("c" + n);
    if (heartbeat) {
      return b.setHeartbeat(WatchHeartbeat.getDefaultInstance()).build();
    }
    return b.setChange(MemoryChange.newBuilder().setKind(MemoryChangeKind.MEMORY_CHANGE_KIND_CREATED)
        .setMemory(Memory.newBuilder().setText("memory c" + n))).build();
  }

  @BeforeEach
  void start() throws IOException {
    String name = InProcessServerBuilder.generateName();
    ServerInterceptor recordToken = CallPolicyTest.beforeEachCall(h -> {
      tokens.add(String.valueOf(h.get(AUTHORIZATION)));
      deadlines.add(Context.current().getDeadline() != null);
      traces.add(String.valueOf(h.get(TRACEPARENT)));
    });
    ServerServiceDefinition watch = ServerServiceDefinition.builder(MemoryServiceGrpc.SERVICE_NAME)
        .addMethod(MemoryServiceGrpc.getWatchMethod(), ServerCalls.asyncServerStreamingCall((request, out) -> {
          int n = cursors.size();
          cursors.add(request.getCursor());
          int from = request.getCursor().isEmpty() ? 0 : Integer.parseInt(request.getCursor().substring(1));
          Script s = script.apply(n);
          for (WatchResponse e : log.subList(Math.min(from, log.size()), Math.min(from + s.send(), log.size()))) {
            out.onNext(e);
          }
          if (s.end() == HANG) {
            ((ServerCallStreamObserver<WatchResponse>) out).setOnCancelHandler(() -> {});
            return;
          }
          if (s.end() == null) {
            out.onCompleted();
          } else {
            out.onError(s.end());
          }
        })).build();
    server = InProcessServerBuilder.forName(name).addService(ServerInterceptors.intercept(watch, recordToken))
        .build().start();
    channel = InProcessChannelBuilder.forName(name).build();
  }

  @AfterEach
  void stop() throws InterruptedException {
    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
  }

  private MemorydClient.Builder fast() {
    return MemorydClient.forChannel(channel).backoff(Duration.ofMillis(1), Duration.ofMillis(4));
  }

  private static WatchRequest alice() {
    return WatchRequest.newBuilder().setSubject("alice").build();
  }

  private static List<String> texts(Watcher w, int n) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      WatchResponse r = w.poll(Duration.ofSeconds(20));
      assertNotNull(r, "no change after " + out);
      out.add(r.getChange().getMemory().getText());
    }
    return out;
  }

  private static StatusRuntimeException unavailable() {
    return Status.UNAVAILABLE.withDescription("server restarting").asRuntimeException();
  }

  @Test
  void resumesFromTheLastCursorWithNoLossAndNoRepeat() {
    for (int i = 1; i <= 6; i++) {
      log.add(event(i, i == 3));  // c3 is a heartbeat: it moves the cursor but is not returned
    }
    script = n -> switch (n) {
      case 0 -> new Script(3, unavailable());  // c1, c2, the heartbeat c3, then UNAVAILABLE
      case 1 -> new Script(1, null);  // c4, then the stream ends without an error
      case 2 -> new Script(0, unavailable());  // nothing: the cursor stays c4
      default -> new Script(99, HANG);
    };
    AtomicInteger asked = new AtomicInteger();
    try (MemorydClient client = fast().tokenProvider(() -> "tok-" + asked.incrementAndGet()).build();
        Watcher w = client.watch(alice())) {
      assertEquals(List.of("memory c1", "memory c2", "memory c4", "memory c5", "memory c6"), texts(w, 5));
      assertEquals(List.of("", "c3", "c4", "c4"), cursors, "opened from the start, then after c3, c4, c4");
      assertEquals(List.of("Bearer tok-1", "Bearer tok-2", "Bearer tok-3", "Bearer tok-4"), tokens,
          "the token provider is asked before every open");
      assertEquals("c6", w.cursor());
      assertFalse(deadlines.contains(true), "a watch stream has no deadline");
    }
  }

  @Test
  void everyOpenCarriesTheTraceContextOfTheSpanThatWatched() {
    log.add(event(1, false));
    log.add(event(2, false));
    script = n -> n == 0 ? new Script(1, unavailable()) : new Script(1, HANG);
    SpanContext span = SpanContext.create("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
        TraceFlags.getSampled(), TraceState.getDefault());
    try (MemorydClient client = fast().build()) {
      Watcher w;
      try (Scope ignored = Span.wrap(span).makeCurrent()) {
        w = client.watch(alice());
      }
      try (w) {
        assertEquals(List.of("memory c1", "memory c2"), texts(w, 2));  // read outside the span
      }
    }
    String want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assertEquals(List.of(want, want), traces, "the open and the reopen");
  }

  @Test
  void opensAStalledStreamAgain() {
    log.add(event(1, false));
    log.add(event(2, false));
    script = n -> new Script(1, HANG);  // one event, then silence, on every stream
    try (MemorydClient client = fast().heartbeatInterval(Duration.ofMillis(50)).build();
        Watcher w = client.watch(alice())) {
      assertEquals(List.of("memory c1", "memory c2"), texts(w, 2));
      assertEquals("c1", cursors.get(cursors.size() - 1), "the silent stream was opened again after c1");
    }
  }

  @Test
  void heartbeatsAreReturnedOnlyWhenAskedFor() {
    log.add(event(1, true));
    log.add(event(2, false));
    try (MemorydClient client = fast().build(); Watcher w = client.watchWithHeartbeats(alice())) {
      WatchResponse first = w.next();
      assertTrue(first.hasHeartbeat());
      assertEquals("c1", first.getCursor());
      assertTrue(w.next().hasChange());
    }
  }

  @Test
  void anErrorOtherThanUnavailableEndsTheWatchTyped() {
    log.add(event(1, false));
    com.google.rpc.Status expired = com.google.rpc.Status.newBuilder().setCode(Code.FAILED_PRECONDITION_VALUE)
        .setMessage("the cursor is older than the change log")
        .addDetails(Any.pack(ErrorInfo.newBuilder().setReason("CURSOR_EXPIRED").setDomain("memoryd").build())).build();
    script = n -> n == 0 ? new Script(1, unavailable()) : new Script(0, StatusProto.toStatusRuntimeException(expired));
    try (MemorydClient client = fast().build(); Watcher w = client.watch(alice())) {
      assertEquals(List.of("memory c1"), texts(w, 1));
      for (int i = 0; i < 2; i++) {  // the error, then the same error: the watch has ended
        MemorydException e = assertThrows(MemorydException.class, w::hasNext);
        assertEquals(Status.Code.FAILED_PRECONDITION, e.getCode());
        assertEquals("CURSOR_EXPIRED", e.getReason());
      }
      assertEquals(2, cursors.size(), "an expired cursor is not retried");
    }
  }

  @Test
  void shortPollsStillReachTheReopen() {
    log.add(event(1, false));
    com.google.rpc.Status retryLater = com.google.rpc.Status.newBuilder().setCode(Code.UNAVAILABLE_VALUE)
        .setMessage("restarting").addDetails(Any.pack(RetryInfo.newBuilder()
            .setRetryDelay(com.google.protobuf.Duration.newBuilder().setNanos(300_000_000)).build())).build();
    script = n -> n == 0 ? new Script(0, StatusProto.toStatusRuntimeException(retryLater)) : new Script(1, HANG);
    try (MemorydClient client = fast().build(); Watcher w = client.watch(alice())) {
      // Each wait is shorter than the server's delay: the backoff must carry over from one to the next.
      for (int tries = 0; ; tries++) {
        WatchResponse r = w.poll(Duration.ofMillis(50));
        if (r != null) {
          assertEquals("c1", r.getCursor());
          return;
        }
        assertTrue(tries < 200, "no change after " + tries + " short polls");
      }
    }
  }

  @Test
  void pollBoundsTheWaitAndCloseEndsTheWatch() throws Exception {
    log.add(event(1, false));
    script = n -> new Script(0, HANG);
    try (MemorydClient client = fast().build()) {
      Watcher w = client.watch(alice());
      assertNull(w.poll(Duration.ofMillis(50)));
      assertEquals(1, cursors.size(), "the end of a wait does not end the stream");
      CompletableFuture<Boolean> waiting = CompletableFuture.supplyAsync(w::hasNext);
      w.close();
      assertFalse(waiting.get(20, TimeUnit.SECONDS), "a read waiting when the watcher closed returns");
      assertFalse(w.hasNext());
      assertNull(w.poll(Duration.ofMillis(1)));
    }
  }

  @Test
  void awaitOpenReturnsOnceTheServerAcceptedTheStream() {
    log.add(event(1, false));
    script = n -> new Script(1, HANG);
    try (MemorydClient client = fast().build(); Watcher w = client.watch(alice())) {
      assertTrue(w.awaitOpen(Duration.ofSeconds(20)));
      assertEquals(List.of("memory c1"), texts(w, 1));
    }
  }

  /**
   * A TCP relay to a backend; {@link #freeze} silences the connections open at that time in both
   * directions without closing them, as a half-open connection is; {@link #drop} closes them, as a
   * server going away does. New connections are forwarded either way.
   */
  static final class Relay implements AutoCloseable {
    final ServerSocket listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    final List<AtomicBoolean> frozen = Collections.synchronizedList(new ArrayList<>());
    final List<Socket> sockets = Collections.synchronizedList(new ArrayList<>());

    Relay(int backend) throws IOException {
      Thread accept = new Thread(() -> {
        while (!listener.isClosed()) {
          try {
            Socket client = listener.accept();
            Socket server = new Socket(InetAddress.getLoopbackAddress(), backend);
            sockets.add(client);
            sockets.add(server);
            AtomicBoolean silent = new AtomicBoolean();
            frozen.add(silent);
            pipe(client, server, silent);
            pipe(server, client, silent);
          } catch (IOException e) {
            return;
          }
        }
      });
      accept.setDaemon(true);
      accept.start();
    }

    private static void pipe(Socket from, Socket to, AtomicBoolean silent) {
      Thread t = new Thread(() -> {
        byte[] buf = new byte[32 * 1024];
        try {
          InputStream in = from.getInputStream();
          OutputStream out = to.getOutputStream();
          for (int n; (n = in.read(buf)) >= 0; ) {
            if (!silent.get()) {
              out.write(buf, 0, n);
            }
          }
        } catch (IOException ignored) {
          // a side closed: the pipe ends
        }
      });
      t.setDaemon(true);
      t.start();
    }

    int freeze() {
      frozen.forEach(f -> f.set(true));
      return frozen.size();
    }

    int drop() throws IOException {
      List<Socket> open;
      synchronized (sockets) {
        open = new ArrayList<>(sockets);
        sockets.clear();
        frozen.clear();
      }
      for (Socket s : open) {
        s.close();
      }
      return open.size() / 2;
    }

    @Override
    public void close() throws IOException {
      listener.close();
      for (Socket s : sockets) {
        s.close();
      }
    }
  }

  @Test
  void aStreamSilentOnAHalfOpenConnectionResumesOnANewOne() throws Exception {
    log.add(event(1, false));
    log.add(event(2, false));
    script = n -> new Script(1, HANG);  // one event, then silence, on every stream
    ServerServiceDefinition watch = ServerServiceDefinition.builder(MemoryServiceGrpc.SERVICE_NAME)
        .addMethod(MemoryServiceGrpc.getWatchMethod(), ServerCalls.asyncServerStreamingCall((request, out) -> {
          int from = request.getCursor().isEmpty() ? 0 : Integer.parseInt(request.getCursor().substring(1));
          cursors.add(request.getCursor());
          if (from < log.size()) {
            out.onNext(log.get(from));
          }
        })).build();
    Server tcp = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create()).addService(watch).build().start();
    try (Relay relay = new Relay(tcp.getPort());
        MemorydClient client = MemorydClient.newBuilder("127.0.0.1:" + relay.listener.getLocalPort())
            .backoff(Duration.ofMillis(1), Duration.ofMillis(4)).heartbeatInterval(Duration.ofMillis(300)).build();
        Watcher w = client.watch(alice())) {
      assertEquals(List.of("memory c1"), texts(w, 1));
      // Every connection open now goes silent (more than one if a slow start already looked silent).
      assertTrue(relay.freeze() >= 1, "the client's connection is frozen");
      // The frozen connection never fails by itself: c2 comes only over a new connection.
      assertEquals(List.of("memory c2"), texts(w, 1));
    } finally {
      tcp.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }
}

package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.protobuf.Any;
import com.google.protobuf.Message;
import com.google.rpc.Code;
import com.google.rpc.RetryInfo;
import dev.memoryd.v1.ListViewsRequest;
import dev.memoryd.v1.ListViewsResponse;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.MemoryViewRequest;
import dev.memoryd.v1.MemoryViewResponse;
import dev.memoryd.v1.PutViewRequest;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.View;
import dev.memoryd.v1.ViewAdminServiceGrpc;
import dev.memoryd.v1.WriteRequest;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.ServerCalls;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Scope;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * What a user of the client notices, against a real gRPC server (in-process transport) that
 * serves every method of both services: how often a call is tried, which token and trace context
 * each attempt carries, and how listings are walked.
 */
class CallPolicyTest {
  private static final Metadata.Key<String> AUTHORIZATION = key("authorization");
  private static final Metadata.Key<String> TRACEPARENT = key("traceparent");
  private static final Metadata.Key<String> TRACESTATE = key("tracestate");

  /** Attempts seen per full method name, and the headers of each attempt in order. */
  private final Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();
  private final List<Metadata> headers = Collections.synchronizedList(new ArrayList<>());
  /** How many attempts fail before the server answers; and with what. */
  private volatile int failures;
  private volatile Supplier<StatusRuntimeException> failure = () -> Status.UNAVAILABLE.asRuntimeException();
  /** Answers by full method name (default: the response's default instance). */
  private final Map<String, BiFunction<Message, Integer, Message>> answers = new ConcurrentHashMap<>();
  private Server server;
  private ManagedChannel channel;

  private static Metadata.Key<String> key(String name) {
    return Metadata.Key.of(name, Metadata.ASCII_STRING_MARSHALLER);
  }

  /** A server interceptor that hands each call's headers to {@code record} (in the call's context). */
  static ServerInterceptor beforeEachCall(Consumer<Metadata> record) {
    return new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata h, ServerCallHandler<Q, R> next) {
        record.accept(h);
        return next.startCall(call, h);
      }
    };
  }

  @BeforeEach
  void start() throws IOException {
    String name = InProcessServerBuilder.generateName();
    ServerInterceptor recordHeaders = beforeEachCall(headers::add);
    InProcessServerBuilder builder = InProcessServerBuilder.forName(name).directExecutor();
    for (ServiceDescriptor service : new ServiceDescriptor[] {
        MemoryServiceGrpc.getServiceDescriptor(), ViewAdminServiceGrpc.getServiceDescriptor()}) {
      ServerServiceDefinition.Builder definition = ServerServiceDefinition.builder(service);
      service.getMethods().forEach(m -> definition.addMethod(serve(m)));
      builder.addService(ServerInterceptors.intercept(definition.build(), recordHeaders));
    }
    server = builder.build().start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  @AfterEach
  void stop() throws InterruptedException {
    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
  }

  @SuppressWarnings("unchecked")
  private <Q, R> ServerMethodDefinition<Q, R> serve(MethodDescriptor<Q, R> method) {
    R empty = ((MethodDescriptor.PrototypeMarshaller<R>) method.getResponseMarshaller()).getMessagePrototype();
    return ServerMethodDefinition.create(method, ServerCalls.asyncUnaryCall((request, out) -> {
      int n = attempts.computeIfAbsent(method.getFullMethodName(), k -> new AtomicInteger()).incrementAndGet();
      if (n <= failures) {
        out.onError(failure.get());
        return;
      }
      BiFunction<Message, Integer, Message> answer = answers.get(method.getFullMethodName());
      out.onNext(answer == null ? empty : (R) answer.apply((Message) request, n));
      out.onCompleted();
    }));
  }

  private int attemptsOf(MethodDescriptor<?, ?> method) {
    AtomicInteger n = attempts.get(method.getFullMethodName());
    return n == null ? 0 : n.get();
  }

  private MemorydClient.Builder fast() {
    return MemorydClient.forChannel(channel).backoff(Duration.ofMillis(1), Duration.ofMillis(4));
  }

  /** Every RPC of the contract with the attempts policy.json says an always-UNAVAILABLE server sees. */
  static List<Object[]> everyMethod() throws IOException {
    JsonObject methods = PolicyTest.policy().getAsJsonObject("methods");
    int max = PolicyTest.policy().getAsJsonObject("retry").get("max_attempts").getAsInt();
    List<Object[]> cases = new ArrayList<>();
    for (Map.Entry<String, MethodDescriptor<?, ?>> e : PolicyTest.exposed().entrySet()) {
      String rule = methods.getAsJsonObject(e.getKey()).get("retry").getAsString();
      if (rule.equals("unless_expected_version")) {
        cases.add(new Object[] {e.getKey() + " (expected_version 0)", e.getValue(), max});
        cases.add(new Object[] {e.getKey() + " (expected_version 3)", e.getValue(), 1});
      } else {
        cases.add(new Object[] {e.getKey(), e.getValue(), rule.equals("always") ? max : 1});
      }
    }
    return cases;
  }

  /** Calls the client's method for {@code rpc} with a default request (expected_version from the label). */
  private static Object invoke(MemorydClient client, String label, MethodDescriptor<?, ?> rpc) throws Exception {
    String bare = rpc.getBareMethodName();
    String name = Character.toLowerCase(bare.charAt(0)) + bare.substring(1);
    Message request = (Message) ((MethodDescriptor.PrototypeMarshaller<?>) rpc.getRequestMarshaller()).getMessagePrototype();
    if (label.contains("expected_version 3")) {
      request = PutViewRequest.newBuilder().setExpectedVersion(3).build();
    }
    Method call = MemorydClient.class.getMethod(name, request.getClass());
    try {
      return call.invoke(client, request);
    } catch (InvocationTargetException e) {
      throw (Exception) e.getCause();
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("everyMethod")
  void unavailableIsRetriedOnlyWhereThePolicyAllows(String label, MethodDescriptor<?, ?> rpc, int expected) {
    failures = Integer.MAX_VALUE;
    try (MemorydClient client = fast().build()) {
      MemorydException e = assertThrows(MemorydException.class, () -> invoke(client, label, rpc));
      assertEquals(Status.Code.UNAVAILABLE, e.getCode());
    }
    assertEquals(expected, attemptsOf(rpc), label);
  }

  @Test
  void aRetriedCallSucceedsOnceTheServerIsBack() {
    failures = 2;
    try (MemorydClient client = fast().build()) {
      client.recall(RecallRequest.newBuilder().setSubject("user-1").build());
    }
    assertEquals(3, attemptsOf(MemoryServiceGrpc.getRecallMethod()));
  }

  @Test
  void aWriteGetsItsIdempotencyKeyBeforeTheFirstAttemptAndKeepsIt() {
    failures = 2;
    List<String> keys = Collections.synchronizedList(new ArrayList<>());
    answers.put(MemoryServiceGrpc.getWriteMethod().getFullMethodName(), (r, n) -> {
      keys.add(((WriteRequest) r).getIdempotencyKey());
      return dev.memoryd.v1.WriteResponse.getDefaultInstance();
    });
    failure = () -> Status.UNAVAILABLE.asRuntimeException();
    try (MemorydClient client = fast().build()) {
      client.write(WriteRequest.newBuilder().setSubject("user-1").build());
    }
    assertEquals(3, attemptsOf(MemoryServiceGrpc.getWriteMethod()));
    assertEquals(1, keys.size());
    assertFalse(keys.get(0).isEmpty());
  }

  @Test
  void aRetryInfoDelayLongerThanTheBackoffIsWaited() {
    failures = 1;
    com.google.rpc.Status status = com.google.rpc.Status.newBuilder().setCode(Code.UNAVAILABLE.getNumber())
        .setMessage("busy").addDetails(Any.pack(RetryInfo.newBuilder()
            .setRetryDelay(com.google.protobuf.Duration.newBuilder().setNanos(300_000_000)).build())).build();
    failure = () -> StatusProto.toStatusRuntimeException(status);
    long start = System.nanoTime();
    try (MemorydClient client = fast().build()) {
      client.recall(RecallRequest.getDefaultInstance());
    }
    long waited = System.nanoTime() - start;
    assertEquals(2, attemptsOf(MemoryServiceGrpc.getRecallMethod()));
    assertTrue(waited >= 300_000_000L, "waited only " + waited / 1_000_000 + " ms");
  }

  @Test
  void aCallersOverallDeadlineStopsTheRetries() throws Exception {
    failures = Integer.MAX_VALUE;
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    Context.CancellableContext budget = Context.current().withDeadlineAfter(200, TimeUnit.MILLISECONDS, timer);
    try (MemorydClient client = MemorydClient.forChannel(channel).backoff(Duration.ofSeconds(1), Duration.ofSeconds(2)).build()) {
      long start = System.nanoTime();
      budget.run(() -> assertThrows(MemorydException.class, () -> client.recall(RecallRequest.getDefaultInstance())));
      assertTrue(System.nanoTime() - start < 900_000_000L, "retried past the caller's deadline");
    } finally {
      budget.cancel(null);
      timer.shutdownNow();
    }
    assertEquals(1, attemptsOf(MemoryServiceGrpc.getRecallMethod()));
  }

  @Test
  void theTokenProviderIsAskedBeforeEveryAttempt() {
    failures = 2;
    AtomicInteger asked = new AtomicInteger();
    try (MemorydClient client = fast().tokenProvider(() -> "tok-" + asked.incrementAndGet()).build()) {
      client.recall(RecallRequest.getDefaultInstance());
      client.getView(dev.memoryd.v1.GetViewRequest.getDefaultInstance());
    }
    // Each call fails twice before it is answered: three attempts each, each with a fresh token.
    assertEquals(6, asked.get());
    assertEquals(List.of("Bearer tok-1", "Bearer tok-2", "Bearer tok-3", "Bearer tok-4", "Bearer tok-5", "Bearer tok-6"),
        headers.stream().map(h -> h.get(AUTHORIZATION)).toList());
  }

  @Test
  void anEmptyTokenSendsNoAuthorization() {
    try (MemorydClient client = fast().tokenProvider(() -> "").build()) {
      client.recall(RecallRequest.getDefaultInstance());
    }
    assertNull(headers.get(0).get(AUTHORIZATION));
  }

  @Test
  void aFailingTokenProviderFailsTheCallWithoutReachingTheServer() {
    try (MemorydClient client = fast().tokenProvider(() -> { throw new IllegalStateException("no key"); }).build()) {
      MemorydException e = assertThrows(MemorydException.class, () -> client.recall(RecallRequest.getDefaultInstance()));
      assertEquals(Status.Code.UNAUTHENTICATED, e.getCode());
    }
    AtomicInteger calls = new AtomicInteger();
    try (MemorydClient client = fast().tokenProvider(() -> {
      if (calls.incrementAndGet() == 1) {
        throw new UncheckedIOException(new IOException("token endpoint down"));
      }
      return "tok";
    }).build()) {
      client.recall(RecallRequest.getDefaultInstance());  // the UNAVAILABLE attempt is retried
    }
    assertEquals(2, calls.get());
    assertEquals(1, attemptsOf(MemoryServiceGrpc.getRecallMethod()));
    assertEquals("Bearer tok", headers.get(0).get(AUTHORIZATION));
  }

  @Test
  void theActiveSpansTraceContextReachesTheServer() {
    SpanContext span = SpanContext.create("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
        TraceFlags.getSampled(), TraceState.builder().put("vendor", "v1").build());
    try (MemorydClient client = fast().build()) {
      try (Scope ignored = Span.wrap(span).makeCurrent()) {
        client.recall(RecallRequest.getDefaultInstance());
      }
      client.recall(RecallRequest.getDefaultInstance());  // no span: no trace context
    }
    assertEquals("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", headers.get(0).get(TRACEPARENT));
    assertEquals("vendor=v1", headers.get(0).get(TRACESTATE));
    assertNull(headers.get(1).get(TRACEPARENT));
    assertNull(headers.get(1).get(TRACESTATE));
  }

  @Test
  void everyRetryCarriesTheSameTraceContext() {
    failures = 1;
    SpanContext span = SpanContext.create("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
        TraceFlags.getSampled(), TraceState.getDefault());
    try (MemorydClient client = fast().build(); Scope ignored = Span.wrap(span).makeCurrent()) {
      client.recall(RecallRequest.getDefaultInstance());
    }
    assertEquals(2, headers.size());
    headers.forEach(h -> assertEquals("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", h.get(TRACEPARENT)));
    assertNull(headers.get(0).get(TRACESTATE), "an empty tracestate is not sent");
  }

  @Test
  void memoryViewAllWalksEveryPage() {
    List<String> tokens = Collections.synchronizedList(new ArrayList<>());
    answers.put(MemoryServiceGrpc.getMemoryViewMethod().getFullMethodName(), (r, n) -> {
      MemoryViewRequest request = (MemoryViewRequest) r;
      tokens.add(request.getPageToken() + "/" + request.getSubject());
      int page = request.getPageToken().isEmpty() ? 0 : Integer.parseInt(request.getPageToken().substring(1));
      MemoryViewResponse.Builder out = MemoryViewResponse.newBuilder();
      for (int i = 0; i < (page < 2 ? 2 : 1); i++) {
        out.addMemories(Memory.newBuilder().setId("m" + (page * 2 + i)));
      }
      return out.setNextPageToken(page < 2 ? "p" + (page + 1) : "").build();
    });
    try (MemorydClient client = fast().build()) {
      Pages<Memory> all = client.memoryViewAll(MemoryViewRequest.newBuilder().setSubject("user-1").build());
      assertEquals(List.of(), tokens, "nothing is fetched before the iteration starts");
      assertEquals(List.of("m0", "m1", "m2", "m3", "m4"),
          StreamSupport.stream(all.spliterator(), false).map(Memory::getId).toList());
      assertEquals(List.of("/user-1", "p1/user-1", "p2/user-1"), tokens);
      assertEquals(5, all.stream().count(), "a second iteration starts again");
    }
  }

  @Test
  void listViewsAllWalksEveryPageAndRetriesAPage() {
    failures = 1;  // the first page's first attempt fails: the iterator's call is retried
    answers.put(ViewAdminServiceGrpc.getListViewsMethod().getFullMethodName(), (r, n) -> {
      String token = ((ListViewsRequest) r).getPageToken();
      return token.isEmpty()
          ? ListViewsResponse.newBuilder().addViews(View.newBuilder().setAgent("a")).setNextPageToken("next").build()
          : ListViewsResponse.newBuilder().addViews(View.newBuilder().setAgent("b")).build();
    });
    try (MemorydClient client = fast().build()) {
      assertEquals(List.of("a", "b"), client.listViewsAll(ListViewsRequest.getDefaultInstance()).stream()
          .map(View::getAgent).collect(Collectors.toList()));
    }
    assertEquals(3, attemptsOf(ViewAdminServiceGrpc.getListViewsMethod()));
  }
}

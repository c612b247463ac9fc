package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.rpc.BadRequest;
import com.google.rpc.Code;
import com.google.rpc.ErrorInfo;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.RecallResponse;
import dev.memoryd.v1.WriteRequest;
import dev.memoryd.v1.WriteResponse;
import dev.memoryd.v1.WriteResult;
import dev.memoryd.v1.ViewAdminServiceGrpc;
import dev.memoryd.v1.GetViewRequest;
import dev.memoryd.v1.GetViewResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The wrapper against an in-process server that answers with scripted statuses. */
class MemorydClientTest {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  /** Failures to answer with, in order, before answering OK. */
  private final Deque<io.grpc.StatusRuntimeException> script = new ArrayDeque<>();
  private final List<WriteRequest> writes = Collections.synchronizedList(new ArrayList<>());
  private final List<String> authorizations = Collections.synchronizedList(new ArrayList<>());
  private int recalls;
  private Server server;
  private ManagedChannel channel;

  private final class Scripted extends MemoryServiceGrpc.MemoryServiceImplBase {
    @Override
    public void write(WriteRequest request, StreamObserver<WriteResponse> out) {
      writes.add(request);
      if (!script.isEmpty()) {
        out.onError(script.poll());
        return;
      }
      out.onNext(WriteResponse.newBuilder().addResults(WriteResult.newBuilder().setMemoryId("m1").setVersion(1)).build());
      out.onCompleted();
    }

    @Override
    public void recall(RecallRequest request, StreamObserver<RecallResponse> out) {
      recalls++;
      if (!script.isEmpty()) {
        out.onError(script.poll());
        return;
      }
      out.onNext(RecallResponse.getDefaultInstance());
      out.onCompleted();
    }
  }

  private final class Admin extends ViewAdminServiceGrpc.ViewAdminServiceImplBase {
    @Override
    public void getView(GetViewRequest request, StreamObserver<GetViewResponse> out) {
      out.onNext(GetViewResponse.getDefaultInstance());
      out.onCompleted();
    }
  }

  @BeforeEach
  void start() throws Exception {
    String name = InProcessServerBuilder.generateName();
    ServerInterceptor recordAuth = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
          ServerCallHandler<Q, R> next) {
        authorizations.add(String.valueOf(headers.get(AUTHORIZATION)));
        return next.startCall(call, headers);
      }
    };
    server = InProcessServerBuilder.forName(name).directExecutor()
        .addService(ServerInterceptors.intercept(new Scripted(), recordAuth))
        .addService(ServerInterceptors.intercept(new Admin(), recordAuth))
        .build().start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  @AfterEach
  void stop() {
    channel.shutdownNow();
    server.shutdownNow();
  }

  private MemorydClient client() {
    return MemorydClient.forChannel(channel).bearerToken("tok-123")
        .maxAttempts(3).backoff(Duration.ofMillis(1), Duration.ofMillis(5)).build();
  }

  private static io.grpc.StatusRuntimeException failure(Code code, String reason, String... badFields) {
    com.google.rpc.Status.Builder status = com.google.rpc.Status.newBuilder()
        .setCode(code.getNumber()).setMessage("scripted " + code);
    status.addDetails(Any.pack(ErrorInfo.newBuilder().setReason(reason).setDomain("memoryd")
        .putMetadata("request_id", "req-" + reason).build()));
    if (badFields.length > 0) {
      BadRequest.Builder bad = BadRequest.newBuilder();
      for (String field : badFields) {
        bad.addFieldViolations(BadRequest.FieldViolation.newBuilder().setField(field).setDescription("bad"));
      }
      status.addDetails(Any.pack(bad.build()));
    }
    return StatusProto.toStatusRuntimeException(status.build());
  }

  private static WriteRequest write() {
    return WriteRequest.newBuilder().setSubject("user-1").build();
  }

  @Test
  void unavailableIsRetriedAndAWriteKeepsOneGeneratedIdempotencyKey() {
    script.add(failure(Code.UNAVAILABLE, "STORE_UNAVAILABLE"));
    script.add(Status.UNAVAILABLE.withDescription("connection reset").asRuntimeException());
    try (MemorydClient client = client()) {
      WriteResponse response = client.write(write());
      assertEquals("m1", response.getResults(0).getMemoryId());
    }
    assertEquals(3, writes.size());
    String key = writes.get(0).getIdempotencyKey();
    assertFalse(key.isEmpty(), "a write without a key gets one");
    assertTrue(writes.stream().allMatch(w -> w.getIdempotencyKey().equals(key)), "every retry sends the same key");
  }

  @Test
  void aGivenIdempotencyKeyIsKept() {
    try (MemorydClient client = client()) {
      client.write(write().toBuilder().setIdempotencyKey("mine").build());
    }
    assertEquals("mine", writes.get(0).getIdempotencyKey());
  }

  @Test
  void unavailableGivesUpAfterMaxAttempts() {
    for (int i = 0; i < 5; i++) {
      script.add(failure(Code.UNAVAILABLE, "STORE_UNAVAILABLE"));
    }
    try (MemorydClient client = client()) {
      MemorydException e = assertThrows(MemorydException.class,
          () -> client.recall(RecallRequest.newBuilder().setSubject("user-1").build()));
      assertEquals(Status.Code.UNAVAILABLE, e.getCode());
      assertEquals("STORE_UNAVAILABLE", e.getReason());
    }
    assertEquals(3, recalls);
  }

  @Test
  void otherCodesAreNotRetriedAndCarryTheirDetails() {
    script.add(failure(Code.INVALID_ARGUMENT, "INVALID_REQUEST", "subject", "items[0].text"));
    try (MemorydClient client = client()) {
      MemorydException e = assertThrows(MemorydException.class, () -> client.write(write()));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.getCode());
      assertEquals("INVALID_REQUEST", e.getReason());
      assertEquals("memoryd", e.getDomain());
      assertEquals(List.of("subject", "items[0].text"), e.getViolationFields());
      assertEquals("req-INVALID_REQUEST", e.getRequestId());
      assertTrue(e.getMessage().contains("scripted INVALID_ARGUMENT"), e.getMessage());
    }
    assertEquals(1, writes.size());
  }

  @Test
  void permissionDeniedIsNotRetried() {
    script.add(failure(Code.PERMISSION_DENIED, "VIEW_DENIED"));
    try (MemorydClient client = client()) {
      MemorydException e = assertThrows(MemorydException.class,
          () -> client.recall(RecallRequest.newBuilder().setSubject("user-1").build()));
      assertEquals(Status.Code.PERMISSION_DENIED, e.getCode());
      assertEquals("VIEW_DENIED", e.getReason());
      assertTrue(e.getViolations().isEmpty());
    }
    assertEquals(1, recalls);
  }

  @Test
  void aStatusWithoutDetailsStillMaps() {
    script.add(Status.INTERNAL.withDescription("boom").asRuntimeException());
    try (MemorydClient client = client()) {
      MemorydException e = assertThrows(MemorydException.class,
          () -> client.recall(RecallRequest.newBuilder().setSubject("user-1").build()));
      assertEquals(Status.Code.INTERNAL, e.getCode());
      assertEquals("", e.getReason());
      assertEquals("", e.getRequestId());
    }
    assertEquals(1, recalls);
  }

  @Test
  void theBearerTokenGoesWithEveryCallOfBothServices() {
    try (MemorydClient client = client()) {
      client.recall(RecallRequest.newBuilder().setSubject("user-1").build());
      client.getView(GetViewRequest.newBuilder().setAgent("a").build());
    }
    assertEquals(List.of("Bearer tok-123", "Bearer tok-123"), authorizations);
  }

  @Test
  void noTokenSendsNoAuthorization() {
    try (MemorydClient client = MemorydClient.forChannel(channel).build()) {
      client.recall(RecallRequest.newBuilder().setSubject("user-1").build());
    }
    assertEquals(List.of("null"), authorizations);
  }
}

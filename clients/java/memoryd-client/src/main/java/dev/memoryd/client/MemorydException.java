package dev.memoryd.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * A failed memoryd call: the gRPC status code plus what the server's {@code google.rpc.Status}
 * details say — the {@link ErrorInfo} reason (a {@code memoryd.v1.ErrorReason} name such as
 * {@code VIEW_DENIED}), the {@link BadRequest} field violations, and the request id to quote
 * when reporting a problem.
 */
public final class MemorydException extends RuntimeException {
  private static final Metadata.Key<String> REQUEST_ID =
      Metadata.Key.of("x-request-id", Metadata.ASCII_STRING_MARSHALLER);

  private final Status.Code code;
  private final String reason;
  private final String domain;
  private final Map<String, String> metadata;
  private final List<BadRequest.FieldViolation> violations;
  private final String requestId;

  private MemorydException(Status.Code code, String message, String reason, String domain,
      Map<String, String> metadata, List<BadRequest.FieldViolation> violations, String requestId,
      Throwable cause) {
    super(code + ": " + message + (reason.isEmpty() ? "" : " [" + reason + "]")
        + (requestId.isEmpty() ? "" : " (request id " + requestId + ")"), cause);
    this.code = code;
    this.reason = reason;
    this.domain = domain;
    this.metadata = metadata;
    this.violations = violations;
    this.requestId = requestId;
  }

  /** Reads the status, its details and the request id of a failed call. */
  public static MemorydException from(StatusRuntimeException e) {
    Status status = e.getStatus();
    String message = status.getDescription() == null ? "" : status.getDescription();
    String reason = "";
    String domain = "";
    Map<String, String> metadata = Map.of();
    List<BadRequest.FieldViolation> violations = new ArrayList<>();
    com.google.rpc.Status rich = StatusProto.fromThrowable(e);
    if (rich != null) {
      if (!rich.getMessage().isEmpty()) {
        message = rich.getMessage();
      }
      for (Any detail : rich.getDetailsList()) {
        try {
          if (detail.is(ErrorInfo.class)) {
            ErrorInfo info = detail.unpack(ErrorInfo.class);
            reason = info.getReason();
            domain = info.getDomain();
            metadata = info.getMetadataMap();
          } else if (detail.is(BadRequest.class)) {
            violations.addAll(detail.unpack(BadRequest.class).getFieldViolationsList());
          }
        } catch (InvalidProtocolBufferException ignored) {
          // A malformed detail says nothing we could use; the status code still stands.
        }
      }
    }
    String requestId = metadata.getOrDefault("request_id", "");
    Metadata trailers = e.getTrailers();
    if (requestId.isEmpty() && trailers != null && trailers.get(REQUEST_ID) != null) {
      requestId = trailers.get(REQUEST_ID);
    }
    return new MemorydException(status.getCode(), message, reason, domain, metadata,
        Collections.unmodifiableList(violations), requestId, e);
  }

  /** The gRPC status code. */
  public Status.Code getCode() {
    return code;
  }

  /** The {@code ErrorInfo} reason, e.g. {@code TOKEN_MISSING}; empty when the server sent none. */
  public String getReason() {
    return reason;
  }

  /** The {@code ErrorInfo} domain ({@code memoryd} for memoryd's own errors). */
  public String getDomain() {
    return domain;
  }

  /** The {@code ErrorInfo} metadata. */
  public Map<String, String> getErrorMetadata() {
    return metadata;
  }

  /** The {@code BadRequest} violations, in the server's order. */
  public List<BadRequest.FieldViolation> getViolations() {
    return violations;
  }

  /** The names of the bad fields ({@code items[0].text}, …). */
  public List<String> getViolationFields() {
    return violations.stream().map(BadRequest.FieldViolation::getField).toList();
  }

  /** The server's id for this request (from {@code ErrorInfo} or the {@code x-request-id} trailer). */
  public String getRequestId() {
    return requestId;
  }
}

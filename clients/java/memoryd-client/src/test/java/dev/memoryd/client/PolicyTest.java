package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.Message;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.ViewAdminServiceGrpc;
import dev.memoryd.v1.WatchRequest;
import io.grpc.MethodDescriptor;
import io.grpc.ServiceDescriptor;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The client's constants and method table are clients/conformance/policy.json's, for every
 * method the client exposes: change the file and this fails until the client follows.
 */
class PolicyTest {
  static JsonObject policy() throws IOException {
    Path path = Path.of(System.getProperty("memoryd.policy", "../../conformance/policy.json"));
    return JsonParser.parseString(Files.readString(path)).getAsJsonObject();
  }

  private static long nanos(double seconds) {
    return Math.round(seconds * 1e9);
  }

  @Test
  void theKeepaliveIsThePolicys() throws IOException {
    JsonObject keepalive = policy().getAsJsonObject("keepalive");
    assertEquals(nanos(keepalive.get("time_seconds").getAsDouble()), RetryPolicy.KEEPALIVE_TIME.toNanos());
    assertEquals(nanos(keepalive.get("timeout_seconds").getAsDouble()), RetryPolicy.KEEPALIVE_TIMEOUT.toNanos());
    assertEquals(keepalive.get("permit_without_calls").getAsBoolean(), RetryPolicy.KEEPALIVE_WITHOUT_CALLS);
    MemorydClient.Builder builder = MemorydClient.newBuilder("127.0.0.1:1");
    assertEquals(RetryPolicy.KEEPALIVE_TIME, builder.keepAliveTime);
    assertEquals(RetryPolicy.KEEPALIVE_TIMEOUT, builder.keepAliveTimeout);
  }

  @Test
  void theConstantsAreThePolicys() throws IOException {
    JsonObject policy = policy();
    JsonObject retry = policy.getAsJsonObject("retry");
    assertEquals(nanos(policy.get("deadline_seconds").getAsDouble()), RetryPolicy.DEFAULT_DEADLINE.toNanos());
    assertEquals(retry.get("max_attempts").getAsInt(), RetryPolicy.MAX_ATTEMPTS);
    assertEquals(nanos(retry.get("initial_backoff_seconds").getAsDouble()), RetryPolicy.INITIAL_BACKOFF.toNanos());
    assertEquals(nanos(retry.get("max_backoff_seconds").getAsDouble()), RetryPolicy.MAX_BACKOFF.toNanos());
    assertEquals(retry.get("multiplier").getAsDouble(), RetryPolicy.MULTIPLIER);
    assertEquals(retry.get("jitter").getAsDouble(), RetryPolicy.JITTER);
    Set<String> codes = new TreeSet<>();
    retry.getAsJsonArray("codes").forEach(c -> codes.add(c.getAsString()));
    assertEquals(codes, RetryPolicy.RETRY_CODES.stream().map(Enum::name).collect(Collectors.toCollection(TreeSet::new)));
    JsonObject watch = policy.getAsJsonObject("watch");
    assertEquals(nanos(watch.get("heartbeat_seconds").getAsDouble()), RetryPolicy.DEFAULT_HEARTBEAT_INTERVAL.toNanos());
    assertEquals(watch.get("stall_factor").getAsInt(), RetryPolicy.WATCH_STALL_FACTOR);
  }

  @Test
  void aNewClientUsesThePolicysDefaults() throws IOException {
    JsonObject policy = policy();
    MemorydClient.Builder builder = MemorydClient.newBuilder("127.0.0.1:1");
    assertEquals(Duration.ofNanos(nanos(policy.get("deadline_seconds").getAsDouble())), field(builder, "deadline"));
    assertEquals(policy.getAsJsonObject("retry").get("max_attempts").getAsInt(), field(builder, "maxAttempts"));
    assertEquals(Duration.ofNanos(nanos(policy.getAsJsonObject("watch").get("heartbeat_seconds").getAsDouble())),
        field(builder, "heartbeatInterval"));
  }

  private static Object field(Object o, String name) {
    try {
      var f = o.getClass().getDeclaredField(name);
      f.setAccessible(true);
      return f.get(o);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void theBackoffIsThePolicysFormulaWithJitterInItsRange() throws IOException {
    JsonObject retry = policy().getAsJsonObject("retry");
    double initial = retry.get("initial_backoff_seconds").getAsDouble();
    double max = retry.get("max_backoff_seconds").getAsDouble();
    double multiplier = retry.get("multiplier").getAsDouble();
    double jitter = retry.get("jitter").getAsDouble();
    for (int n = 1; n <= 8; n++) {
      double base = Math.min(max, initial * Math.pow(multiplier, n - 1));
      Duration high = RetryPolicy.backoff(n, RetryPolicy.INITIAL_BACKOFF, RetryPolicy.MAX_BACKOFF, 0.0);
      Duration low = RetryPolicy.backoff(n, RetryPolicy.INITIAL_BACKOFF, RetryPolicy.MAX_BACKOFF, 0.999999999);
      assertEquals(base, high.toNanos() / 1e9, 1e-6, "retry " + n + " without jitter");
      assertEquals(base * (1 - jitter), low.toNanos() / 1e9, 1e-6, "retry " + n + " at full jitter");
    }
  }

  /** The contract's server-streaming methods, which the client opens as a {@link Watcher}. */
  static Set<String> streaming() {
    return MemoryServiceGrpc.getServiceDescriptor().getMethods().stream()
        .filter(m -> m.getType() == MethodDescriptor.MethodType.SERVER_STREAMING)
        .map(MethodDescriptor::getFullMethodName).collect(Collectors.toCollection(TreeSet::new));
  }

  /** The gRPC unary methods behind the client's public calls, by full name (Write → .../Write). */
  static Map<String, MethodDescriptor<?, ?>> exposed() {
    Map<String, MethodDescriptor<?, ?>> byName = new TreeMap<>();
    for (ServiceDescriptor service : new ServiceDescriptor[] {
        MemoryServiceGrpc.getServiceDescriptor(), ViewAdminServiceGrpc.getServiceDescriptor()}) {
      for (MethodDescriptor<?, ?> m : service.getMethods()) {
        byName.put(m.getBareMethodName(), m);
      }
    }
    Map<String, MethodDescriptor<?, ?>> out = new TreeMap<>();
    for (Method m : MemorydClient.class.getDeclaredMethods()) {
      if (Modifier.isPublic(m.getModifiers()) && m.getParameterCount() == 1
          && Message.class.isAssignableFrom(m.getParameterTypes()[0])
          && Message.class.isAssignableFrom(m.getReturnType())) {
        String rpc = Character.toUpperCase(m.getName().charAt(0)) + m.getName().substring(1);
        MethodDescriptor<?, ?> descriptor = byName.get(rpc);
        assertTrue(descriptor != null, "MemorydClient." + m.getName() + " calls no RPC of the contract");
        out.put(descriptor.getFullMethodName(), descriptor);
      }
    }
    return out;
  }

  @Test
  void everyExposedMethodHasThePolicysRetryRule() throws IOException {
    JsonObject methods = policy().getAsJsonObject("methods");
    Map<String, MethodDescriptor<?, ?>> exposed = exposed();
    Set<String> contract = Stream.concat(MemoryServiceGrpc.getServiceDescriptor().getMethods().stream(),
        ViewAdminServiceGrpc.getServiceDescriptor().getMethods().stream())
        .map(MethodDescriptor::getFullMethodName).collect(Collectors.toCollection(TreeSet::new));
    contract.removeAll(streaming());
    assertEquals(contract, exposed.keySet(), "the client exposes every unary RPC of the contract");
    assertEquals(Set.of(MemoryServiceGrpc.getWatchMethod().getFullMethodName()), streaming());
    assertEquals(new TreeSet<>(methods.keySet()), new TreeSet<>(RetryPolicy.METHODS.keySet()));
    for (String name : exposed.keySet()) {
      assertTrue(methods.has(name), name + " is missing from policy.json");
      String rule = methods.getAsJsonObject(name).get("retry").getAsString();
      assertEquals(RetryPolicy.Rule.valueOf(rule.toUpperCase()), RetryPolicy.METHODS.get(name), name);
    }
    for (String name : streaming()) {
      assertEquals("resume", methods.getAsJsonObject(name).get("retry").getAsString(), name);
      assertEquals(RetryPolicy.Rule.RESUME, RetryPolicy.METHODS.get(name), name);
    }
  }

  @Test
  void watchOpensAWatcher() throws NoSuchMethodException {
    for (String name : new String[] {"watch", "watchWithHeartbeats"}) {
      assertEquals(Watcher.class, MemorydClient.class.getMethod(name, WatchRequest.class).getReturnType(), name);
    }
  }

  @Test
  void thePolicysPageIteratorsExist() throws IOException {
    Set<String> want = new TreeSet<>();
    policy().getAsJsonArray("page_iterators").forEach(m -> want.add(m.getAsString()));
    Set<String> got = new TreeSet<>();
    for (Method m : MemorydClient.class.getDeclaredMethods()) {
      if (Modifier.isPublic(m.getModifiers()) && m.getReturnType() == Pages.class) {
        String call = m.getName().substring(0, m.getName().length() - "All".length());
        String rpc = Character.toUpperCase(call.charAt(0)) + call.substring(1);
        exposed().keySet().stream().filter(n -> n.endsWith("/" + rpc)).forEach(got::add);
      }
    }
    assertEquals(want, got);
  }
}

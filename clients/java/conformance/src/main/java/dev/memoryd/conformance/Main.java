package dev.memoryd.conformance;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import dev.memoryd.client.MemorydClient;
import dev.memoryd.client.MemorydException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import dev.memoryd.client.Watcher;
import dev.memoryd.v1.EndSessionRequest;
import dev.memoryd.v1.EraseRequest;
import dev.memoryd.v1.ExportMemoriesRequest;
import dev.memoryd.v1.GetExtractionJobRequest;
import dev.memoryd.v1.GetHistoryRequest;
import dev.memoryd.v1.ImportMemoriesRequest;
import dev.memoryd.v1.MemoryViewRequest;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.ResolveConflictRequest;
import dev.memoryd.v1.ResumeSessionRequest;
import dev.memoryd.v1.WatchRequest;
import dev.memoryd.v1.WatchResponse;
import dev.memoryd.v1.WriteRequest;

/**
 * Runs clients/conformance/scenario.json with the Java client:
 * {@code Main SCENARIO CONFIG}. Prints one line per step, {@code ok <n> <name>} or
 * {@code FAIL <n> <name>: <why>}, and exits 0 only if every step passed
 * (clients/conformance/README.md says what each expectation means).
 */
public final class Main {
  private static final Pattern VAR = Pattern.compile("\\$\\{([^}]+)}");
  private static final Pattern SEGMENT = Pattern.compile("([^\\[\\]]*)((?:\\[\\d+])*)");
  private static final Pattern INDEX = Pattern.compile("\\[(\\d+)]");

  /** A MemoryService method: its request's builder and the client call. */
  private record Rpc(Supplier<Message.Builder> builder, BiFunction<MemorydClient, Message, Message> call) {}

  /** How long a {@code next} step waits for a change. */
  private static final Duration CHANGE_WITHIN = Duration.ofSeconds(15);
  /** How long an {@code open} step waits for the server to accept the stream before it goes on. */
  private static final Duration OPEN_WITHIN = Duration.ofSeconds(2);

  private static final Map<String, Rpc> RPCS = Map.ofEntries(
      Map.entry("Write", new Rpc(WriteRequest::newBuilder, (c, r) -> c.write((WriteRequest) r))),
      Map.entry("Recall", new Rpc(RecallRequest::newBuilder, (c, r) -> c.recall((RecallRequest) r))),
      Map.entry("Erase", new Rpc(EraseRequest::newBuilder, (c, r) -> c.erase((EraseRequest) r))),
      Map.entry("MemoryView", new Rpc(MemoryViewRequest::newBuilder, (c, r) -> c.memoryView((MemoryViewRequest) r))),
      Map.entry("GetHistory", new Rpc(GetHistoryRequest::newBuilder, (c, r) -> c.getHistory((GetHistoryRequest) r))),
      Map.entry("GetExtractionJob", new Rpc(GetExtractionJobRequest::newBuilder,
          (c, r) -> c.getExtractionJob((GetExtractionJobRequest) r))),
      Map.entry("ResolveConflict", new Rpc(ResolveConflictRequest::newBuilder,
          (c, r) -> c.resolveConflict((ResolveConflictRequest) r))),
      Map.entry("ExportMemories", new Rpc(ExportMemoriesRequest::newBuilder,
          (c, r) -> c.exportMemories((ExportMemoriesRequest) r))),
      Map.entry("ImportMemories", new Rpc(ImportMemoriesRequest::newBuilder,
          (c, r) -> c.importMemories((ImportMemoriesRequest) r))),
      Map.entry("EndSession", new Rpc(EndSessionRequest::newBuilder, (c, r) -> c.endSession((EndSessionRequest) r))),
      Map.entry("ResumeSession", new Rpc(ResumeSessionRequest::newBuilder,
          (c, r) -> c.resumeSession((ResumeSessionRequest) r))));

  private final Map<String, String> vars = new HashMap<>();
  private final Map<String, MemorydClient> clients = new HashMap<>();
  private final Map<String, Watcher> watches = new HashMap<>();
  private final String target;
  private final JsonObject tokens;

  private Main(JsonObject config) {
    this.target = config.get("target").getAsString();
    this.tokens = config.getAsJsonObject("tokens");
    if (config.has("vars")) {
      config.getAsJsonObject("vars").entrySet().forEach(e -> vars.put(e.getKey(), e.getValue().getAsString()));
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: Main SCENARIO CONFIG");
      System.exit(2);
    }
    JsonObject scenario = read(Path.of(args[0]));
    Main runner = new Main(read(Path.of(args[1])));
    int failed = 0;
    int n = 0;
    try {
      for (JsonElement step : scenario.getAsJsonArray("steps")) {
        n++;
        String name = step.getAsJsonObject().get("name").getAsString();
        String why;
        try {
          why = runner.run(step.getAsJsonObject());
        } catch (RuntimeException e) {
          why = "unexpected " + e;
        }
        if (why == null) {
          System.out.println("ok " + n + " " + name);
        } else {
          failed++;
          System.out.println("FAIL " + n + " " + name + ": " + why.replace('\n', ' '));
        }
        System.out.flush();
      }
    } finally {
      runner.watches.values().forEach(Watcher::close);
      runner.clients.values().forEach(MemorydClient::close);
    }
    System.exit(failed == 0 ? 0 : 1);
  }

  private static JsonObject read(Path path) throws java.io.IOException {
    return JsonParser.parseString(Files.readString(path, StandardCharsets.UTF_8)).getAsJsonObject();
  }

  /** Runs one step; returns null when it passed, else why it failed. */
  private String run(JsonObject step) throws InvalidProtocolBufferException {
    if (step.has("next")) {
      return next(step);
    }
    if (step.has("none")) {
      return none(step);
    }
    if (step.has("close")) {
      Watcher w = watches.remove(step.get("close").getAsString());
      if (w == null) {
        return "no open watch " + step.get("close");
      }
      w.close();
      return null;
    }
    if (step.has("open")) {
      return open(step);
    }
    String rpcName = step.get("rpc").getAsString();
    Rpc rpc = RPCS.get(rpcName);
    if (rpc == null) {
      return "unknown rpc " + rpcName;
    }
    Message.Builder builder = rpc.builder().get();
    JsonFormat.parser().merge(substitute(step.get("request")).toString(), builder);
    Message response = null;
    MemorydException error = null;
    try {
      response = rpc.call().apply(client(step.get("caller").getAsString()), builder.build());
    } catch (MemorydException e) {
      error = e;
    }
    return check(step, response, error);
  }

  /**
   * Opens the client's resuming watch under the step's name and waits (a little) until the server
   * accepted it; with an expected error, reads the first message, where a stream's error arrives, and
   * checks it.
   */
  private String open(JsonObject step) throws InvalidProtocolBufferException {
    String name = step.get("open").getAsString();
    if (!"Watch".equals(step.get("rpc").getAsString())) {
      return "an open step calls Watch, not " + step.get("rpc");
    }
    if (watches.containsKey(name)) {
      return "watch " + name + " is already open";
    }
    WatchRequest.Builder request = WatchRequest.newBuilder();
    JsonFormat.parser().merge(substitute(step.get("request")).toString(), request);
    Watcher w = client(step.get("caller").getAsString()).watch(request.build());
    JsonObject expect = step.has("expect") ? step.getAsJsonObject("expect") : new JsonObject();
    if (!expect.has("code") || expect.get("code").getAsString().equals("OK")) {
      // Once the server accepted the stream, a write in a later step is delivered. A server that
      // sends its headers only with its first message gives no earlier sign: go on.
      w.awaitOpen(OPEN_WITHIN);
      watches.put(name, w);
      return check(step, null, null);
    }
    try (w) {
      WatchResponse first = w.poll(CHANGE_WITHIN);
      if (first == null) {
        return "want " + expect.get("code").getAsString() + ", got no error within " + CHANGE_WITHIN.toSeconds() + " s";
      }
      return check(step, first, null);
    } catch (MemorydException e) {
      return check(step, null, e);
    }
  }

  /** Reads the watch's next change (heartbeats are skipped) and checks it. */
  private String next(JsonObject step) throws InvalidProtocolBufferException {
    Watcher w = watches.get(step.get("next").getAsString());
    if (w == null) {
      return "no open watch " + step.get("next");
    }
    try {
      WatchResponse change = w.poll(CHANGE_WITHIN);
      if (change == null) {
        return "no change within " + CHANGE_WITHIN.toSeconds() + " s";
      }
      return check(step, change, null);
    } catch (MemorydException e) {
      return check(step, null, e);
    }
  }

  /** Passes when no change arrives on the watch for the step's seconds. */
  private String none(JsonObject step) {
    Watcher w = watches.get(step.get("none").getAsString());
    if (w == null) {
      return "no open watch " + step.get("none");
    }
    double seconds = step.has("seconds") ? step.get("seconds").getAsDouble() : 0;
    if (seconds <= 0) {
      return "a none step needs seconds > 0";
    }
    try {
      WatchResponse change = w.poll(Duration.ofNanos((long) (seconds * 1e9)));
      return change == null ? null : "want no change within " + seconds + " s, got " + change;
    } catch (MemorydException e) {
      return "want no change, got " + e.getMessage();
    }
  }

  /** Compares a call's answer, or its error, with the step's expect and saves its values. */
  private String check(JsonObject step, Message response, MemorydException error)
      throws InvalidProtocolBufferException {
    JsonObject expect = step.has("expect") ? step.getAsJsonObject("expect") : new JsonObject();
    String wantCode = expect.has("code") ? expect.get("code").getAsString() : "OK";
    String gotCode = error == null ? "OK" : error.getCode().name();
    if (!gotCode.equals(wantCode)) {
      return "code " + gotCode + ", want " + wantCode + (error == null ? "" : " (" + error.getMessage() + ")");
    }
    List<String> problems = new ArrayList<>();
    if (expect.has("reason")) {
      String got = error == null ? "" : error.getReason();
      String want = expect.get("reason").getAsString();
      if (!got.equals(want)) {
        problems.add("reason " + quote(got) + ", want " + quote(want));
      }
    }
    if (expect.has("violations")) {
      Set<String> got = new TreeSet<>(error == null ? List.of() : error.getViolationFields());
      Set<String> want = new TreeSet<>();
      expect.getAsJsonArray("violations").forEach(v -> want.add(v.getAsString()));
      if (!got.equals(want)) {
        problems.add("violations " + got + ", want " + want);
      }
    }
    JsonElement json = response == null ? new JsonObject()
        : JsonParser.parseString(JsonFormat.printer().print(response));
    if (expect.has("equals")) {
      for (Map.Entry<String, JsonElement> e : expect.getAsJsonObject("equals").entrySet()) {
        JsonElement got = lookup(json, e.getKey());
        JsonElement want = substitute(e.getValue());
        if (!same(got, want)) {
          problems.add(e.getKey() + " = " + got + ", want " + want);
        }
      }
    }
    if (expect.has("texts")) {
      for (Map.Entry<String, JsonElement> e : expect.getAsJsonObject("texts").entrySet()) {
        List<String> got = new ArrayList<>();
        for (JsonElement item : elements(lookup(json, e.getKey()))) {
          JsonElement text = item.isJsonObject() ? item.getAsJsonObject().get("text") : null;
          got.add(text == null ? "" : text.getAsString());
        }
        List<String> want = new ArrayList<>();
        substitute(e.getValue()).getAsJsonArray().forEach(v -> want.add(v.getAsString()));
        got.sort(null);
        want.sort(null);
        if (!got.equals(want)) {
          problems.add(e.getKey() + " texts " + got + ", want " + want);
        }
      }
    }
    if (expect.has("fields_within")) {
      for (Map.Entry<String, JsonElement> e : expect.getAsJsonObject("fields_within").entrySet()) {
        Set<String> allowed = new TreeSet<>();
        e.getValue().getAsJsonArray().forEach(v -> allowed.add(v.getAsString()));
        List<JsonElement> items = elements(lookup(json, e.getKey()));
        for (int i = 0; i < items.size(); i++) {
          Set<String> extra = new TreeSet<>(items.get(i).getAsJsonObject().keySet());
          extra.removeAll(allowed);
          if (!extra.isEmpty()) {
            problems.add(e.getKey() + "[" + i + "] carries " + extra + " outside " + allowed);
          }
        }
      }
    }
    if (!problems.isEmpty()) {
      return String.join("; ", problems);
    }
    if (step.has("save")) {
      for (Map.Entry<String, JsonElement> e : step.getAsJsonObject("save").entrySet()) {
        JsonElement value = lookup(json, e.getValue().getAsString());
        if (value.isJsonNull()) {
          return "nothing at " + e.getValue().getAsString() + " to save as " + e.getKey();
        }
        vars.put(e.getKey(), value.isJsonPrimitive() ? value.getAsString() : value.toString());
      }
    }
    return null;
  }

  private MemorydClient client(String caller) {
    return clients.computeIfAbsent(caller, name -> {
      if (!tokens.has(name)) {
        throw new IllegalArgumentException("no token for caller " + name + " in the config");
      }
      return MemorydClient.newBuilder(target)
          .bearerToken(tokens.get(name).getAsString())  // empty (anonymous): no authorization metadata
          .deadline(Duration.ofSeconds(60))
          .build();
    });
  }

  /** Replaces every {@code ${name}} in the strings of a JSON value. */
  private JsonElement substitute(JsonElement value) {
    if (value.isJsonObject()) {
      JsonObject out = new JsonObject();
      value.getAsJsonObject().entrySet().forEach(e -> out.add(e.getKey(), substitute(e.getValue())));
      return out;
    }
    if (value.isJsonArray()) {
      JsonArray out = new JsonArray();
      value.getAsJsonArray().forEach(v -> out.add(substitute(v)));
      return out;
    }
    if (value.isJsonPrimitive() && value.getAsJsonPrimitive().isString()) {
      Matcher m = VAR.matcher(value.getAsString());
      StringBuilder out = new StringBuilder();
      while (m.find()) {
        String name = m.group(1);
        if (!vars.containsKey(name)) {
          throw new IllegalArgumentException("no value for ${" + name + "}");
        }
        m.appendReplacement(out, Matcher.quoteReplacement(vars.get(name)));
      }
      m.appendTail(out);
      return new JsonPrimitive(out.toString());
    }
    return value;
  }

  /** The value at a dot path with [i] indices; {@code x.length} counts x; absent is JSON null. */
  static JsonElement lookup(JsonElement root, String path) {
    boolean length = path.endsWith(".length");
    String walk = length ? path.substring(0, path.length() - ".length".length()) : path;
    JsonElement node = root;
    for (String part : walk.split("\\.")) {
      Matcher m = SEGMENT.matcher(part);
      if (!m.matches()) {
        return JsonNull.INSTANCE;
      }
      node = node != null && node.isJsonObject() ? node.getAsJsonObject().get(m.group(1)) : null;
      Matcher index = INDEX.matcher(m.group(2));
      while (index.find()) {
        int i = Integer.parseInt(index.group(1));
        node = node != null && node.isJsonArray() && i < node.getAsJsonArray().size()
            ? node.getAsJsonArray().get(i) : null;
      }
      if (node == null) {
        break;
      }
    }
    if (length) {
      return new JsonPrimitive(node != null && node.isJsonArray() ? node.getAsJsonArray().size() : 0);
    }
    return node == null ? JsonNull.INSTANCE : node;
  }

  /** The items of a repeated field, or the one object of a message field (change.memory). */
  static List<JsonElement> elements(JsonElement value) {
    List<JsonElement> out = new ArrayList<>();
    if (value != null && value.isJsonArray()) {
      value.getAsJsonArray().forEach(out::add);
    } else if (value != null && value.isJsonObject()) {
      out.add(value);
    }
    return out;
  }

  private static boolean same(JsonElement got, JsonElement want) {
    if (got.isJsonPrimitive() && want.isJsonPrimitive()
        && got.getAsJsonPrimitive().isNumber() && want.getAsJsonPrimitive().isNumber()) {
      return got.getAsBigDecimal().compareTo(want.getAsBigDecimal()) == 0;
    }
    return got.equals(want);
  }

  private static String quote(String s) {
    return "\"" + s + "\"";
  }
}

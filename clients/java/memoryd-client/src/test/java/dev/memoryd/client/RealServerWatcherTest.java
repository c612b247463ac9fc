package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.memoryd.v1.Category;
import dev.memoryd.v1.MemoryChangeKind;
import dev.memoryd.v1.MemoryDraft;
import dev.memoryd.v1.WatchRequest;
import dev.memoryd.v1.WatchResponse;
import dev.memoryd.v1.WriteRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * The {@link Watcher} against a real memoryd, through a relay the test cuts: a dropped connection,
 * then a silent one, each change committed meanwhile arriving once, in order. The build leaves it
 * out; tests/toolchains/test_java.py starts a server and runs it by name with
 * {@code -Dmemoryd.test.target}, {@code -Dmemoryd.test.token} (a view that reads and writes events)
 * and {@code -Dmemoryd.test.heartbeat} (the server's heartbeat, an ISO-8601 duration).
 */
class RealServerWatcherTest {
  private static final Duration WAIT = Duration.ofSeconds(30);  // a bound on a hang, not a speed check

  @Test
  void aWatchResumesThroughCutConnectionsWithNothingLostOrRepeated() throws Exception {
    String target = System.getProperty("memoryd.test.target");
    String token = System.getProperty("memoryd.test.token");
    Duration heartbeat = Duration.parse(System.getProperty("memoryd.test.heartbeat"));
    String subject = "java-watch-" + UUID.randomUUID().toString().substring(0, 8);
    int port = Integer.parseInt(target.substring(target.lastIndexOf(':') + 1));
    try (MemorydClient writer = MemorydClient.newBuilder(target).bearerToken(token).build();
        WatcherTest.Relay relay = new WatcherTest.Relay(port);
        MemorydClient watching = MemorydClient.newBuilder("127.0.0.1:" + relay.listener.getLocalPort())
            .bearerToken(token).backoff(Duration.ofMillis(50), Duration.ofMillis(200)).heartbeatInterval(heartbeat)
            .build();
        Watcher w = watching.watch(WatchRequest.newBuilder().setSubject(subject).build())) {
      assertTrue(w.awaitOpen(WAIT), "the server's first heartbeat carries its headers");
      List<String> got = new ArrayList<>();
      writer.write(event(subject, "one"));
      read(w, 1, got);
      assertTrue(relay.drop() >= 1, "the watcher's connection is dropped: it reopens from its cursor");
      writer.write(event(subject, "two"));
      writer.write(event(subject, "three"));
      read(w, 2, got);
      relay.freeze();  // silent: after 3 heartbeats the watcher reopens on a channel of its own
      writer.write(event(subject, "four"));
      read(w, 1, got);
      assertEquals(List.of("one", "two", "three", "four"), got);
      assertNull(w.poll(heartbeat.multipliedBy(2)), "nothing twice");
    }
  }

  private static WriteRequest event(String subject, String text) {
    return WriteRequest.newBuilder().setSubject(subject)
        .addItems(MemoryDraft.newBuilder().setCategory(Category.CATEGORY_EVENT).setText(text)).build();
  }

  private static void read(Watcher w, int n, List<String> got) {
    for (int i = 0; i < n; i++) {
      WatchResponse r = w.poll(WAIT);
      assertNotNull(r, "no change after " + got);
      assertEquals(MemoryChangeKind.MEMORY_CHANGE_KIND_CREATED, r.getChange().getKind());
      got.add(r.getChange().getMemory().getText());
    }
  }
}

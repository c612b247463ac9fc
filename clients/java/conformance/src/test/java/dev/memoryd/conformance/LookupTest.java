package dev.memoryd.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import org.junit.jupiter.api.Test;

/** Paths as clients/conformance/README.md defines them. */
class LookupTest {
  private final JsonElement json = JsonParser.parseString(
      "{\"results\": [{\"memoryId\": \"a\", \"version\": \"2\"}, {\"memoryId\": \"b\"}], \"indexed\": true}");

  @Test
  void dotsAndIndices() {
    assertEquals(new JsonPrimitive("b"), Main.lookup(json, "results[1].memoryId"));
    assertEquals(new JsonPrimitive("2"), Main.lookup(json, "results[0].version"));
    assertEquals(new JsonPrimitive(true), Main.lookup(json, "indexed"));
  }

  @Test
  void lengthCountsAndIsZeroWhenAbsent() {
    assertEquals(new JsonPrimitive(2), Main.lookup(json, "results.length"));
    assertEquals(new JsonPrimitive(0), Main.lookup(json, "memories.length"));
  }

  @Test
  void absentIsNull() {
    assertEquals(JsonNull.INSTANCE, Main.lookup(json, "results[5].memoryId"));
    assertEquals(JsonNull.INSTANCE, Main.lookup(json, "results[1].version"));
    assertEquals(JsonNull.INSTANCE, Main.lookup(json, "receipt.counts.memories"));
  }

  @Test
  void fieldsWithinReadsAMessageFieldAsOneElement() {
    JsonElement change = JsonParser.parseString(
        "{\"change\": {\"kind\": \"MEMORY_CHANGE_KIND_CREATED\", \"memory\": {\"text\": \"t\", \"key\": \"k\"}}}");
    assertEquals(1, Main.elements(Main.lookup(change, "change.memory")).size());
    assertEquals(2, Main.elements(Main.lookup(json, "results")).size());
    assertEquals(0, Main.elements(Main.lookup(json, "receipt")).size());
  }
}

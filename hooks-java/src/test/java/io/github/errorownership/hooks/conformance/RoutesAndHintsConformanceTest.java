// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.Vectors;
import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.hints.Routes;
import io.github.errorownership.hooks.testing.HintsServer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/** routes.json and hints.json, against a real hints server on 127.0.0.1. */
class RoutesAndHintsConformanceTest {
  private HintsServer server;

  @BeforeEach
  void setUp() throws Exception {
    server = HintsServer.start();
  }

  @AfterEach
  void tearDown() {
    server.close();
  }

  static Stream<Arguments> routes() {
    return Vectors.cases("routes.json", "cases");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void routes(String name, Map<String, Object> c) {
    String pattern = Vectors.str(c, "pattern");
    for (Object op : Vectors.list(c, "matches")) {
      assertTrue(Routes.matches(pattern, (String) op), pattern + " should match " + op);
    }
    for (Object op : Vectors.list(c, "misses")) {
      assertFalse(Routes.matches(pattern, (String) op), pattern + " should miss " + op);
    }
  }

  private static Map<String, Object> hints() {
    return Vectors.load("hints.json");
  }

  /** The raw text of a document of hints.json, as the collector would send it. */
  static String document(String name) {
    return io.github.errorownership.hooks.testing.JsonWriter.write(
        Vectors.map(Vectors.map(hints(), "documents"), name));
  }

  private HintsClient client() {
    return HintsClient.builder(server.url(), "checkout").build();
  }

  private static void ask(HintsClient c, Object q) {
    assertEquals(
        Vectors.str(q, "want"),
        c.mode(
                Vectors.str(q, "operation"),
                Vectors.str(q, "peer"),
                Vectors.str(q, "peer_operation"))
            .wireName(),
        String.valueOf(Vectors.str(q, "name")));
  }

  static Stream<Arguments> modes() {
    return Vectors.list(hints(), "modes").stream()
        .map(m -> Arguments.of(Vectors.str(m, "document"), m));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void modes(String name, Map<String, Object> m) {
    server.serve(200, document(name), Map.of());
    HintsClient c = client();
    assertTrue(c.refresh().ok());
    for (Object q : Vectors.list(m, "queries")) {
      ask(c, q);
    }
    assertEquals(Vectors.limits(Vectors.map(m, "budget")), c.budgetLimits());
  }

  static Stream<Arguments> garbage() {
    return Vectors.cases("hints.json", "garbage", "cases");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void garbage(String name, Map<String, Object> c) {
    server.serve(200, document("sample"), Map.of());
    HintsClient client = client();
    assertTrue(client.refresh().ok());
    server.serve((int) Vectors.lng(c, "status", 200), Vectors.str(c, "body"), Map.of());
    HintsClient.Refresh r = client.refresh();
    assertFalse(r.ok(), "accepted");
    assertEquals(Duration.ofSeconds(1), r.next());
    assertEquals("fail_open", client.mode("POST /checkout", "recommendations", "").wireName());
  }

  static Stream<Arguments> accepted() {
    return Vectors.cases("hints.json", "accepted", "cases");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void accepted(String name, Map<String, Object> c) {
    server.serve(200, Vectors.str(c, "body"), Map.of());
    HintsClient client = client();
    HintsClient.Refresh r = client.refresh();
    assertTrue(r.ok(), () -> String.valueOf(r.error()));
    ask(client, Vectors.map(c, "query"));
    assertEquals(Vectors.limits(Vectors.map(c, "budget")), client.budgetLimits());
  }

  static Stream<Arguments> pollAfter() {
    return Vectors.cases("hints.json", "poll_after", "cases");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void pollAfter(String name, Map<String, Object> c) {
    // The sample document with its ttl_seconds replaced, number text kept as the vector has it.
    Matcher ttl = Pattern.compile("\"ttl_seconds\":\\s*[0-9]+").matcher(document("sample"));
    assertTrue(ttl.find());
    Object raw = ((Map<?, ?>) c).get("ttl_seconds");
    String text = ((io.github.errorownership.hooks.internal.Json.Num) raw).text;
    String body = ttl.replaceFirst("\"ttl_seconds\":" + text);
    String cc = Vectors.str(c, "cache_control");
    server.serve(200, body, cc.isEmpty() ? Map.of() : Map.of("Cache-Control", cc));
    HintsClient.Refresh r = client().refresh();
    assertTrue(r.ok(), () -> String.valueOf(r.error()));
    assertEquals(Duration.ofSeconds(Vectors.lng(c, "want_seconds", -1)), r.next());
  }

  @Test
  void backoff() {
    HintsClient c = client();
    Runnable round =
        () -> {
          server.serve(503, "down", Map.of());
          int i = 0;
          for (Object want :
              Vectors.list(Vectors.map(hints(), "backoff"), "after_failures_seconds")) {
            i++;
            HintsClient.Refresh r = c.refresh();
            assertFalse(r.ok());
            assertEquals(Duration.ofSeconds((Long) Vectors.plain(want)), r.next(), "failure " + i);
          }
        };
    round.run();
    server.serve(200, document("sample"), Map.of());
    assertTrue(c.refresh().ok());
    round.run();
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(
      strings = {
        "an ETag is sent back",
        "an ETag of the longest length kept",
        "an ETag one byte longer is not"
      })
  void etag(String name) {
    int max = (int) Vectors.lng(Vectors.map(hints(), "etag"), "max_etag_bytes", -1);
    String etag;
    boolean kept;
    switch (name) {
      case "an ETag is sent back" -> {
        etag = "\"v1\"";
        kept = true;
      }
      case "an ETag of the longest length kept" -> {
        etag = "\"" + "a".repeat(max - 2) + "\"";
        kept = true;
      }
      default -> {
        etag = "\"" + "a".repeat(max - 1) + "\"";
        kept = false;
      }
    }
    server.serve(200, document("sample"), Map.of("ETag", etag));
    HintsClient c = client();
    assertTrue(c.refresh().ok());
    if (!kept) {
      assertTrue(c.refresh().ok());
      assertNull(server.lastIfNoneMatch());
      return;
    }
    server.serve(304, "", Map.of("Cache-Control", "max-age=9"));
    HintsClient.Refresh r = c.refresh();
    assertTrue(r.ok());
    assertEquals(etag, server.lastIfNoneMatch());
    assertEquals(Duration.ofSeconds(9), r.next());
    assertEquals("fail_open", c.mode("POST /checkout", "recommendations", "").wireName());
    server.serve(304, "", Map.of());
    r = c.refresh();
    assertTrue(r.ok());
    assertEquals(Duration.ofSeconds(30), r.next(), "the kept document's ttl");
  }

  @Test
  void stale() {
    Map<String, Object> st = Vectors.map(hints(), "stale");
    BudgetLimits dflt = Vectors.limits(Vectors.map(st, "default_budget"));
    long maxStale = Vectors.lng(st, "max_stale_seconds", -1);
    AtomicLong now = new AtomicLong(0);
    HintsClient c = HintsClient.builder(server.url(), "checkout").setNanoClock(now::get).build();
    assertEquals("unknown", c.mode("POST /checkout", "recommendations", "").wireName());
    assertEquals(dflt, c.budgetLimits());
    server.serve(200, document("sample"), Map.of());
    assertTrue(c.refresh().ok());
    server.serve(503, "down", Map.of());
    now.addAndGet(Duration.ofSeconds(maxStale - 1).toNanos());
    assertFalse(c.refresh().ok());
    assertEquals("fail_open", c.mode("POST /checkout", "recommendations", "").wireName());
    assertNotNull(c.hints().orElse(null));
    now.addAndGet(Duration.ofSeconds(2).toNanos());
    assertEquals("unknown", c.mode("POST /checkout", "recommendations", "").wireName());
    assertEquals(dflt, c.budgetLimits());
  }
}

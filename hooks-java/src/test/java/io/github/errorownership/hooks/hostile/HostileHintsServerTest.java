// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.hostile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.testing.HintsServer;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A hints server turned bad after one good answer, in every way it can (ported from
 * hints/hostile_test.go): the client keeps the last good hints, backs off 1 s then 2 s, reads a
 * bounded body, gives up a fetch after its timeout, and answers the hooks' questions while a fetch
 * hangs.
 */
class HostileHintsServerTest {
  static final String SAMPLE =
      "{\"version\":1,\"service\":\"checkout\",\"ttl_seconds\":30,"
          + "\"retry_budget\":{\"ratio\":0.2,\"min_retries_per_second\":5},\"edges\":[{\"operation\":"
          + "\"POST /checkout\",\"peer_service\":\"recommendations\",\"peer_operation\":"
          + "\"GET /recommendations\",\"mode\":\"fail_open\"}]}";
  static final CountDownLatch STOP = new CountDownLatch(1);

  private HintsServer server;

  @BeforeEach
  void setUp() throws Exception {
    server = HintsServer.start();
  }

  @AfterEach
  void tearDown() {
    server.close();
  }

  private static HintsServer.Answer body(String s) {
    return ex -> send(ex, 200, s.getBytes(StandardCharsets.ISO_8859_1), true);
  }

  private static HintsServer.Answer status(int st) {
    return ex -> send(ex, st, "x".getBytes(StandardCharsets.UTF_8), true);
  }

  private static void send(HttpExchange ex, int st, byte[] b, boolean declared) throws IOException {
    if (st == 304) {
      ex.sendResponseHeaders(304, -1);
      return;
    }
    ex.sendResponseHeaders(st, declared ? (b.length == 0 ? -1 : b.length) : 0);
    try (OutputStream o = ex.getResponseBody()) {
      o.write(b);
    }
  }

  private static HintsServer.Answer hintsWith(String fields) {
    return body("{\"version\":1,\"service\":\"checkout\"," + fields + ",\"edges\":[]}");
  }

  private static HintsServer.Answer streamed(char c, long n, boolean declared) {
    return ex -> {
      ex.sendResponseHeaders(200, declared ? n : 0);
      byte[] chunk = String.valueOf(c).repeat(32 << 10).getBytes(StandardCharsets.UTF_8);
      try (OutputStream o = ex.getResponseBody()) {
        for (long sent = 0; sent < n; sent += chunk.length) {
          o.write(chunk);
        }
      }
    };
  }

  static Stream<Arguments> answers() {
    return Stream.of(
        Arguments.of("500", status(500)),
        Arguments.of(
            "503 with Retry-After: 0",
            (HintsServer.Answer)
                ex -> {
                  ex.getResponseHeaders().add("Retry-After", "0");
                  send(ex, 503, "busy".getBytes(StandardCharsets.UTF_8), true);
                }),
        Arguments.of("404", status(404)),
        Arguments.of("304 to a request without If-None-Match", status(304)),
        Arguments.of("not JSON", body("<html>oops</html>")),
        Arguments.of("empty", body("")),
        Arguments.of("null", body("null")),
        Arguments.of("a JSON string", body("\"hints\"")),
        Arguments.of("truncated", body(SAMPLE.substring(0, SAMPLE.length() / 2))),
        Arguments.of("100,000 brackets deep", body("[".repeat(100000))),
        Arguments.of(
            "invalid UTF-8", body("{\"version\":1,\"service\":\"\u00ff\u00fe\",\"edges\":[]}")),
        Arguments.of(
            "wrong version", body("{\"version\":2,\"service\":\"checkout\",\"edges\":[]}")),
        Arguments.of("no version", body("{\"service\":\"checkout\",\"edges\":[]}")),
        Arguments.of(
            "a huge version", body("{\"version\":1e999,\"service\":\"checkout\",\"edges\":[]}")),
        Arguments.of(
            "another service", body("{\"version\":1,\"service\":\"payments\",\"edges\":[]}")),
        Arguments.of("a negative ttl", hintsWith("\"ttl_seconds\":-30")),
        Arguments.of("a ttl over int64", hintsWith("\"ttl_seconds\":99999999999999999999")),
        Arguments.of("a fractional ttl", hintsWith("\"ttl_seconds\":0.5")),
        Arguments.of(
            "a ratio over 1",
            hintsWith("\"retry_budget\":{\"ratio\":5,\"min_retries_per_second\":10}")),
        Arguments.of(
            "a negative ratio",
            hintsWith("\"retry_budget\":{\"ratio\":-0.1,\"min_retries_per_second\":10}")),
        Arguments.of(
            "a ratio of 1e308",
            hintsWith("\"retry_budget\":{\"ratio\":1e308,\"min_retries_per_second\":10}")),
        Arguments.of(
            "a negative floor",
            hintsWith("\"retry_budget\":{\"ratio\":0.1,\"min_retries_per_second\":-1}")),
        Arguments.of(
            "a floor of 1e308",
            hintsWith("\"retry_budget\":{\"ratio\":0.1,\"min_retries_per_second\":1e308}")),
        Arguments.of(
            "a floor of a million retries a second",
            hintsWith("\"retry_budget\":{\"ratio\":0.1,\"min_retries_per_second\":1e6}")),
        Arguments.of(
            "a budget of strings",
            hintsWith("\"retry_budget\":{\"ratio\":\"all\",\"min_retries_per_second\":\"many\"}")),
        Arguments.of(
            "edges as an object",
            body("{\"version\":1,\"service\":\"checkout\",\"edges\":{\"a\":1}}")),
        Arguments.of("a 2 MiB document", streamed(' ', 2 << 20, true)),
        Arguments.of("64 MiB, undeclared", streamed('[', 64 << 20, false)),
        Arguments.of("64 MiB, declared", streamed('{', 64 << 20, true)),
        Arguments.of(
            "a redirect loop",
            (HintsServer.Answer)
                ex -> {
                  ex.getResponseHeaders().add("Location", ex.getRequestURI().toString());
                  send(ex, 302, new byte[0], true);
                }),
        Arguments.of(
            "headers after 10 s",
            (HintsServer.Answer)
                ex -> {
                  try {
                    STOP.await(10, TimeUnit.SECONDS);
                  } catch (InterruptedException e) {
                    return;
                  }
                  send(ex, 200, SAMPLE.getBytes(StandardCharsets.UTF_8), true);
                }),
        Arguments.of(
            "a body that never ends",
            (HintsServer.Answer)
                ex -> {
                  ex.sendResponseHeaders(200, 0);
                  OutputStream o = ex.getResponseBody();
                  o.write(SAMPLE.substring(0, 10).getBytes(StandardCharsets.UTF_8));
                  o.flush();
                  try {
                    STOP.await(10, TimeUnit.SECONDS);
                  } catch (InterruptedException e) {
                    return;
                  }
                }));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("answers")
  @Timeout(60)
  void keepsTheLastGoodHints(String name, HintsServer.Answer answer) {
    HintsClient c =
        HintsClient.builder(server.url(), "checkout")
            .setFetchTimeout(Duration.ofSeconds(1))
            .build();
    server.serve(200, SAMPLE, Map.of());
    assertTrue(c.refresh().ok());
    server.serve(answer);
    HintsClient.Refresh r = c.refresh();
    assertFalse(r.ok(), "accepted");
    assertEquals(Duration.ofSeconds(1), r.next(), "first backoff");
    assertEquals(Duration.ofSeconds(2), c.refresh().next(), "second backoff");
    assertEquals("fail_open", c.mode("POST /checkout", "recommendations", "").wireName());
    assertEquals(new BudgetLimits(0.2, 5), c.budgetLimits());
  }

  @Test
  @Timeout(60)
  void questionsNeverWaitOnAFetch() throws Exception {
    HintsClient c =
        HintsClient.builder(server.url(), "checkout")
            .setFetchTimeout(Duration.ofSeconds(5))
            .build();
    server.serve(200, SAMPLE, Map.of());
    assertTrue(c.refresh().ok());
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    server.serve(
        ex -> {
          entered.countDown();
          try {
            release.await(10, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            return;
          }
          send(ex, 500, "x".getBytes(StandardCharsets.UTF_8), true);
        });
    CompletableFuture<HintsClient.Refresh> fetch = CompletableFuture.supplyAsync(c::refresh);
    assertTrue(entered.await(10, TimeUnit.SECONDS));
    // The fetch hangs in the server; the questions are answered from the last good hints.
    assertEquals("fail_open", c.mode("POST /checkout", "recommendations", "").wireName());
    assertEquals(new BudgetLimits(0.2, 5), c.budgetLimits());
    assertFalse(fetch.isDone(), "the fetch was still hanging when the questions were answered");
    release.countDown();
    assertFalse(fetch.get(10, TimeUnit.SECONDS).ok());
  }

  @Test
  @Timeout(60)
  void unreachableServerGivesTheSafeDefaults() {
    HintsClient c =
        HintsClient.builder("http://127.0.0.1:1", "checkout")
            .setFetchTimeout(Duration.ofSeconds(1))
            .build();
    HintsClient.Refresh r = c.refresh();
    assertFalse(r.ok());
    assertEquals(Duration.ofSeconds(1), r.next());
    assertEquals("unknown", c.mode("POST /checkout", "recommendations", "").wireName());
    assertEquals(BudgetLimits.defaults(), c.budgetLimits());
  }

  @Test
  @Timeout(60)
  void pollerThreadFetchesAndStops() throws Exception {
    server.serve(200, SAMPLE, Map.of());
    try (HintsClient c = HintsClient.builder(server.url(), "checkout").build().start()) {
      for (int i = 0; i < 200 && c.hints().isEmpty(); i++) {
        Thread.sleep(25);
      }
      assertEquals("fail_open", c.mode("POST /checkout", "recommendations", "").wireName());
    }
  }
}

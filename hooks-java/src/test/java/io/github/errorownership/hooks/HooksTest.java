// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.servlet.ErrorOwnershipFilter;
import io.github.errorownership.hooks.testing.JettyServer;
import io.github.errorownership.hooks.testing.ScriptedCallee;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The hooks' behaviour beyond the vectors: async calls, commit paths, naming. */
class HooksTest {
  private static Map<String, Object> resp(int status, String claim) {
    return claim == null
        ? Map.of("status", num(status))
        : Map.of("status", num(status), "claim", claim);
  }

  private static Object num(int n) {
    return io.github.errorownership.hooks.internal.Json.parse(Integer.toString(n));
  }

  @Test
  void sendAsyncRetriesAndRecordsInTheCallersLedger() throws Exception {
    try (ScriptedCallee callee =
        new ScriptedCallee(List.of(resp(503, "claimed"), resp(200, null)))) {
      HttpClient client =
          ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
              .setBackoff(Duration.ofMillis(1), Duration.ofMillis(1))
              .build();
      Ledger ledger = Ledger.create();
      HttpResponse<String> res;
      try (Scope ignored = Context.current().with(ledger).makeCurrent()) {
        res =
            client
                .sendAsync(
                    HttpRequest.newBuilder(URI.create(callee.url("/a"))).build(),
                    HttpResponse.BodyHandlers.ofString())
                .get(10, TimeUnit.SECONDS);
      }
      assertEquals(200, res.statusCode());
      assertEquals(java.util.Arrays.asList(null, "1"), callee.retryAttempts());
      List<Outcome> outs = ledger.outcomes();
      assertEquals(1, outs.size());
      assertFalse(outs.get(0).failed());
      assertEquals(callee.address(), outs.get(0).peerService());
    }
  }

  @Test
  void asyncUnclaimedIsNotRetried() throws Exception {
    try (ScriptedCallee callee = new ScriptedCallee(List.of(resp(502, "unclaimed")))) {
      HttpClient client = ErrorOwnershipHttpClient.wrap(HttpClient.newHttpClient());
      Ledger ledger = Ledger.create();
      try (Scope ignored = Context.current().with(ledger).makeCurrent()) {
        assertEquals(
            502,
            client
                .sendAsync(
                    HttpRequest.newBuilder(URI.create(callee.url("/a"))).build(),
                    HttpResponse.BodyHandlers.ofString())
                .get(10, TimeUnit.SECONDS)
                .statusCode());
      }
      assertEquals(1, callee.retryAttempts().size());
      assertEquals(RetryDecision.SUPPRESSED_UNCLAIMED, ledger.outcomes().get(0).decision());
    }
  }

  private static HttpResponse<String> get(JettyServer s) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create(s.url("/x"))).build(),
            HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void sendErrorIsClaimed() throws Exception {
    HttpServlet h =
        new HttpServlet() {
          @Override
          protected void service(HttpServletRequest req, HttpServletResponse res)
              throws IOException {
            res.sendError(503, "down");
          }
        };
    try (JettyServer s = new JettyServer(h, ErrorOwnershipFilter.create())) {
      HttpResponse<String> r = get(s);
      assertEquals(503, r.statusCode());
      assertEquals(List.of("claimed"), r.headers().allValues("Error-Claim"));
    }
  }

  @Test
  void aFlushedBodyIsClaimedBeforeTheCommit() throws Exception {
    HttpServlet h =
        new HttpServlet() {
          @Override
          protected void service(HttpServletRequest req, HttpServletResponse res)
              throws IOException {
            res.setStatus(500);
            res.getOutputStream().write(new byte[100_000]); // past the buffer: commits
            res.flushBuffer();
          }
        };
    try (JettyServer s = new JettyServer(h, ErrorOwnershipFilter.create())) {
      HttpResponse<String> r = get(s);
      assertEquals(500, r.statusCode());
      assertEquals(List.of("claimed"), r.headers().allValues("Error-Claim"));
    }
  }

  @Test
  void aClaimSetAfterTheStatusWins() throws Exception {
    HttpServlet h =
        new HttpServlet() {
          @Override
          protected void service(HttpServletRequest req, HttpServletResponse res)
              throws IOException {
            res.setStatus(500);
            res.setHeader("Error-Claim", "unclaimed");
          }
        };
    try (JettyServer s = new JettyServer(h, ErrorOwnershipFilter.create())) {
      assertEquals(List.of("unclaimed"), get(s).headers().allValues("Error-Claim"));
    }
  }

  @Test
  void aCallMadeAfterTheStatusCounts() throws Exception {
    try (ScriptedCallee callee = new ScriptedCallee(List.of(resp(503, "unclaimed")))) {
      HttpClient client = ErrorOwnershipHttpClient.wrap(HttpClient.newHttpClient());
      HttpServlet h =
          new HttpServlet() {
            @Override
            protected void service(HttpServletRequest req, HttpServletResponse res)
                throws IOException {
              res.setStatus(502);
              try {
                client.send(
                    HttpRequest.newBuilder(URI.create(callee.url("/a"))).build(),
                    HttpResponse.BodyHandlers.discarding());
              } catch (InterruptedException e) {
                throw new IOException(e);
              }
            }
          };
      try (JettyServer s = new JettyServer(h, ErrorOwnershipFilter.create())) {
        assertEquals(List.of("unclaimed"), get(s).headers().allValues("Error-Claim"));
      }
    }
  }

  @Test
  void peerAddressOmitsTheSchemesDefaultPort() {
    assertEquals("10.0.0.7:8080", HttpRules.peerAddress(URI.create("http://10.0.0.7:8080/x")));
    assertEquals("catalog", HttpRules.peerAddress(URI.create("http://catalog:80/x")));
    assertEquals("catalog", HttpRules.peerAddress(URI.create("https://catalog:443/x")));
    assertEquals("catalog:80", HttpRules.peerAddress(URI.create("https://catalog:80/x")));
    assertEquals("[::1]:9200", HttpRules.peerAddress(URI.create("http://[::1]:9200/x")));
    assertTrue(HttpRules.idempotentMethod("PUT"));
    assertFalse(HttpRules.idempotentMethod("POST"));
  }
}

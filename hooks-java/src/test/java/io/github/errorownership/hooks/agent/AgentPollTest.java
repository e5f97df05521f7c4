// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.testing.HintsServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The hint client's polls under the real OpenTelemetry Java agent at its default settings
 * (java-http-client and http-url-connection instrumentation on): a child JVM polls twice (a fetch
 * and a revalidation) and then makes one call with {@code java.net.http.HttpClient} and one with
 * {@code HttpURLConnection}; the agent's logging exporter must show those two calls, which proves
 * the instrumentation is live, and no span for {@code /v1/hints}.
 */
class AgentPollTest {
  static final String HINTS =
      "{\"version\":1,\"service\":\"checkout\",\"ttl_seconds\":30,\"edges\":[]}";

  @Test
  void pollsAreNeverSpans(@TempDir Path dir) throws Exception {
    String agent = System.getProperty("otel.agent.jar");
    assertTrue(agent != null && Files.isRegularFile(Path.of(agent)), "agent jar: " + agent);
    AtomicInteger revalidated = new AtomicInteger();
    try (HintsServer server = HintsServer.start()) {
      server.serve(
          ex -> {
            if ("\"v1\"".equals(ex.getRequestHeaders().getFirst("If-None-Match"))) {
              revalidated.incrementAndGet();
              ex.sendResponseHeaders(304, -1);
              return;
            }
            byte[] b = HINTS.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("ETag", "\"v1\"");
            ex.sendResponseHeaders(200, b.length);
            try (OutputStream o = ex.getResponseBody()) {
              o.write(b);
            }
          });
      Path log = dir.resolve("child.log");
      List<String> cmd = new ArrayList<>();
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      cmd.add("-javaagent:" + agent);
      cmd.add("-Dotel.service.name=agent-poll-test");
      cmd.add("-Dotel.traces.exporter=logging");
      cmd.add("-Dotel.metrics.exporter=none");
      cmd.add("-Dotel.logs.exporter=none");
      cmd.add("-cp");
      cmd.add(
          System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
      cmd.add(Child.class.getName());
      cmd.add(server.url());
      ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
      // The agent reads OTEL_* too: the test's own environment must not change its defaults.
      pb.environment().keySet().removeIf(k -> k.startsWith("OTEL_"));
      Process p = pb.redirectOutput(log.toFile()).start();
      assertTrue(p.waitFor(120, TimeUnit.SECONDS), "child JVM did not finish");
      String out = Files.readString(log);
      assertEquals(0, p.exitValue(), out);
      assertTrue(out.contains("child: polled 2"), out);
      assertEquals(1, revalidated.get(), "the second poll revalidates");
      List<String> spans = out.lines().filter(l -> l.contains("LoggingSpanExporter")).toList();
      String all = String.join("\n", spans) + "\n" + out;
      assertTrue(
          out.lines().anyMatch(l -> l.contains("/control/http-client") && l.contains("CLIENT")),
          "no span for the HttpClient call: is the agent's instrumentation live?\n" + all);
      assertTrue(
          out.lines().anyMatch(l -> l.contains("/control/url-connection") && l.contains("CLIENT")),
          "no span for the HttpURLConnection call: is the agent's instrumentation live?\n" + all);
      assertFalse(out.contains("/v1/hints"), "a poll was traced:\n" + out);
    }
  }

  /** The child JVM, under the agent. */
  public static final class Child {
    private Child() {}

    public static void main(String[] args) throws Exception {
      String base = args[0];
      int polls = 0;
      try (HintsClient c = HintsClient.builder(base, "checkout").build()) {
        for (int i = 0; i < 2; i++) {
          HintsClient.Refresh r = c.refresh();
          if (!r.ok()) {
            throw r.error();
          }
          polls++;
        }
      }
      System.out.println("child: polled " + polls);
      HttpResponse<String> res =
          HttpClient.newHttpClient()
              .send(
                  HttpRequest.newBuilder(URI.create(base + "/control/http-client")).build(),
                  HttpResponse.BodyHandlers.ofString());
      System.out.println("child: control http-client " + res.statusCode());
      HttpURLConnection u =
          (HttpURLConnection) URI.create(base + "/control/url-connection").toURL().openConnection();
      System.out.println("child: control url-connection " + u.getResponseCode());
      drain(u);
    }

    private static void drain(HttpURLConnection u) throws IOException {
      InputStream in = u.getErrorStream();
      if (in != null) {
        in.readAllBytes();
        in.close();
      }
      u.disconnect();
    }
  }
}

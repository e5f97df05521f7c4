// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.Vectors;
import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.servlet.ErrorOwnershipFilter;
import io.github.errorownership.hooks.testing.JettyServer;
import io.github.errorownership.hooks.testing.ScriptedCallee;
import io.github.errorownership.hooks.testing.ServerSpanFilter;
import io.github.errorownership.hooks.testing.SetOnce;
import io.github.errorownership.hooks.testing.SpanCheck;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.sdk.testing.junit5.OpenTelemetryExtension;
import io.opentelemetry.sdk.trace.data.SpanData;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** server.json: the servlet filter in an embedded Jetty, calls through the HttpClient hook. */
class ServerConformanceTest {
  @RegisterExtension static final OpenTelemetryExtension otel = OpenTelemetryExtension.create();

  static Stream<Arguments> cases() {
    return Vectors.cases("server.json", "cases");
  }

  /** Modes by the callee's address. */
  static final class AddressHints implements HintSource {
    final Map<String, Mode> modes = new ConcurrentHashMap<>();

    @Override
    public Mode mode(String operation, String peer, String peerOperation) {
      return modes.getOrDefault(peer, Mode.UNKNOWN);
    }

    @Override
    public BudgetLimits budgetLimits() {
      return BudgetLimits.defaults();
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void server(String name, Map<String, Object> c) throws Exception {
    AddressHints hints = new AddressHints();
    List<ScriptedCallee> callees = new ArrayList<>();
    List<String> methods = new ArrayList<>();
    for (Object call : Vectors.list(c, "calls")) {
      ScriptedCallee callee = new ScriptedCallee(Vectors.list(call, "responses"));
      callees.add(callee);
      methods.add(Vectors.str(call, "method"));
      String mode = Vectors.str(call, "mode");
      if (mode != null) {
        hints.modes.put(callee.address(), Mode.parse(mode));
      }
    }
    HttpClient outbound =
        ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
            .setBackoff(Duration.ofNanos(1), Duration.ofNanos(1))
            .setHints(hints)
            .build();
    HttpServlet handler =
        new HttpServlet() {
          @Override
          protected void service(HttpServletRequest req, HttpServletResponse res)
              throws IOException {
            for (int i = 0; i < callees.size(); i++) {
              HttpRequest r =
                  HttpRequest.newBuilder(URI.create(callees.get(i).url("/dep")))
                      .method(methods.get(i), HttpRequest.BodyPublishers.noBody())
                      .build();
              try {
                outbound.send(r, HttpResponse.BodyHandlers.ofString());
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException(e);
              }
            }
            for (Object v : Vectors.list(c, "set_claim")) {
              res.addHeader("Error-Claim", (String) v);
            }
            res.setStatus((int) Vectors.lng(c, "status", 200));
            res.getWriter().write("body");
          }
        };
    try (JettyServer server =
        new JettyServer(
            handler,
            new ServerSpanFilter(SetOnce.wrap(otel.getOpenTelemetry())),
            ErrorOwnershipFilter.builder().setHints(hints).build())) {
      HttpResponse<String> res =
          HttpClient.newHttpClient()
              .send(
                  HttpRequest.newBuilder(URI.create(server.url("/checkout"))).build(),
                  HttpResponse.BodyHandlers.ofString());
      Map<String, Object> want = Vectors.map(c, "want");
      assertEquals(Vectors.lng(c, "status", 200), res.statusCode(), "status");
      List<String> got = res.headers().allValues("Error-Claim");
      String header = Vectors.str(want, "header");
      assertEquals(header == null ? List.of() : List.of(header), got, "Error-Claim");
      // The server span ends as the filter chain returns, which may be just after the answer.
      List<SpanData> spans = SpanCheck.ofKind(otel.getSpans(), SpanKind.SERVER);
      for (int i = 0; i < 500 && spans.isEmpty(); i++) {
        Thread.sleep(10);
        spans = SpanCheck.ofKind(otel.getSpans(), SpanKind.SERVER);
      }
      assertEquals(1, spans.size(), "server spans");
      SpanCheck.check(
          "server span", spans.get(0), Vectors.map(want, "span"), SpanCheck.SERVER_KEYS);
    } finally {
      for (ScriptedCallee callee : callees) {
        callee.close();
      }
    }
  }
}

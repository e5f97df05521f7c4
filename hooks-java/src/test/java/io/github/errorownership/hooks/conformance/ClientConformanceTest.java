// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.errorownership.hooks.RetryBudget;
import io.github.errorownership.hooks.Vectors;
import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.okhttp.ErrorOwnershipInterceptor;
import io.github.errorownership.hooks.testing.ScriptedCallee;
import io.github.errorownership.hooks.testing.SetOnce;
import io.github.errorownership.hooks.testing.SpanCheck;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.sdk.testing.junit5.OpenTelemetryExtension;
import io.opentelemetry.sdk.trace.data.SpanData;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import okhttp3.MediaType;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** client.json, through the java.net.http wrapper and the OkHttp interceptor. */
class ClientConformanceTest {
  @RegisterExtension static final OpenTelemetryExtension otel = OpenTelemetryExtension.create();

  static Stream<Arguments> cases() {
    return Vectors.cases("client.json", "cases");
  }

  private static RetryBudget budget(Map<String, Object> c) {
    return c.containsKey("budget")
        ? RetryBudget.create(Vectors.limits(Vectors.map(c, "budget")))
        : null;
  }

  @ParameterizedTest(name = "httpclient: {0}")
  @MethodSource("cases")
  void httpClient(String name, Map<String, Object> c) throws Exception {
    try (ScriptedCallee callee = new ScriptedCallee(Vectors.list(c, "responses"))) {
      HttpClient client =
          ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
              .setOpenTelemetry(SetOnce.wrap(otel.getOpenTelemetry()))
              .setMaxAttempts((int) Vectors.lng(c, "max_attempts", 3))
              .setBackoff(Duration.ofNanos(1), Duration.ofNanos(1))
              .setBudget(budget(c))
              .build();
      HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(callee.url("/items/1")));
      String body = Vectors.str(c, "body");
      rb.method(
          Vectors.str(c, "method"),
          body == null
              ? HttpRequest.BodyPublishers.noBody()
              : HttpRequest.BodyPublishers.ofString(body));
      Vectors.map(c, "headers").forEach((k, v) -> rb.header(k, (String) v));
      HttpResponse<String> res = client.send(rb.build(), HttpResponse.BodyHandlers.ofString());
      verify(c, callee, res.statusCode());
    }
  }

  @ParameterizedTest(name = "okhttp: {0}")
  @MethodSource("cases")
  void okHttp(String name, Map<String, Object> c) throws Exception {
    try (ScriptedCallee callee = new ScriptedCallee(Vectors.list(c, "responses"))) {
      OkHttpClient client =
          new OkHttpClient.Builder()
              .addInterceptor(
                  ErrorOwnershipInterceptor.builder()
                      .setOpenTelemetry(SetOnce.wrap(otel.getOpenTelemetry()))
                      .setMaxAttempts((int) Vectors.lng(c, "max_attempts", 3))
                      .setBackoff(Duration.ofNanos(1), Duration.ofNanos(1))
                      .setBudget(budget(c))
                      .build())
              .build();
      String body = Vectors.str(c, "body");
      Request.Builder rb =
          new Request.Builder()
              .url(callee.url("/items/1"))
              .method(
                  Vectors.str(c, "method"),
                  body == null
                      ? null
                      : RequestBody.create(
                          body, MediaType.get("application/x-www-form-urlencoded")));
      Vectors.map(c, "headers").forEach((k, v) -> rb.header(k, (String) v));
      try (Response res = client.newCall(rb.build()).execute()) {
        verify(c, callee, res.code());
      }
      client.dispatcher().executorService().shutdown();
      client.connectionPool().evictAll();
    }
  }

  static void verify(Map<String, Object> c, ScriptedCallee callee, int status) {
    Map<String, Object> want = Vectors.map(c, "want");
    assertEquals(Vectors.lng(want, "status", -1), status, "status");
    List<String> wantRequests = new ArrayList<>();
    for (Object o : Vectors.list(want, "requests")) {
      wantRequests.add((String) o);
    }
    assertEquals(wantRequests, callee.retryAttempts(), "Retry-Attempt per request");
    if (want.containsKey("bodies")) {
      List<String> wantBodies = new ArrayList<>();
      for (Object o : Vectors.list(want, "bodies")) {
        wantBodies.add((String) o);
      }
      assertEquals(wantBodies, callee.bodies(), "bodies");
    }
    List<SpanData> spans = SpanCheck.ofKind(otel.getSpans(), SpanKind.CLIENT);
    List<Object> wantSpans = Vectors.list(want, "spans");
    assertEquals(wantSpans.size(), spans.size(), "client spans");
    for (int i = 0; i < spans.size(); i++) {
      @SuppressWarnings("unchecked")
      Map<String, Object> w = (Map<String, Object>) wantSpans.get(i);
      SpanCheck.check("attempt " + i, spans.get(i), w, SpanCheck.CLIENT_KEYS);
    }
  }
}

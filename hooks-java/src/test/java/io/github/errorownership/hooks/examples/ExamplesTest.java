// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.hints.HintsClient;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The README's snippets are these examples' regions (.ci/check-snippets): compiling them here keeps
 * the README's code in step with the API, and running them shows it starts as written.
 */
class ExamplesTest {
  @BeforeEach
  @AfterEach
  void resetGlobal() {
    GlobalOpenTelemetry.resetForTest();
  }

  @Test
  void sdkAndClients() {
    SdkExample e = new SdkExample("http://127.0.0.1:1", "http://127.0.0.1:1");
    try {
      assertNotNull(e.http);
      assertNotNull(e.ok);
      Span span = e.sdk.getTracer("examples").spanBuilder("probe").startSpan();
      assertTrue(span.isRecording(), "the SDK of the snippet records");
      span.end();
      // No hints yet (nothing listens there): every edge is unknown.
      assertEquals(Mode.UNKNOWN, e.hints.mode("GET /", "stock:443", ""));
    } finally {
      e.channel.shutdownNow();
      e.hints.close();
      e.sdk.shutdown().join(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void grpcServer() throws Exception {
    HintsClient hints = HintsClient.builder("http://127.0.0.1:1", "checkout").build();
    Server s =
        GrpcServerExample.server(
                () -> ServerServiceDefinition.builder("examples.Probe").build(), hints, 0)
            .start();
    try {
      assertTrue(s.getPort() > 0);
    } finally {
      s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }
}

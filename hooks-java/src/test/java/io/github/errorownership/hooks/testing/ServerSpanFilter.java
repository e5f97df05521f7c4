// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.context.Scope;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;

/** Stands in for a servlet instrumentation: a SERVER span current around the chain. */
public final class ServerSpanFilter implements Filter {
  private final OpenTelemetry otel;

  public ServerSpanFilter(OpenTelemetry otel) {
    this.otel = otel;
  }

  @Override
  public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
      throws IOException, ServletException {
    Span span =
        otel.getTracer("test")
            .spanBuilder(((HttpServletRequest) req).getMethod())
            .setSpanKind(SpanKind.SERVER)
            .startSpan();
    try (Scope ignored = span.makeCurrent()) {
      chain.doFilter(req, res);
    } finally {
      span.end();
    }
  }
}

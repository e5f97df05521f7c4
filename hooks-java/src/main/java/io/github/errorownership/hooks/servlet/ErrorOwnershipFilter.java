// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.servlet;

import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.ServerRules;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.function.Function;
import java.util.function.IntPredicate;

/**
 * A Jakarta Servlet filter that puts a {@link Ledger} in the request's OpenTelemetry context, so
 * the client hooks record the request's outbound calls, and sets the {@code Error-Claim} header on
 * server-fault responses (5xx by default) from those calls and the hints. The header is set before
 * the status is committed: the response is wrapped, and {@code setStatus}, {@code sendError},
 * {@code flushBuffer} and the first use of the body decide it; the decision is made again at the
 * end of the chain if the response is still not committed, so that calls made after the status
 * count. A handler that sets {@code Error-Claim} itself to one valid value wins; any other value is
 * replaced.
 *
 * <p>On {@link Span#current()} (the server span, under the OpenTelemetry Java agent or a servlet
 * instrumentation filter placed before this one) it sets {@code error_ownership.claim.sent} and
 * {@code error_ownership.claim.reason} once, from the decision the response went out with: at the
 * end of the chain, or, on a request that went asynchronous, at the first decision (the span may
 * end before the filter hears of the response's completion).
 */
public final class ErrorOwnershipFilter implements Filter {

  private final HintSource hints;
  private final IntPredicate fault;
  private final Function<HttpServletRequest, String> operation;

  private ErrorOwnershipFilter(Builder b) {
    this.hints = b.hints;
    this.fault = b.fault;
    this.operation = b.operation;
  }

  /** Returns a filter with the default settings: no hints, 5xx are faults. */
  public static ErrorOwnershipFilter create() {
    return builder().build();
  }

  /** Returns a new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** Names the inbound operation "METHOD /path" (the hints match concrete paths to routes). */
  public static String operation(HttpServletRequest r) {
    return ClaimingResponse.operation(r);
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
      throws IOException, ServletException {
    if (!(request instanceof HttpServletRequest httpServletRequest)
        || !(response instanceof HttpServletResponse httpServletResponse)) {
      chain.doFilter(request, response);
      return;
    }
    Context parent = Context.current();
    Ledger ledger = Ledger.create();
    Span span = Span.fromContext(parent);
    ClaimingResponse wrapped =
        new ClaimingResponse(
            httpServletResponse,
            httpServletRequest,
            ledger,
            fault,
            () ->
                hints == null
                    ? null
                    : ServerRules.modes(hints, operation.apply(httpServletRequest)),
            () -> span);
    try (Scope ignored = parent.with(ledger).makeCurrent()) {
      chain.doFilter(request, wrapped);
    } finally {
      wrapped.finish();
    }
  }

  /** Builds an {@link ErrorOwnershipFilter}. */
  public static final class Builder {
    private HintSource hints;
    private IntPredicate fault = HttpRules::serverFault;
    private Function<HttpServletRequest, String> operation = ErrorOwnershipFilter::operation;

    private Builder() {}

    /** Uses {@code hints} for edge modes; without, every edge is unknown (fail-close). */
    public Builder setHints(HintSource hints) {
      this.hints = hints;
      return this;
    }

    /** Sets which statuses are server faults (default: 500 and above). */
    public Builder setFault(IntPredicate fault) {
      this.fault = fault;
      return this;
    }

    /** Sets how the inbound operation is named for hint look-ups (default {@link #operation}). */
    public Builder setOperation(Function<HttpServletRequest, String> operation) {
      this.operation = operation;
      return this;
    }

    /** Returns the filter. */
    public ErrorOwnershipFilter build() {
      return new ErrorOwnershipFilter(this);
    }
  }
}

// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.servlet;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.ModeFunction;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.Verdict;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.ServerRules;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
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
    String uri = r.getRequestURI();
    return r.getMethod() + " " + (uri == null || uri.isEmpty() ? "/" : uri);
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
    ClaimingResponse wrapped =
        new ClaimingResponse(
            httpServletResponse, httpServletRequest, ledger, Span.fromContext(parent));
    try (Scope ignored = parent.with(ledger).makeCurrent()) {
      chain.doFilter(request, wrapped);
    } finally {
      if (!request.isAsyncStarted()) {
        wrapped.finish();
      } else {
        wrapped.annotateOnce();
      }
    }
  }

  private final class ClaimingResponse extends HttpServletResponseWrapper {
    private final HttpServletRequest request;
    private final Ledger ledger;
    private final Span span;
    private int status = 200;

    /** The value the filter itself set, or null. */
    private String ours;

    /** What the span is to carry: the last decision, a Claim or a Verdict; null if none. */
    private Object decision;

    /** Whether the span has it: each attribute is set once, however often the filter decides. */
    private boolean annotated;

    ClaimingResponse(HttpServletResponse r, HttpServletRequest request, Ledger ledger, Span span) {
      super(r);
      this.request = request;
      this.ledger = ledger;
      this.span = span;
    }

    @Override
    public void setStatus(int sc) {
      status = sc;
      if (fault.test(sc) && !isCommitted()) {
        decide();
      }
      super.setStatus(sc);
    }

    @Override
    public void sendError(int sc, String msg) throws IOException {
      status = sc;
      if (fault.test(sc) && !isCommitted()) {
        decide();
      }
      super.sendError(sc, msg);
    }

    @Override
    public void sendError(int sc) throws IOException {
      status = sc;
      if (fault.test(sc) && !isCommitted()) {
        decide();
      }
      super.sendError(sc);
    }

    @Override
    public void flushBuffer() throws IOException {
      beforeCommit();
      super.flushBuffer();
    }

    @Override
    public ServletOutputStream getOutputStream() throws IOException {
      beforeCommit();
      return super.getOutputStream();
    }

    @Override
    public PrintWriter getWriter() throws IOException {
      beforeCommit();
      return super.getWriter();
    }

    private void beforeCommit() {
      if (!isCommitted() && fault.test(currentStatus())) {
        decide();
      }
    }

    private int currentStatus() {
      try {
        return getStatus();
      } catch (RuntimeException e) {
        return status;
      }
    }

    /** At the end of the chain: decide again with every call, if the status can still change. */
    void finish() {
      if (!isCommitted() && fault.test(currentStatus())) {
        decide();
      }
      annotateOnce();
    }

    /** Puts the decision on the span, the first time only. */
    void annotateOnce() {
      if (annotated || decision == null) {
        return;
      }
      annotated = true;
      if (decision instanceof Claim own) {
        ServerRules.annotate(span, own);
      } else if (decision instanceof Verdict v) {
        ServerRules.annotate(span, v);
      }
    }

    private void decide() {
      Collection<String> values = getHeaders(OwnershipNames.HTTP_CLAIM_HEADER);
      List<String> list = values == null ? List.of() : new ArrayList<>(values);
      boolean byHandler =
          !list.isEmpty() && !(ours != null && list.size() == 1 && ours.equals(list.get(0)));
      if (byHandler) {
        Claim own = Claim.parse(list);
        if (own != Claim.MISSING) {
          ours = null;
          record(own);
          return;
        }
      }
      int code = currentStatus();
      ModeFunction modes =
          hints == null ? null : ServerRules.modes(hints, operation.apply(request));
      Verdict v = ledger.decide(modes, code == 504);
      ours = v.claim().wireName();
      setHeader(OwnershipNames.HTTP_CLAIM_HEADER, ours);
      record(v);
    }

    private void record(Object d) {
      decision = d;
      if (request.isAsyncStarted()) {
        annotateOnce();
      }
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

// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.servlet;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.ModeFunction;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.Verdict;
import io.github.errorownership.hooks.internal.ServerRules;
import io.opentelemetry.api.trace.Span;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.function.IntPredicate;
import java.util.function.Supplier;

/**
 * The response {@link ErrorOwnershipFilter} wraps, and the agent extension's servlet advice too
 * (one wrapper, so the two paths claim alike): the claim is decided before the status is committed
 * ({@code setStatus}, {@code sendError}, {@code flushBuffer}, the first use of the body) and again
 * at {@link #finish()}; the decision goes on the server span once. Not an API of its own: use the
 * filter.
 */
public class ClaimingResponse extends HttpServletResponseWrapper {
  private final HttpServletRequest request;
  private final Ledger ledger;
  private final IntPredicate fault;
  private final Supplier<ModeFunction> modes;
  private final Supplier<Span> spanSource;
  private Span span;
  private int status = 200;

  /** The value the hooks themselves set, or null. */
  private String ours;

  /** What the span is to carry: the last decision, a Claim or a Verdict; null if none. */
  private Object decision;

  /** Whether the span has it: each attribute is set once, however often the hooks decide. */
  private boolean annotated;

  /**
   * Wraps {@code r}. {@code modes} tells the edges' modes when a claim is decided (null: every edge
   * unknown); {@code span} finds the server span, asked again while it answers null.
   */
  public ClaimingResponse(
      HttpServletResponse r,
      HttpServletRequest request,
      Ledger ledger,
      IntPredicate fault,
      Supplier<ModeFunction> modes,
      Supplier<Span> span) {
    super(r);
    this.request = request;
    this.ledger = ledger;
    this.fault = fault;
    this.modes = modes;
    this.spanSource = span;
    this.span = span.get();
  }

  /** Names the inbound operation "METHOD /path" (the hints match concrete paths to routes). */
  public static String operation(HttpServletRequest r) {
    String uri = r.getRequestURI();
    return r.getMethod() + " " + (uri == null || uri.isEmpty() ? "/" : uri);
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

  /**
   * When the handler returned: on a request still synchronous, decide again with every call if the
   * status can still change; then put the decision on the span.
   */
  public void finish() {
    if (!request.isAsyncStarted() && !isCommitted() && fault.test(currentStatus())) {
      decide();
    }
    annotateOnce();
  }

  private Span span() {
    if (span == null) {
      span = spanSource.get();
    }
    return span;
  }

  /** Puts the decision on the span, the first time only. */
  private void annotateOnce() {
    if (annotated || decision == null) {
      return;
    }
    Span s = span();
    if (s == null) {
      return;
    }
    annotated = true;
    if (decision instanceof Claim own) {
      ServerRules.annotate(s, own);
    } else if (decision instanceof Verdict v) {
      ServerRules.annotate(s, v);
    }
  }

  private void decide() {
    try {
      span();
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
      Verdict v = ledger.decide(modes.get(), currentStatus() == 504);
      ours = v.claim().wireName();
      setHeader(OwnershipNames.HTTP_CLAIM_HEADER, ours);
      record(v);
    } catch (RuntimeException e) {
      // never fail a request for the hooks' sake
    }
  }

  private void record(Object d) {
    decision = d;
    if (request.isAsyncStarted()) {
      annotateOnce();
    }
  }
}

// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.servlet;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.Verdict;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.ServerRules;
import io.github.errorownership.javaagent.bootstrap.AgentHooks;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.instrumentation.api.instrumenter.LocalRootSpan;
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

/**
 * What ErrorOwnershipFilter does, applied by the agent at the first servlet or filter a request
 * enters: the response wrapped so that the claim is decided before the status is committed, the
 * request's ledger current while the application handles it. Injected into the web application's
 * class loader; the rules (Ledger.decide, Claim.parse, ServerRules) are the hooks' own.
 */
public final class ClaimingResponse extends HttpServletResponseWrapper {
  private static final String MARK = ClaimingResponse.class.getName();

  private final HttpServletRequest request;
  private final Ledger ledger;
  private final Scope scope;
  private Span span;
  private int status = 200;
  private String ours;
  private Object decision;
  private boolean annotated;

  private ClaimingResponse(HttpServletResponse r, HttpServletRequest request, Ledger ledger) {
    super(r);
    this.request = request;
    this.ledger = ledger;
    this.scope = Context.current().with(ledger).makeCurrent();
    this.span = serverSpan();
  }

  /**
   * At the entry of Servlet.service or Filter.doFilter: returns the wrapped response for the first
   * one a request enters, else null (the request is the hooks' already, or not HTTP).
   */
  public static ClaimingResponse enter(ServletRequest request, ServletResponse response) {
    try {
      if (!(request instanceof HttpServletRequest req)
          || !(response instanceof HttpServletResponse res)
          || request.getAttribute(MARK) != null) {
        return null;
      }
      request.setAttribute(MARK, Boolean.TRUE);
      return new ClaimingResponse(res, req, Ledger.create());
    } catch (RuntimeException e) {
      return null;
    }
  }

  /** At the exit of the method {@link #enter} wrapped the response of. */
  public void exit() {
    scope.close();
    try {
      request.removeAttribute(MARK);
      if (!request.isAsyncStarted()) {
        if (!isCommitted() && HttpRules.serverFault(currentStatus())) {
          decide();
        }
      }
      annotateOnce();
    } catch (RuntimeException e) {
      // never fail a request for the hooks' sake
    }
  }

  @Override
  public void setStatus(int sc) {
    status = sc;
    if (HttpRules.serverFault(sc) && !isCommitted()) {
      decide();
    }
    super.setStatus(sc);
  }

  @Override
  public void sendError(int sc, String msg) throws IOException {
    status = sc;
    if (HttpRules.serverFault(sc) && !isCommitted()) {
      decide();
    }
    super.sendError(sc, msg);
  }

  @Override
  public void sendError(int sc) throws IOException {
    status = sc;
    if (HttpRules.serverFault(sc) && !isCommitted()) {
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
    if (!isCommitted() && HttpRules.serverFault(currentStatus())) {
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

  /** The agent's SERVER span: the request's local root, whichever advice made it current. */
  private static Span serverSpan() {
    Span s = LocalRootSpan.fromContextOrNull(Context.current());
    return s;
  }

  private void annotateOnce() {
    if (annotated || decision == null) {
      return;
    }
    annotated = true;
    Span s = span != null ? span : serverSpan();
    if (s == null) {
      return;
    }
    if (decision instanceof Claim own) {
      ServerRules.annotate(s, own);
    } else if (decision instanceof Verdict v) {
      ServerRules.annotate(s, v);
    }
  }

  private void decide() {
    try {
      if (span == null) {
        span = serverSpan();
      }
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
      String uri = request.getRequestURI();
      String operation = request.getMethod() + " " + (uri == null || uri.isEmpty() ? "/" : uri);
      Verdict v =
          ledger.decide(
              ServerRules.modes(AgentHooks.get().hints, operation), currentStatus() == 504);
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

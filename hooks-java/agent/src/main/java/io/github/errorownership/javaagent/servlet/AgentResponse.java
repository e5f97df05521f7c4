// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.servlet;

import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.ServerRules;
import io.github.errorownership.hooks.servlet.ClaimingResponse;
import io.github.errorownership.javaagent.bootstrap.AgentHooks;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.instrumentation.api.instrumenter.LocalRootSpan;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

/**
 * What ErrorOwnershipFilter does, applied by the agent at the first servlet or filter a request
 * enters: the filter's own response wrapper (the library's {@link ClaimingResponse}, injected with
 * this class into the web application's class loader), the request's ledger current while the
 * application handles it, the agent's SERVER span (the local root) annotated.
 */
public final class AgentResponse extends ClaimingResponse {
  private static final String MARK = AgentResponse.class.getName();

  private final HttpServletRequest request;
  private final Scope scope;

  // The scope spans the advised method: opened at its entry, closed by exit() at its exit.
  @SuppressWarnings("MustBeClosedChecker")
  private AgentResponse(HttpServletResponse r, HttpServletRequest request, Ledger ledger) {
    super(
        r,
        request,
        ledger,
        HttpRules::serverFault,
        () -> ServerRules.modes(AgentHooks.get().hints, ClaimingResponse.operation(request)),
        AgentResponse::serverSpan);
    this.request = request;
    this.scope = Context.current().with(ledger).makeCurrent();
  }

  /**
   * At the entry of Servlet.service or Filter.doFilter: returns the wrapped response for the first
   * one a request enters, else null (the request is the hooks' already, or not HTTP).
   */
  public static AgentResponse enter(ServletRequest request, ServletResponse response) {
    try {
      if (!(request instanceof HttpServletRequest req)
          || !(response instanceof HttpServletResponse res)
          || request.getAttribute(MARK) != null) {
        return null;
      }
      request.setAttribute(MARK, true);
      return new AgentResponse(res, req, Ledger.create());
    } catch (RuntimeException e) {
      return null;
    }
  }

  /** At the exit of the method {@link #enter} wrapped the response of. */
  public void exit() {
    scope.close();
    try {
      request.removeAttribute(MARK);
      finish();
    } catch (RuntimeException e) {
      // never fail a request for the hooks' sake
    }
  }

  /** The agent's SERVER span: the request's local root, whichever advice made it current. */
  private static Span serverSpan() {
    return LocalRootSpan.fromContextOrNull(Context.current());
  }
}

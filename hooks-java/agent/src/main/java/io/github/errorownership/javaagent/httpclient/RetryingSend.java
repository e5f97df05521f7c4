// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.httpclient;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.httpclient.JdkCalls;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.SendLoop;
import io.github.errorownership.javaagent.bootstrap.LoopCall;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

/**
 * The library's retry loop ({@link SendLoop}) around {@code HttpClientImpl.send}, injected next to
 * java.net.http (the platform class loader) and called from the advice on {@code
 * HttpClientFacade.send}: each attempt goes through the agent's instrumentation of {@code
 * HttpClientImpl.send}, so it is the agent's CLIENT span, and {@link LoopCall} decides it at that
 * span's end.
 */
public final class RetryingSend {
  private RetryingSend() {}

  /** Sends {@code request} through {@code impl} with the hooks' retries. */
  public static <T> HttpResponse<T> send(
      HttpClient impl, HttpRequest request, HttpResponse.BodyHandler<T> handler)
      throws IOException, InterruptedException {
    Context parent = Context.current();
    return SendLoop.run(
        new JdkCall<>(
            parent,
            HttpRules.peerAddress(request.uri()),
            HttpRules.operation(request.method(), request.uri()),
            JdkCalls.idempotent(request),
            request,
            impl,
            handler));
  }

  /** Reads java.net.http responses for {@link LoopCall}, and sends its attempts. */
  static final class JdkCall<T> extends LoopCall implements SendLoop<HttpResponse<T>> {
    private final Context parent;
    private final HttpRequest request;
    private final HttpClient impl;
    private final HttpResponse.BodyHandler<T> handler;

    JdkCall(
        Context parent,
        String peer,
        String operation,
        boolean policy,
        HttpRequest request,
        HttpClient impl,
        HttpResponse.BodyHandler<T> handler) {
      super(parent, peer, operation, policy);
      this.parent = parent;
      this.request = request;
      this.impl = impl;
      this.handler = handler;
    }

    @Override
    public HttpResponse<T> attempt(int n) throws IOException, InterruptedException {
      HttpRequest ar = n == 0 ? request : JdkCalls.attemptBuilder(request, n).build();
      try (Scope ignored = startAttempt(parent, n).makeCurrent()) {
        return impl.send(ar, handler);
      }
    }

    @Override
    public RetryDecision ended(int n, HttpResponse<T> response, IOException failure) {
      return afterAttempt(response, failure);
    }

    @Override
    public void aborted(int n, Exception e) {
      afterAttempt(null, e);
    }

    @Override
    public void discard(HttpResponse<T> response) {
      JdkCalls.discard(response);
    }

    @Override
    protected boolean fault(Object response) {
      return HttpRules.serverFault(((HttpResponse<?>) response).statusCode());
    }

    @Override
    protected Claim claim(Object response) {
      return Claim.parse(
          ((HttpResponse<?>) response).headers().allValues(OwnershipNames.HTTP_CLAIM_HEADER));
    }
  }
}

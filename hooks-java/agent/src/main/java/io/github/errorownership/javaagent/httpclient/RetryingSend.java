// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.httpclient;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.httpclient.JdkCalls;
import io.github.errorownership.hooks.internal.AsyncLoop;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.SendLoop;
import io.github.errorownership.javaagent.bootstrap.LoopCall;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;

/**
 * The library's retry loops ({@link SendLoop}, {@link AsyncLoop}) around {@code
 * HttpClientImpl.send} and {@code sendAsync}, injected next to java.net.http (the platform class
 * loader) and called from the advice on {@code HttpClientFacade}'s: each attempt goes through the
 * agent's instrumentation of {@code HttpClientImpl}, so it is the agent's CLIENT span, and {@link
 * LoopCall} decides it at that span's end.
 */
public final class RetryingSend {
  private RetryingSend() {}

  /** Sends {@code request} through {@code impl} with the hooks' retries. */
  public static <T> HttpResponse<T> send(
      HttpClient impl, HttpRequest request, HttpResponse.BodyHandler<T> handler)
      throws IOException, InterruptedException {
    return SendLoop.run(new JdkCall<>(Context.current(), request, impl, handler, null));
  }

  /** Sends {@code request} asynchronously through {@code impl} with the hooks' retries. */
  public static <T> CompletableFuture<HttpResponse<T>> sendAsync(
      HttpClient impl,
      HttpRequest request,
      HttpResponse.BodyHandler<T> handler,
      HttpResponse.PushPromiseHandler<T> push) {
    JdkCall<T> call = new JdkCall<>(Context.current(), request, impl, handler, push);
    return AsyncLoop.run(call, call.result);
  }

  /** Reads java.net.http responses for {@link LoopCall}, and sends its attempts. */
  static final class JdkCall<T> extends LoopCall
      implements SendLoop<HttpResponse<T>>, AsyncLoop<HttpResponse<T>> {
    private final Context parent;
    private final HttpRequest request;
    private final HttpClient impl;
    private final HttpResponse.BodyHandler<T> handler;
    private final HttpResponse.PushPromiseHandler<T> push;

    /** The caller's future, when the call is asynchronous. */
    final CompletableFuture<HttpResponse<T>> result = new CompletableFuture<>();

    JdkCall(
        Context parent,
        HttpRequest request,
        HttpClient impl,
        HttpResponse.BodyHandler<T> handler,
        HttpResponse.PushPromiseHandler<T> push) {
      super(
          parent,
          HttpRules.peerAddress(request.uri()),
          HttpRules.operation(request.method(), request.uri()),
          JdkCalls.idempotent(request));
      this.parent = parent;
      this.request = request;
      this.impl = impl;
      this.handler = handler;
      this.push = push;
    }

    @Override
    public HttpResponse<T> attempt(int n) throws IOException, InterruptedException {
      HttpRequest ar = n == 0 ? request : JdkCalls.attemptBuilder(request, n).build();
      try (Scope ignored = startAttempt(parent, n).makeCurrent()) {
        return impl.send(ar, handler);
      }
    }

    @Override
    public CompletableFuture<HttpResponse<T>> attemptAsync(int n) {
      HttpRequest ar = n == 0 ? request : JdkCalls.attemptBuilder(request, n).build();
      try (Scope ignored = startAttempt(parent, n).makeCurrent()) {
        return push == null ? impl.sendAsync(ar, handler) : impl.sendAsync(ar, handler, push);
      }
    }

    @Override
    public RetryDecision ended(int n, HttpResponse<T> response, IOException failure) {
      return afterAttempt(response, failure);
    }

    @Override
    public RetryDecision endedAsync(
        int n, HttpResponse<T> response, Throwable failure, boolean canceled) {
      return afterAttempt(response, failure);
    }

    @Override
    protected boolean canceled(Throwable error) {
      return result.isCancelled() || super.canceled(error);
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

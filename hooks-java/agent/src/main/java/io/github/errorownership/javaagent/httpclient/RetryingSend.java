// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.httpclient;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.javaagent.bootstrap.LoopCall;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The retry loop around {@code HttpClientImpl.send}, injected next to java.net.http (the platform
 * class loader) and called from the advice on {@code HttpClientFacade.send}: each attempt goes
 * through the agent's instrumentation of {@code HttpClientImpl.send}, so it is the agent's CLIENT
 * span, and {@link LoopCall} decides it at that span's end.
 */
public final class RetryingSend {
  private RetryingSend() {}

  /** Sends {@code request} through {@code impl} with the hooks' retries. */
  public static <T> HttpResponse<T> send(
      HttpClient impl, HttpRequest request, HttpResponse.BodyHandler<T> handler)
      throws IOException, InterruptedException {
    Context parent = Context.current();
    JdkCall call =
        new JdkCall(
            parent,
            HttpRules.peerAddress(request.uri()),
            HttpRules.operation(request.method(), request.uri()),
            idempotent(request));
    for (int attempt = 0; ; attempt++) {
      HttpRequest ar = attempt == 0 ? request : withAttempt(request, attempt);
      HttpResponse<T> res = null;
      IOException failure = null;
      try (Scope ignored = call.startAttempt(parent, attempt).makeCurrent()) {
        res = impl.send(ar, handler);
      } catch (IOException e) {
        failure = e;
      } catch (InterruptedException | RuntimeException e) {
        call.afterAttempt(null, e);
        throw e;
      }
      RetryDecision d = call.afterAttempt(res, failure);
      if (d != RetryDecision.RETRIED) {
        if (failure != null) {
          throw failure;
        }
        return res;
      }
      discard(res);
      try {
        TimeUnit.NANOSECONDS.sleep(call.delayNanos());
      } catch (InterruptedException e) {
        call.abandoned();
        throw e;
      }
    }
  }

  /**
   * The library hooks' default policy (ErrorOwnershipHttpClient.idempotent, which the bootstrap
   * class loader cannot load beside java.net.http): an idempotent method or an idempotency key.
   */
  static boolean idempotent(HttpRequest r) {
    return HttpRules.idempotentMethod(r.method())
        || r.headers().firstValue("Idempotency-Key").isPresent()
        || r.headers().firstValue("X-Idempotency-Key").isPresent();
  }

  private static HttpRequest withAttempt(HttpRequest request, int attempt) {
    return HttpRequest.newBuilder(request, (name, value) -> true)
        .setHeader(OwnershipNames.HTTP_RETRY_ATTEMPT_HEADER, Integer.toString(attempt))
        .build();
  }

  private static void discard(HttpResponse<?> res) {
    if (res == null) {
      return;
    }
    Object body = res.body();
    try {
      if (body instanceof InputStream in) {
        in.close();
      } else if (body instanceof Stream<?> s) {
        s.close();
      } else if (body instanceof Closeable c) {
        c.close();
      }
    } catch (IOException | RuntimeException ignored) {
      // the body is dropped either way
    }
  }

  /** Reads java.net.http responses for {@link LoopCall}. */
  static final class JdkCall extends LoopCall {
    JdkCall(Context parent, String peer, String operation, boolean policy) {
      super(parent, peer, operation, policy);
    }

    @Override
    protected int status(Object response) {
      return ((HttpResponse<?>) response).statusCode();
    }

    @Override
    protected Claim claim(Object response) {
      return Claim.parse(
          ((HttpResponse<?>) response).headers().allValues(OwnershipNames.HTTP_CLAIM_HEADER));
    }
  }
}

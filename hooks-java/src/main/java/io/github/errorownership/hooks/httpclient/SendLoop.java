// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.httpclient;

import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.internal.HttpRules;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The synchronous retry loop of {@link ErrorOwnershipHttpClient#send}, and of the agent extension's
 * {@code HttpClient.send} (one loop, so the two paths retry alike): attempts until the decision is
 * not {@link RetryDecision#RETRIED}, the failed attempts' bodies released, the backoff slept. Not
 * an API of its own: use the client.
 *
 * @param <T> the response body's type
 */
public interface SendLoop<T> {
  /** Sends attempt {@code n} (0 first) of {@code request}; the implementation adds its headers. */
  HttpResponse<T> attempt(int n, HttpRequest request) throws IOException, InterruptedException;

  /** Decides attempt {@code n}, which answered {@code response} or failed with {@code failure}. */
  RetryDecision ended(int n, HttpResponse<T> response, IOException failure);

  /** Attempt {@code n} threw {@code e} (interrupted, or a runtime exception): the call ends. */
  void aborted(int n, Exception e);

  /** The wait before the next attempt. */
  long delayNanos();

  /** The wait before a retry was cut short: the call ends. */
  void abandoned();

  /** Runs {@code loop} over {@code request}: the last attempt's response, or its failure. */
  static <T> HttpResponse<T> run(HttpRequest request, SendLoop<T> loop)
      throws IOException, InterruptedException {
    for (int attempt = 0; ; attempt++) {
      HttpResponse<T> res = null;
      IOException failure = null;
      try {
        res = loop.attempt(attempt, request);
      } catch (IOException e) {
        failure = e;
      } catch (InterruptedException | RuntimeException e) {
        loop.aborted(attempt, e);
        throw e;
      }
      if (loop.ended(attempt, res, failure) != RetryDecision.RETRIED) {
        if (failure != null) {
          throw failure;
        }
        return res;
      }
      discard(res);
      try {
        TimeUnit.NANOSECONDS.sleep(loop.delayNanos());
      } catch (InterruptedException e) {
        loop.abandoned();
        throw e;
      }
    }
  }

  /** The default retry policy: an idempotent method or an idempotency key. */
  static boolean idempotent(HttpRequest r) {
    return HttpRules.idempotentMethod(r.method())
        || r.headers().firstValue("Idempotency-Key").isPresent()
        || r.headers().firstValue("X-Idempotency-Key").isPresent();
  }

  /** A builder of {@code request} as attempt {@code n} sends it: Retry-Attempt on retries. */
  static HttpRequest.Builder attemptBuilder(HttpRequest request, int n) {
    HttpRequest.Builder b = HttpRequest.newBuilder(request, (name, value) -> true);
    if (n > 0) {
      b.setHeader(OwnershipNames.HTTP_RETRY_ATTEMPT_HEADER, Integer.toString(n));
    }
    return b;
  }

  /** Releases a failed attempt's body, if the handler left one open. */
  static void discard(HttpResponse<?> res) {
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
      // nothing to do: the body is dropped either way
    }
  }
}

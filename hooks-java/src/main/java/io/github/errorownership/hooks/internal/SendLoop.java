// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import io.github.errorownership.hooks.RetryDecision;
import java.io.IOException;
import java.util.concurrent.TimeUnit;

/**
 * The synchronous retry loop of the client hooks (java.net.http's {@code send}, OkHttp's
 * interceptor), the library's and the agent extension's alike, so that every path retries the same
 * way: attempts until the decision is not {@link RetryDecision#RETRIED}, the failed attempts'
 * responses released, the backoff slept. Free of any client library's types, so that it loads
 * wherever the rules do.
 *
 * @param <R> the client library's response type
 */
public interface SendLoop<R> {
  /** Sends attempt {@code n} (0 first); the implementation adds its headers. */
  R attempt(int n) throws IOException, InterruptedException;

  /** Decides attempt {@code n}, which answered {@code response} or failed with {@code failure}. */
  RetryDecision ended(int n, R response, IOException failure);

  /** Attempt {@code n} threw {@code e} (interrupted, or a runtime exception): the call ends. */
  void aborted(int n, Exception e);

  /** Releases a failed attempt's response before the next attempt. */
  void discard(R response);

  /** The wait before the next attempt. */
  long delayNanos();

  /** The wait before a retry was cut short: the call ends. */
  void abandoned();

  /** Runs {@code loop}: the last attempt's response, or its failure. */
  static <R> R run(SendLoop<R> loop) throws IOException, InterruptedException {
    for (int attempt = 0; ; attempt++) {
      R res = null;
      IOException failure = null;
      try {
        res = loop.attempt(attempt);
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
      if (res != null) {
        loop.discard(res);
      }
      try {
        TimeUnit.NANOSECONDS.sleep(loop.delayNanos());
      } catch (InterruptedException e) {
        loop.abandoned();
        throw e;
      }
    }
  }
}

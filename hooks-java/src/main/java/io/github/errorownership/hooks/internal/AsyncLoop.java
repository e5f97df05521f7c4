// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import io.github.errorownership.hooks.RetryDecision;
import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

/**
 * The asynchronous sibling of {@link SendLoop} (java.net.http's {@code sendAsync}), the library's
 * and the agent extension's alike: attempts until the decision is not {@link
 * RetryDecision#RETRIED}, each after the last one's backoff on the JDK's delayed executor, the
 * failed attempts' responses released, the caller's future settled on every path.
 *
 * @param <R> the client library's response type
 */
public interface AsyncLoop<R> {
  /** Sends attempt {@code n} (0 first): its response's future. */
  CompletableFuture<R> attemptAsync(int n);

  /**
   * Decides attempt {@code n}, which answered {@code response} or failed with {@code failure};
   * {@code canceled}: the caller gave up, or the attempt failed otherwise than for the network.
   */
  RetryDecision endedAsync(int n, R response, Throwable failure, boolean canceled);

  /** Attempt {@code n} threw {@code e} before it was sent: the call ends. */
  void aborted(int n, Exception e);

  /** Releases a failed attempt's response before the next attempt. */
  void discard(R response);

  /** The wait before the next attempt. */
  long delayNanos();

  /** The wait before a retry was cut short (the caller's future is done): the call ends. */
  void abandoned();

  /** Runs {@code loop}, settling {@code result} with the last attempt's response or failure. */
  static <R> CompletableFuture<R> run(AsyncLoop<R> loop, CompletableFuture<R> result) {
    attempt(loop, 0, result);
    return result;
  }

  private static <R> void attempt(AsyncLoop<R> loop, int n, CompletableFuture<R> result) {
    CompletableFuture<R> f;
    try {
      f = loop.attemptAsync(n);
    } catch (RuntimeException e) {
      loop.aborted(n, e);
      result.completeExceptionally(e);
      return;
    }
    // The callback settles result on every path, also when it throws, so the future whenComplete
    // returns (f's outcome once more) has nothing left to report.
    CompletableFuture<R> unused =
        f.whenComplete(
            (res, err) -> {
              try {
                Throwable cause =
                    err instanceof CompletionException && err.getCause() != null
                        ? err.getCause()
                        : err;
                boolean canceled =
                    result.isCancelled() || !(cause == null || cause instanceof IOException);
                if (loop.endedAsync(n, res, cause, canceled) != RetryDecision.RETRIED) {
                  if (cause == null) {
                    result.complete(res);
                  } else {
                    result.completeExceptionally(cause);
                  }
                  return;
                }
                if (res != null) {
                  loop.discard(res);
                }
                CompletableFuture.delayedExecutor(loop.delayNanos(), TimeUnit.NANOSECONDS)
                    .execute(
                        () -> {
                          if (result.isDone()) {
                            loop.abandoned();
                            return;
                          }
                          attempt(loop, n + 1, result);
                        });
              } catch (RuntimeException e) {
                result.completeExceptionally(e);
              }
            });
  }
}

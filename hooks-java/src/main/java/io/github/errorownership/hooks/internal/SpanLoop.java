// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.RetryDecision;
import io.opentelemetry.api.trace.Span;
import java.io.IOException;
import java.util.concurrent.CompletableFuture;

/**
 * A {@link SendLoop} (and {@link AsyncLoop}) of the library's clients, whose attempts are the
 * hooks' own spans (none without OpenTelemetry): the decisions and the span ends, alike for every
 * client library.
 *
 * @param <R> the client library's response type
 */
public abstract class SpanLoop<R> implements SendLoop<R>, AsyncLoop<R> {
  private final ClientCallState call;
  private Span span;
  private Claim received = Claim.MISSING;

  protected SpanLoop(ClientCallState call) {
    this.call = call;
  }

  /** Starts attempt {@code n}'s span, or returns null. */
  protected abstract Span startSpan(int n);

  /** Sends attempt {@code n}, its span ({@code span}, maybe null) current. */
  protected abstract R send(int n, Span span) throws IOException, InterruptedException;

  /** Sends attempt {@code n} asynchronously, its span current; only for an {@link AsyncLoop}. */
  protected CompletableFuture<R> sendAsync(int n, Span span) {
    throw new UnsupportedOperationException("a synchronous loop");
  }

  /** The response's status. */
  protected abstract int status(R response);

  /** The response's Error-Claim values, read as a claim. */
  protected abstract Claim claim(R response);

  /** Whether the call was canceled, when the attempt failed with {@code failure} (maybe null). */
  protected abstract boolean canceled(IOException failure);

  @Override
  public final R attempt(int n) throws IOException, InterruptedException {
    span = startSpan(n);
    return send(n, span);
  }

  @Override
  public final CompletableFuture<R> attemptAsync(int n) {
    span = startSpan(n);
    return sendAsync(n, span);
  }

  @Override
  public final RetryDecision ended(int n, R res, IOException failure) {
    return decide(n, res, failure, canceled(failure));
  }

  @Override
  public final RetryDecision endedAsync(int n, R res, Throwable failure, boolean canceled) {
    return decide(n, res, failure, canceled);
  }

  private RetryDecision decide(int n, R res, Throwable failure, boolean canceled) {
    int status = res == null ? -1 : status(res);
    if (res != null && !HttpRules.serverFault(status)) {
      call.succeeded(n, span);
      HttpRules.endAttemptSpan(span, status, null);
      return RetryDecision.NONE;
    }
    received = res == null ? Claim.MISSING : claim(res);
    RetryDecision d = call.failed(n, received, 0, canceled, span);
    HttpRules.endAttemptSpan(span, status, failure);
    return d;
  }

  @Override
  public final void aborted(int n, Exception e) {
    HttpRules.endAttemptSpan(span, -1, e);
    call.failed(n, Claim.MISSING, 0, true, span);
  }

  @Override
  public final long delayNanos() {
    return call.delayNanos;
  }

  @Override
  public final void abandoned() {
    call.abandoned(received);
  }
}

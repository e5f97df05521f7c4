// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.okhttp;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.SendLoop;
import io.github.errorownership.hooks.okhttp.ErrorOwnershipInterceptor;
import io.github.errorownership.javaagent.bootstrap.LoopCall;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import java.io.IOException;
import java.io.InterruptedIOException;
import okhttp3.Interceptor;
import okhttp3.Request;
import okhttp3.Response;

/**
 * The library's retry loop ({@link SendLoop}) as an OkHttp application interceptor, added by the
 * agent extension after the agent's own: each attempt goes down the chain to the agent's tracing
 * network interceptor, so it is the agent's okhttp CLIENT span, and {@link LoopCall} decides it at
 * that span's end. Injected next to OkHttp.
 */
public final class RetryingInterceptor implements Interceptor {
  public static final RetryingInterceptor INSTANCE = new RetryingInterceptor();

  private RetryingInterceptor() {}

  @Override
  public Response intercept(Chain chain) throws IOException {
    Request request = chain.request();
    boolean replayable;
    try {
      replayable = request.body() == null || !request.body().isOneShot();
    } catch (LinkageError e) {
      // OkHttp before 3.14 has no one-shot bodies: only calls without a body are retried
      replayable = request.body() == null;
    }
    try {
      return SendLoop.run(
          new OkCall(
              Context.current(),
              HttpRules.peerAddress(request.url().uri()),
              HttpRules.operation(request.method(), request.url().uri()),
              replayable && ErrorOwnershipInterceptor.idempotent(request),
              chain));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("retry abandoned");
    }
  }

  /** Reads OkHttp responses for {@link LoopCall}, and sends its attempts down the chain. */
  static final class OkCall extends LoopCall implements SendLoop<Response> {
    private final Context parent;
    private final Chain chain;

    OkCall(Context parent, String peer, String operation, boolean policy, Chain chain) {
      super(parent, peer, operation, policy);
      this.parent = parent;
      this.chain = chain;
    }

    @Override
    public Response attempt(int n) throws IOException {
      Request r = chain.request();
      if (n > 0) {
        r =
            r.newBuilder()
                .header(OwnershipNames.HTTP_RETRY_ATTEMPT_HEADER, Integer.toString(n))
                .build();
      }
      try (Scope ignored = startAttempt(parent, n).makeCurrent()) {
        return chain.proceed(r);
      }
    }

    @Override
    public RetryDecision ended(int n, Response response, IOException failure) {
      return afterAttempt(response, failure);
    }

    @Override
    public void aborted(int n, Exception e) {
      afterAttempt(null, e);
    }

    @Override
    public void discard(Response response) {
      response.close();
    }

    @Override
    protected boolean fault(Object response) {
      return HttpRules.serverFault(((Response) response).code());
    }

    @Override
    protected Claim claim(Object response) {
      return ErrorOwnershipInterceptor.claimOf((Response) response);
    }
  }
}

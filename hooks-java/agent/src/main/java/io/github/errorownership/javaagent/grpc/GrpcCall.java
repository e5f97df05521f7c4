// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.grpc;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor;
import io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor;
import io.github.errorownership.hooks.grpc.GrpcFaults;
import io.github.errorownership.javaagent.bootstrap.LoopCall;
import io.grpc.CallOptions;
import io.grpc.ClientStreamTracer;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.opentelemetry.context.Context;
import java.util.function.BooleanSupplier;

/**
 * One unary call in the library's gRPC retry loop under the agent: each attempt is made in the
 * context that {@link LoopCall} marks, so the agent's client interceptor, further down the channel,
 * makes its CLIENT span there and {@link LoopCall} decides the attempt at that span's end. The
 * agent ends its span before the loop sees the trailers: a stream tracer hands them over first.
 */
final class GrpcCall extends LoopCall implements ErrorOwnershipClientInterceptor.Attempts {
  private final Context parent;
  private final long deadlineNanos;
  private final BooleanSupplier stopped;
  private volatile Metadata trailers;

  GrpcCall(
      MethodDescriptor<?, ?> method,
      String authority,
      Context parent,
      long deadlineNanos,
      BooleanSupplier stopped) {
    super(parent, authority, method.getFullMethodName(), true, false);
    this.parent = parent;
    this.deadlineNanos = deadlineNanos;
    this.stopped = stopped;
  }

  @Override
  public CallOptions callOptions(CallOptions options) {
    return options.withStreamTracerFactory(new Trailers(this));
  }

  @Override
  public Context start(int n, Metadata headers) {
    trailers = null;
    return startAttempt(parent, n);
  }

  @Override
  public RetryDecision closed(int n, Status status, Metadata trailers) {
    if (this.trailers == null) {
      this.trailers = trailers;
    }
    return afterAttempt(status, status.getCause());
  }

  @Override
  protected boolean fault(Object response) {
    return GrpcFaults.DEFAULT.contains(((Status) response).getCode());
  }

  @Override
  protected Claim claim(Object response) {
    return ErrorOwnershipServerInterceptor.claimOf(trailers);
  }

  @Override
  protected boolean canceled(Throwable error) {
    return stopped.getAsBoolean();
  }

  @Override
  protected long deadlineNanos() {
    return deadlineNanos;
  }

  /** Hands each attempt's trailers to its call as they arrive, before any listener sees them. */
  static final class Trailers extends ClientStreamTracer.Factory {
    private final GrpcCall call;

    Trailers(GrpcCall call) {
      this.call = call;
    }

    @Override
    public ClientStreamTracer newClientStreamTracer(
        ClientStreamTracer.StreamInfo info, Metadata headers) {
      return new Tracer(call);
    }
  }

  /** The tracer of one stream of an attempt. */
  static final class Tracer extends ClientStreamTracer {
    private final GrpcCall call;

    Tracer(GrpcCall call) {
      this.call = call;
    }

    @Override
    public void inboundTrailers(Metadata trailers) {
      call.trailers = trailers;
    }
  }
}

// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;

/** Stands in for the gRPC instrumentation: a SERVER span current for the call. */
public final class GrpcServerSpan implements ServerInterceptor {
  private final OpenTelemetry otel;

  public GrpcServerSpan(OpenTelemetry otel) {
    this.otel = otel;
  }

  @Override
  public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
      ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
    Span span =
        otel.getTracer("test")
            .spanBuilder(call.getMethodDescriptor().getFullMethodName())
            .setSpanKind(SpanKind.SERVER)
            .startSpan();
    Context ctx = Context.current().with(span);
    ServerCall<ReqT, RespT> ending =
        new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
          @Override
          public void close(Status status, Metadata trailers) {
            span.end();
            super.close(status, trailers);
          }
        };
    ServerCall.Listener<ReqT> l;
    try (Scope ignored = ctx.makeCurrent()) {
      l = next.startCall(ending, headers);
    }
    return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(l) {
      @Override
      public void onHalfClose() {
        try (Scope ignored = ctx.makeCurrent()) {
          super.onHalfClose();
        }
      }

      @Override
      public void onMessage(ReqT message) {
        try (Scope ignored = ctx.makeCurrent()) {
          super.onMessage(message);
        }
      }
    };
  }
}

// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.examples;

import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor;
import io.grpc.BindableService;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerInterceptors;

/** hooks-java/README.md: a gRPC server with the hooks' interceptor. */
final class GrpcServerExample {
  private GrpcServerExample() {}

  static Server server(BindableService service, HintSource hints, int port) {
    // region grpc-server
    // Inside the gRPC instrumentation's interceptor (the agent's, or GrpcTelemetry's added after
    // this one), so that its SERVER span is current when the hooks' interceptor runs.
    Server server =
        ServerBuilder.forPort(port)
            .addService(
                ServerInterceptors.intercept(
                    service, ErrorOwnershipServerInterceptor.builder().setHints(hints).build()))
            .build();
    // endregion
    return server;
  }
}

// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.grpc;

import io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor;
import io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor;
import io.github.errorownership.javaagent.bootstrap.AgentHooks;
import io.grpc.ClientInterceptor;
import io.grpc.ServerInterceptor;
import java.util.List;

/**
 * The library's gRPC interceptors, put by the agent extension into every channel and server the
 * agent's grpc-1.6 instrumentation traces, each on the right side of the agent's own interceptor:
 * the retry loop outside the agent's client interceptor (so that each attempt is the agent's CLIENT
 * span), the claims inside its server interceptor (so that its SERVER span is current). Injected
 * next to gRPC.
 */
public final class GrpcHooks {
  /** The library's retry loop, its attempts the agent's spans. */
  public static final ClientInterceptor CLIENT =
      ErrorOwnershipClientInterceptor.withAttempts(GrpcCall::new);

  private static volatile ServerInterceptor server;

  private GrpcHooks() {}

  /**
   * Adds the retry loop to a channel builder's interceptors (the first in the list runs last, next
   * to the transport), once: right after the agent's, or first when the agent adds its own, at
   * index 0, afterwards.
   */
  public static void addClient(List<ClientInterceptor> interceptors) {
    if (interceptors.contains(CLIENT)) {
      return;
    }
    interceptors.add(agents(interceptors, "TracingClientInterceptor") + 1, CLIENT);
  }

  /**
   * Adds the claims to a server builder's interceptors (the last in the list runs first), once:
   * right before the agent's, or last when the agent appends its own afterwards.
   */
  public static void addServer(List<ServerInterceptor> interceptors) {
    ServerInterceptor s = server();
    if (interceptors.contains(s)) {
      return;
    }
    int agent = agents(interceptors, "TracingServerInterceptor");
    interceptors.add(agent < 0 ? interceptors.size() : agent, s);
  }

  private static ServerInterceptor server() {
    ServerInterceptor s = server;
    if (s == null) {
      synchronized (GrpcHooks.class) {
        s = server;
        if (s == null) {
          s = ErrorOwnershipServerInterceptor.builder().setHints(AgentHooks.get().hints).build();
          server = s;
        }
      }
    }
    return s;
  }

  /** The index of the agent's interceptor (grpc-1.6's {@code name}), or -1. */
  private static int agents(List<?> interceptors, String name) {
    for (int i = 0; i < interceptors.size(); i++) {
      String n = interceptors.get(i).getClass().getName();
      if (n.startsWith("io.opentelemetry.") && n.endsWith("." + name)) {
        return i;
      }
    }
    return -1;
  }
}

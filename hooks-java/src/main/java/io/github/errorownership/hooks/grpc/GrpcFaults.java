// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.grpc;

import io.grpc.Status;
import java.util.EnumSet;
import java.util.Set;

/** The gRPC status codes that are server faults by default. */
public final class GrpcFaults {
  /** UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS. */
  public static final Set<Status.Code> DEFAULT =
      Set.copyOf(
          EnumSet.of(
              Status.Code.UNKNOWN,
              Status.Code.DEADLINE_EXCEEDED,
              Status.Code.UNIMPLEMENTED,
              Status.Code.INTERNAL,
              Status.Code.UNAVAILABLE,
              Status.Code.DATA_LOSS));

  private GrpcFaults() {}
}

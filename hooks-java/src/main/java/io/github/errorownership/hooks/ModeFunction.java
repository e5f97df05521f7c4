// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/**
 * Tells the mode of the edge from the current inbound operation to ({@code peerService}, {@code
 * peerOperation}).
 */
@FunctionalInterface
public interface ModeFunction {
  /** Returns the edge's mode; {@code peerOperation} is {@code ""} when not known. */
  Mode mode(String peerService, String peerOperation);
}

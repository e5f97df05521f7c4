// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.hints;

import io.github.errorownership.hooks.Mode;
import java.util.List;

/**
 * One learned edge of a hints document: (service, operation) → (peerService, peerOperation).
 *
 * @param operation the inbound operation, as the service's server span names it
 * @param peerService the callee's service.name
 * @param peerOperation the callee's operation
 * @param peerAddresses the addresses the service used to reach the peer
 * @param mode fail_open, fail_close or unknown
 * @param confidence the confidence bound behind the mode
 * @param samples how many inbound requests taught it
 */
public record HintEdge(
    String operation,
    String peerService,
    String peerOperation,
    List<String> peerAddresses,
    Mode mode,
    double confidence,
    long samples) {}

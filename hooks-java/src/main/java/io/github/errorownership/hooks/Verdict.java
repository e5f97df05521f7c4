// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/**
 * The claim a server sends about an error, and why.
 *
 * @param claim {@link Claim#CLAIMED} or {@link Claim#UNCLAIMED}
 * @param reason why
 */
public record Verdict(Claim claim, Reason reason) {}

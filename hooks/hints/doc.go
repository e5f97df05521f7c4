// SPDX-License-Identifier: Apache-2.0

// Package hints is the client side of the ownership hints
// (docs/design.md §9.3): a Client polls a collector's errorownership_hints
// extension for one service's hints (ownership.Hints, served at
// ownership.HintsPath) and answers the hooks' questions — which edges are
// fail-open, how big the retry budget is — falling back to safe defaults
// when it cannot.
package hints

// SPDX-License-Identifier: Apache-2.0

//go:build !race

package soaktest

// Race reports whether the race detector is on.
const Race = false

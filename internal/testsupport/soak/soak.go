// SPDX-License-Identifier: Apache-2.0

// Package soak tells the reliability tests which form to run. Tests named
// *Soak* run a short form by default, so that `make test` and CI exercise
// them in seconds, and their long form, minutes each, under `make soak`,
// which sets ERROROWNERSHIP_SOAK=1.
package soak

import "os"

// Env is the environment variable that asks for the long forms.
const Env = "ERROROWNERSHIP_SOAK"

// Long reports whether the long forms are asked for: Env set to anything
// but "", "0" or "false".
func Long() bool {
	switch os.Getenv(Env) {
	case "", "0", "false":
		return false
	}
	return true
}

// Pick returns long for the long form and short otherwise.
func Pick[T any](short, long T) T {
	if Long() {
		return long
	}
	return short
}

// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package hookshttp_test

import "time"

// processCPU is not measured here.
func processCPU() (time.Duration, bool) { return 0, false }

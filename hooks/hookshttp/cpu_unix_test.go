// SPDX-License-Identifier: Apache-2.0

//go:build unix

package hookshttp_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time this process has used, user and system,
// all threads: the benchmark's own work and its garbage collection, but not
// the time other processes on a shared machine took from it.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

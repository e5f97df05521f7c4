// SPDX-License-Identifier: Apache-2.0

//go:build unix

package portlock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lock takes f's exclusive lock without waiting. flock locks belong to
// the open file, so two reservations of one process exclude each other as
// two processes' do, and the kernel drops the lock of a process that dies.
func lock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errHeld
	}
	if err != nil {
		return fmt.Errorf("portlock: flock %s: %w", f.Name(), err)
	}
	return nil
}

// drop releases f's lock by closing it.
func drop(f *os.File) { _ = f.Close() }

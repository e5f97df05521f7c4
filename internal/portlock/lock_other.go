// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package portlock

import (
	"os"
	"sync"
)

// Without flock, reservations exclude each other within this process only.
var (
	heldMu sync.Mutex
	held   = map[string]bool{}
)

func lock(f *os.File) error {
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[f.Name()] {
		return errHeld
	}
	held[f.Name()] = true
	return nil
}

func drop(f *os.File) {
	heldMu.Lock()
	delete(held, f.Name())
	heldMu.Unlock()
	_ = f.Close()
}

// SPDX-License-Identifier: Apache-2.0

package pgtest

import (
	"net"
	"sync"
	"testing"
)

// Unresponsive listens on a loopback port, accepts connections and never
// answers, like a database host that hangs: every attempt to reach it
// waits until its context ends. It returns the port; the listener and its
// connections close when the test ends. A real server cannot be made to
// hang like this, so this is the one fake in the package.
func Unresponsive(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtest: listening for an unresponsive database: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

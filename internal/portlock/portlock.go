// SPDX-License-Identifier: Apache-2.0

// Package portlock hands out loopback TCP ports for servers that cannot
// bind port 0 and report the port they got: a collector or a database
// started as a child process, whose configuration names its ports, or a
// component whose configuration takes an endpoint and never says which
// port it bound.
//
// Listening on port 0 and closing the listener only tells a process that a
// port was free a moment ago; `go test ./...` runs several test binaries at
// once, and two of them picking the same port start two servers where each
// test expects its own, or find another test's server where a test expects
// nothing to listen. A reserved port is held, through an flock'ed file
// under os.TempDir(), until the process releases it or exits: no two
// processes that reserve their ports here hold the same one, and a port
// reserved and never bound is one nothing of ours listens on.
package portlock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Port is a loopback TCP port this process holds.
type Port struct {
	n    int
	once sync.Once
	lock *os.File
}

// Number returns the port.
func (p *Port) Number() int { return p.n }

// Addr returns 127.0.0.1:PORT.
func (p *Port) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.n) }

// Release gives the port back. The server that used it must have stopped:
// another process may take the port as soon as Release returns.
func (p *Port) Release() {
	p.once.Do(func() { drop(p.lock) })
}

// minPort is the lowest port handed out: below it are the well-known ports
// and the commonly configured ones.
const minPort = 10000

// errHeld says another reservation, of this process or another, holds a
// port.
var errHeld = errors.New("held by another reservation")

// Reserve reserves a loopback TCP port that no other reservation holds and
// that nothing listened on when it was reserved. The port is taken below
// the kernel's ephemeral range when that range can be read: a port from
// it, free when reserved, could become the local port of an outgoing
// connection (a collector connecting to its database, say) before the
// server listens on it. The port stays reserved until Release or the
// process's exit.
func Reserve() (*Port, error) {
	dir, err := lockDir()
	if err != nil {
		return nil, err
	}
	low := ephemeralLow()
	for range 500 {
		var port int
		if low > minPort {
			port = minPort + rand.IntN(low-minPort) //nolint:gosec // G404: a port to try, not a secret
		} else if port, err = kernelPort(); err != nil {
			return nil, err
		}
		p, err := reserve(dir, port)
		if err == nil {
			return p, nil
		}
	}
	return nil, errors.New("portlock: no free loopback port found in 500 tries")
}

// reserve takes port's lock, then checks that nothing listens on it.
func reserve(dir string, port int) (*Port, error) {
	path := filepath.Join(dir, strconv.Itoa(port)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666) //nolint:gosec // G302,G304: a lock file every user's tests share, named by a port number
	if err != nil {
		return nil, fmt.Errorf("portlock: %w", err)
	}
	if err := lock(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		drop(f)
		return nil, fmt.Errorf("portlock: port %d: %w", port, err)
	}
	_ = l.Close()
	return &Port{n: port, lock: f}, nil
}

// lockDir is the directory of the lock files, shared by every process and
// every user on the machine.
func lockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "errorownership-ports")
	if err := os.Mkdir(dir, 0o777); err == nil { //nolint:gosec // G301: shared by every user's tests, as /tmp is
		// The umask narrowed the mode; sticky, as /tmp is.
		_ = os.Chmod(dir, 0o777|os.ModeSticky)
	} else if !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("portlock: %w", err)
	}
	return dir, nil
}

// kernelPort is a port the kernel picks, for when the ephemeral range
// cannot be read.
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("portlock: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the start of the kernel's ephemeral port range, or 0
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	low, _ := strconv.Atoi(f[0])
	return low
}

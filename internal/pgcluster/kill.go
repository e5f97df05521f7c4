// SPDX-License-Identifier: Apache-2.0

package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kill crashes the cluster: SIGKILL to the postmaster and to every process
// it started, at once, as the OOM killer, a container runtime's kill or a
// lost host end a server. Nothing is shut down cleanly: transactions in
// flight are lost, clients see their connections cut, and the data
// directory is left as the crash left it. Start then recovers as PostgreSQL
// does after a crash, replaying the write-ahead log. Kill returns once
// every process is dead.
func (c *Cluster) Kill(ctx context.Context) error {
	if !c.running {
		return errors.New("pgcluster: Kill: the cluster is not running")
	}
	pid, err := c.postmasterPID()
	if err != nil {
		return err
	}
	// Stopped first, the postmaster can fork no child that the list below
	// would miss; killed before its children, it cannot see one die and
	// start the orderly crash restart PostgreSQL makes when a backend dies
	// alone, which is not the crash wanted.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pgcluster: stopping the postmaster (pid %d): %w", pid, err)
	}
	for state, _, ok := procStat(pid); ok && state != 'T'; state, _, ok = procStat(pid) {
		if err := sleepCtx(ctx); err != nil {
			return fmt.Errorf("pgcluster: the postmaster (pid %d) does not stop: %w", pid, err)
		}
	}
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("pgcluster: killing the postmaster (pid %d): %w", pid, err)
	}
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL) // it may have exited meanwhile
	}
	c.running = false
	for _, p := range append(children, pid) {
		for alive(p) {
			if err := sleepCtx(ctx); err != nil {
				return fmt.Errorf("pgcluster: process %d of the killed cluster still runs: %w", p, err)
			}
		}
	}
	// The postmaster was started by pg_ctl, which exited: its parent is
	// now init, and a container's init may be slow to collect its exit
	// status, or never do. A new postmaster takes a lock file naming a
	// pid kill(2) still finds for a live server, and refuses to start;
	// the process is dead, so its lock files are stale and go.
	if zombie(pid) {
		for _, lock := range []string{filepath.Join(c.dataDir(), "postmaster.pid"), c.socketPath() + ".lock"} {
			if err := os.Remove(lock); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("pgcluster: %w", err)
			}
		}
	}
	return nil
}

// postmasterPID reads the postmaster's pid from the first line of
// postmaster.pid.
func (c *Cluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgcluster: postmaster.pid does not begin with a pid: %q", first)
	}
	return pid, nil
}

// procStat returns a process's state and parent from /proc/pid/stat, or
// ok false if there is no such process.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], ppid, true
}

// alive reports whether pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// zombie reports whether pid has exited and waits to be collected.
func zombie(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state == 'Z'
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(n); ok && ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// sleepCtx waits a moment between two looks at a process, or returns the
// context's cause if it ends first.
func sleepCtx(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(10 * time.Millisecond):
		return nil
	}
}

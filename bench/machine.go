// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// describeMachine returns what is known of the machine before the runs.
func describeMachine() machine {
	m := machine{CPU: cpuModel(), Cores: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now(), LoadBefore: loadAverage()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadAverage is the 1-, 5- and 15-minute load averages of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

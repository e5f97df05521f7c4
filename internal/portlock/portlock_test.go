// SPDX-License-Identifier: Apache-2.0

package portlock

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childPortEnv, when set, makes the test binary a child that tries to
// reserve the port it names and prints what happened.
const childPortEnv = "PORTLOCK_TEST_CHILD_PORT"

func TestMain(m *testing.M) {
	if s := os.Getenv(childPortEnv); s != "" {
		os.Exit(child(s))
	}
	os.Exit(m.Run())
}

// child reserves the port s names, as another test process would, and
// prints "reserved" or "held".
func child(s string) int {
	port, err := strconv.Atoi(s)
	if err != nil {
		return 2
	}
	dir, err := lockDir()
	if err != nil {
		return 2
	}
	p, err := reserve(dir, port)
	switch {
	case errors.Is(err, errHeld):
		os.Stdout.WriteString("held\n")
	case err != nil:
		os.Stdout.WriteString(err.Error() + "\n")
	default:
		p.Release()
		os.Stdout.WriteString("reserved\n")
	}
	return 0
}

// tryInChild runs the test binary as another process reserving port.
func tryInChild(t *testing.T, port int) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run", "^$") //nolint:gosec // G204: this test binary
	cmd.Env = append(os.Environ(), childPortEnv+"="+strconv.Itoa(port))
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func TestAnotherProcessCannotReserveAHeldPort(t *testing.T) {
	p, err := Reserve()
	require.NoError(t, err)
	assert.Equal(t, "held", tryInChild(t, p.Number()), "a second process reserved port %d while this one held it", p.Number())

	p.Release()
	assert.Equal(t, "reserved", tryInChild(t, p.Number()), "port %d was released, yet another process could not reserve it", p.Number())
}

func TestReservationsOfOneProcessDiffer(t *testing.T) {
	dir, err := lockDir()
	require.NoError(t, err)
	seen := map[int]bool{}
	for range 50 {
		p, err := Reserve()
		require.NoError(t, err)
		t.Cleanup(p.Release)
		require.False(t, seen[p.Number()], "port %d handed out twice", p.Number())
		seen[p.Number()] = true

		_, err = reserve(dir, p.Number())
		require.ErrorIs(t, err, errHeld, "port %d reserved again while held", p.Number())
	}
}

func TestAPortSomethingListensOnIsNotReserved(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	dir, err := lockDir()
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port

	_, err = reserve(dir, port)
	require.Error(t, err)
	assert.NotErrorIs(t, err, errHeld, "the port is not another reservation's")
	// The failed attempt gave the lock back.
	l.Close()
	p, err := reserve(dir, port)
	require.NoError(t, err, "port %d: nothing listens on it any more", port)
	p.Release()
}

func TestAReservedPortCanBeBound(t *testing.T) {
	p, err := Reserve()
	require.NoError(t, err)
	defer p.Release()
	l, err := net.Listen("tcp", p.Addr())
	require.NoError(t, err, "the server the port was reserved for binds it")
	require.NoError(t, l.Close())
}

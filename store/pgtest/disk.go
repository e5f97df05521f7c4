// SPDX-License-Identifier: Apache-2.0

package pgtest

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/errorownership/errorownership/internal/pgcluster"
)

// SmallDisk mounts a tmpfs of size bytes for the test and returns its
// directory, owned by the server's user: a file system that fills up, for a
// tablespace whose disk is full. It is unmounted when the test ends.
// Mounting needs CAP_SYS_ADMIN (root in most containers); ok is false, and
// the reason is logged, when the system refuses it.
func SmallDisk(tb testing.TB, size int) (dir string, ok bool) {
	tb.Helper()
	cred, err := pgcluster.ServerCredential()
	if err != nil {
		tb.Fatal(err)
	}
	// Under the temporary directory itself, not a test's private one,
	// which the server's user could not enter.
	mnt, err := os.MkdirTemp("", "pgtest-disk-") //nolint:usetesting // tb.TempDir's parent is private to us; the server's user must enter this one
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(mnt) })
	uid, gid := os.Getuid(), os.Getgid()
	if cred != nil {
		uid, gid = int(cred.Uid), int(cred.Gid)
	}
	opts := fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", size, uid, gid)
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		tb.Logf("pgtest: cannot mount a %d-byte tmpfs on %s: %v", size, mnt, err)
		return "", false
	}
	tb.Cleanup(func() {
		// Detached: a server still running holds files open on it.
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			tb.Errorf("pgtest: unmounting %s: %v", mnt, err)
		}
	})
	return mnt, true
}

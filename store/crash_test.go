// SPDX-License-Identifier: Apache-2.0

package store

import (
	"testing"

	"github.com/errorownership/errorownership/store/pgtest"
)

// A flush Write reported written outlives a crash of the server, even
// where the server commits asynchronously (pgtest's clusters run with
// synchronous_commit = off): the writer counts it written and will never
// write it again, so a commit the crash undid would be lost unseen.
func TestWrittenFlushSurvivesACrash(t *testing.T) {
	ctx := testContext(t)
	cluster := pgtest.Start(t)
	dsn, err := cluster.CreateDatabase(ctx, "stats")
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn, DefaultConfig())
	if got := queryText(t, s, "SHOW synchronous_commit"); got != "off" {
		t.Fatalf("the server commits with synchronous_commit = %s; the test needs off", got)
	}
	for seq := range uint64(3) {
		if dup, err := s.Write(ctx, tinyFlush(seq+1, t0)); err != nil || dup {
			t.Fatalf("flush %d: duplicate %v, %v", seq+1, dup, err)
		}
		// At once: an asynchronous commit reaches the disk within a few
		// hundred milliseconds, a crash this soon loses it.
		if err := cluster.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Start(ctx); err != nil {
			t.Fatal(err)
		}
		s.pool.Reset() // its connections died with the server
		wantInt(t, s, int64(seq+1), "%d flushes after the crash", "SELECT count(*) FROM flushes")
	}
}

// SPDX-License-Identifier: Apache-2.0

package store

import (
	crand "crypto/rand"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// incompressible returns n random letters: PostgreSQL cannot compress them
// into an index entry, as it would a repetitive name.
func incompressible(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = crand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}

// longNameFlush is a flush whose operation is named by an 8 KB statement,
// as a database span named by its SQL would be.
func longNameFlush(seq uint64, name string) Flush {
	b := newBuilder(nil)
	b.op("db-client", name).Served = 1
	b.edge("db-client", name, "postgres", name).Calls = 1
	return b.flush("test", seq, t0)
}

// Two 8 KB incompressible names sharing their first kilobyte, which no
// index entry could hold, are written cut, and stay two names.
func TestLongNamesAreCutAndWritten(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	prefix := "SELECT " + incompressible(1<<10)
	for i, name := range []string{prefix + incompressible(7<<10), prefix + incompressible(7<<10)} {
		if _, err := s.Write(ctx, longNameFlush(uint64(i+1), name)); err != nil {
			t.Fatal(err)
		}
	}
	wantInt(t, s, 2, "%d distinct operations stored", "SELECT count(DISTINCT operation) FROM operation_stats WHERE service = 'db-client'")
	wantInt(t, s, MaxNameBytes, "stored names of up to %d bytes", "SELECT max(octet_length(operation)) FROM edge_stats")
	wantInt(t, s, 2, "%d edges whose name shows the cut", "SELECT count(*) FROM edge_stats WHERE peer_operation LIKE 'SELECT %…__________'")
}

func TestCutName(t *testing.T) {
	marked := regexp.MustCompile(`…[0-9a-f]{10}$`)
	tests := []struct {
		name, in string
		cut      bool
	}{
		{"short", "GET /", false},
		{"at the bound", strings.Repeat("x", MaxNameBytes), false},
		{"one byte over", strings.Repeat("x", MaxNameBytes+1), true},
		{"8 KB", strings.Repeat("SELECT 1; ", 800), true},
		{"multi-byte runes across the cut", strings.Repeat("é€", 300), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := cutName(tt.in, MaxNameBytes)
			if cut != tt.cut {
				t.Fatalf("cut %v, want %v", cut, tt.cut)
			}
			if !cut {
				if got != tt.in {
					t.Fatalf("an uncut name changed: %q", got)
				}
				return
			}
			if len(got) > MaxNameBytes || !utf8.ValidString(got) || !marked.MatchString(got) {
				t.Fatalf("cut to %d bytes, valid UTF-8 %v, %q at the end; want at most %d bytes, valid, a marker and a hash",
					len(got), utf8.ValidString(got), got[max(0, len(got)-20):], MaxNameBytes)
			}
			prefix := marked.ReplaceAllString(got, "")
			if !strings.HasPrefix(tt.in, prefix) || len(prefix) < MaxNameBytes-len("…")-10-utf8.UTFMax {
				t.Fatalf("kept %d bytes of the name, not its longest prefix that fits", len(prefix))
			}
		})
	}
	// Distinct long names with one prefix stay distinct.
	a, _ := cutName(strings.Repeat("x", 1000)+"a", MaxNameBytes)
	b, _ := cutName(strings.Repeat("x", 1000)+"b", MaxNameBytes)
	if a == b {
		t.Fatal("two long names sharing their first 1000 bytes were cut to one name")
	}
}

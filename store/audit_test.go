// SPDX-License-Identifier: Apache-2.0

package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuditQueries: the filters select, the groups count and carry the
// service's failed requests beside them.
func TestAuditQueries(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	_, err := s.Write(ctx, knownFlush("a", 1, t0))
	require.NoError(t, err)
	window := AuditFilter{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}
	with := func(edit func(*AuditFilter)) AuditFilter {
		f := window
		edit(&f)
		return f
	}
	frontendCache := counted(AuditGroup{Service: "frontend", PeerService: "cache", AuditFigures: AuditFigures[float64]{Audited: 2, Failed: 100, Coincidental: 10},
		First: t0.Add(10 * time.Second), Last: t0.Add(20 * time.Second)})[0]
	backend := counted(AuditGroup{Service: "backend", PeerService: "unknown", AuditFigures: AuditFigures[float64]{Audited: 1},
		First: t0.Add(30 * time.Second), Last: t0.Add(30 * time.Second)})[0]
	for _, tc := range []struct {
		name    string
		filter  AuditFilter
		groups  []AuditGroup
		entries int
	}{
		{"all", window, []AuditGroup{backend, frontendCache}, 3},
		{"service", with(func(f *AuditFilter) { f.Service = "frontend" }), []AuditGroup{frontendCache}, 2},
		{"operation", with(func(f *AuditFilter) { f.Operation = "/api" }), []AuditGroup{backend}, 1},
		{"dependency", with(func(f *AuditFilter) { f.PeerService = "cache" }), []AuditGroup{frontendCache}, 2},
		{"limit", with(func(f *AuditFilter) { f.Limit = 1 }), []AuditGroup{backend, frontendCache}, 1},
		{"window without entries", with(func(f *AuditFilter) { f.From = t0.Add(25 * time.Second) }),
			[]AuditGroup{backend}, 1},
		{"nothing", with(func(f *AuditFilter) { f.Service = "nobody" }), []AuditGroup{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups, err := s.AuditGroups(ctx, tc.filter)
			require.NoError(t, err)
			assert.Equal(t, tc.groups, groups)
			entries, err := s.AuditEntries(ctx, tc.filter)
			require.NoError(t, err)
			assert.Len(t, entries, tc.entries)
			for i := 1; i < len(entries); i++ {
				assert.False(t, entries[i].Time.Before(entries[i-1].Time), "oldest first")
			}
		})
	}
	assert.InDelta(t, 0.02, frontendCache.Share(), 1e-12)
	assert.Zero(t, backend.Share(), "no failed requests: no share")
}

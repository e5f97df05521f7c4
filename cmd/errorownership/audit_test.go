// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	da "github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/store"
)

// coincidentalTraces are the scenario's coincidental errors, by trace ID:
// its story says 10 checkouts failed for their own reason while
// recommendations failed too.
func coincidentalTraces(t *testing.T) []string {
	t.Helper()
	out, _, err := runCLI(t, "analyze", "--format", "jsonl", scenarioDir+"/coincidental.json")
	require.NoError(t, err)
	var ids []string
	for _, v := range lines(t, out)["verdict"] {
		if v["verdict"] == "coincidental" {
			ids = append(ids, v["trace_id"].(string))
		}
	}
	slices.Sort(ids)
	require.Len(t, ids, 10)
	return ids
}

// TestAuditGolden: the table views over the fixture, as golden files.
func TestAuditGolden(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	// As a collector whose audit_per_service_per_minute left 6 entries out.
	sampled := fixtureDSNWith(t, fixtureBucket, func(s *da.Stats) { s.Audit = s.Audit[:4] })
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"sampled", []string{"--dsn", sampled}},
		{"grouped", nil},
		{"grouped_service", []string{"--service", "checkout"}},
		{"detail", []string{"--view", "detail", "--trace-url", "https://traces.example/trace/{trace_id}?service={service}"}},
		{"detail_limit", []string{"--view", "detail", "--limit", "3"}},
		{"none", []string{"--service", "payments"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A later --dsn overrides the first.
			args := append(append([]string{"audit", "--dsn", dsn}, fixtureWindow...), tc.args...)
			out, stderr, err := runCLI(t, args...)
			require.NoError(t, err, stderr)
			golden(t, "audit/"+tc.name+".txt", out+stderr)
		})
	}
}

// TestAuditFormats: every format lists exactly the scenario's
// coincidental errors, and the grouped view counts them as a share of
// checkout's failed requests (60, by the scenario's story).
func TestAuditFormats(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	want := coincidentalTraces(t)
	base := append([]string{"audit", "--dsn", dsn}, fixtureWindow...)

	detail := map[string]func(t *testing.T, out string) []string{
		"table": func(t *testing.T, out string) []string { return tableColumn(t, out, "TRACE ID") },
		"json": func(t *testing.T, out string) []string {
			var doc struct {
				Errors []struct {
					TraceID    string `json:"trace_id"`
					Dependency string `json:"dependency"`
				} `json:"errors"`
				Truncated bool `json:"truncated"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &doc))
			assert.False(t, doc.Truncated)
			var ids []string
			for _, e := range doc.Errors {
				assert.Equal(t, "recommendations", e.Dependency)
				ids = append(ids, e.TraceID)
			}
			return ids
		},
		"csv": func(t *testing.T, out string) []string {
			rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			require.NoError(t, err)
			require.NotEmpty(t, rows)
			col := slices.Index(rows[0], "trace_id")
			require.GreaterOrEqual(t, col, 0, rows[0])
			var ids []string
			for _, r := range rows[1:] {
				ids = append(ids, r[col])
			}
			return ids
		},
	}
	for format, ids := range detail {
		t.Run("detail_"+format, func(t *testing.T) {
			out, stderr, err := runCLI(t, append(base, "--view", "detail", "--format", format, "--limit", "0")...)
			require.NoError(t, err, stderr)
			got := ids(t, out)
			slices.Sort(got)
			assert.Equal(t, want, got)
		})
	}

	t.Run("grouped_json", func(t *testing.T) {
		out, stderr, err := runCLI(t, append(base, "--format", "json")...)
		require.NoError(t, err, stderr)
		var doc struct {
			Groups []auditGroupLine `json:"groups"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		require.Len(t, doc.Groups, 1)
		g := doc.Groups[0]
		assert.Equal(t, "checkout", g.Service)
		assert.Equal(t, "recommendations", g.Dependency)
		assert.EqualValues(t, 10, g.Coincidental)
		assert.EqualValues(t, 60, g.ServiceFailed)
		require.NotNil(t, g.Share)
		assert.InDelta(t, 10.0/60, *g.Share, 1e-12)
	})
	t.Run("grouped_csv", func(t *testing.T) {
		out, stderr, err := runCLI(t, append(base, "--format", "csv")...)
		require.NoError(t, err, stderr)
		rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		require.NoError(t, err)
		require.Len(t, rows, 2)
		assert.Equal(t, []string{"checkout", "recommendations", "10", "0.16666666666666666", "60", "10"}, rows[1][:6])
	})
}

// tableColumn returns a column of a table's rows, by its header.
func tableColumn(t *testing.T, out, header string) []string {
	t.Helper()
	ls := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range ls {
		at := strings.Index(l, header)
		if at < 0 {
			continue
		}
		var col []string
		for _, row := range ls[i+1:] {
			if at >= len(row) {
				break
			}
			col = append(col, strings.Fields(row[at:])[0])
		}
		return col
	}
	t.Fatalf("no column %q in:\n%s", header, out)
	return nil
}

// TestAuditFailIfShareAbove: the threshold trips the exit status 3 (and
// still prints the table), and a share at or under it does not.
func TestAuditFailIfShareAbove(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	base := append([]string{"audit", "--dsn", dsn}, fixtureWindow...)
	for _, tc := range []struct {
		name, limit string
		trips       bool
	}{
		{"fraction below the share", "0.1", true},
		{"percentage below the share", "15%", true},
		{"at the share is not above it", "0.17", false},
		{"percentage above the share", "50%", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCLI(t, append(base, "--fail-if-share-above", tc.limit)...)
			assert.Contains(t, out, "recommendations")
			if !tc.trips {
				assert.NoError(t, err)
				return
			}
			var ee *exitError
			require.True(t, errors.As(err, &ee), "%v", err)
			assert.Equal(t, exitShareAbove, ee.code)
			assert.Contains(t, err.Error(), "checkout with recommendations: 16.7% of 60 failed requests")
		})
	}
}

// TestAuditInputErrors: flags a person can get wrong say what to write.
func TestAuditInputErrors(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	base := []string{"audit", "--dsn", dsn}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"misspelt service", append(fixtureWindow, "--service", "chekout"), `--service chekout: no service "chekout" from 2026-11-01T00:00:00Z to 2026-11-01T01:00:00Z; did you mean "checkout"?`},
		{"misspelt dependency", append(fixtureWindow, "--dependency", "recomendations"), `did you mean "recommendations"?`},
		{"unknown operation", append(fixtureWindow, "--operation", "POST /checkouts"), `did you mean "POST /checkout"`},
		{"empty window", []string{"--from", "2026-10-01T00:00:00Z", "--to", "2026-10-02T00:00:00Z"},
			"no statistics from 2026-10-01T00:00:00Z to 2026-10-02T00:00:00Z; the database holds them from 2026-11-01T00:00:00Z to 2026-11-01T01:00:00Z: try --from 2026-11-01T00:00:00Z --to 2026-11-01T01:00:00Z"},
		{"since and from", []string{"--since", "1h", "--from", "2026-11-01"}, "--since and --from both given: give one"},
		{"bad time", []string{"--from", "yesterday"}, `--from "yesterday" is not a time: write it as 2026-11-29T16:00:00Z`},
		{"backwards window", []string{"--from", "2026-11-02", "--to", "2026-11-01"}, "the window is empty"},
		{"bad view", []string{"--view", "list"}, `--view "list": use grouped or detail`},
		{"bad format", []string{"--format", "xml"}, `--format "xml": use table, json or csv`},
		{"bad share", []string{"--fail-if-share-above", "150%"}, "give a share between 0 and 1"},
		{"template without trace", []string{"--view", "detail", "--trace-url", "https://x/{service}"}, "has no {trace_id}"},
		{"template placeholder", []string{"--view", "detail", "--trace-url", "https://x/{traceid}"}, "unknown placeholder {traceid}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append(base, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestAuditFollowsItsOwnSuggestion: the window an empty answer suggests
// holds the audit rows the database has.
func TestAuditFollowsItsOwnSuggestion(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	_, _, err := runCLI(t, "audit", "--dsn", dsn, "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-02T00:00:00Z")
	require.Error(t, err)
	_, suggestion, ok := strings.Cut(err.Error(), "try ")
	require.True(t, ok, "no suggestion in %q", err)
	suggestion, _, _ = strings.Cut(suggestion, ",")
	out, stderr, err := runCLI(t, append([]string{"audit", "--dsn", dsn}, strings.Fields(suggestion)...)...)
	require.NoError(t, err, stderr)
	assert.NotContains(t, out, "none:", "the suggested window %q holds the rows", suggestion)
	assert.Contains(t, out, "checkout")
}

// TestAuditTraceURL: placeholders are filled in and query-escaped.
func TestAuditTraceURL(t *testing.T) {
	link, err := parseTraceURL("https://g.example/explore?trace={trace_id}&svc={service}&at={time_ms}")
	require.NoError(t, err)
	got := link(&store.AuditRecord{TraceID: "0af7651916cd43dd8448eb211c80319c", Service: "shop & co",
		Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
	assert.Equal(t, "https://g.example/explore?trace=0af7651916cd43dd8448eb211c80319c&svc=shop+%26+co&at=1796083200000", got)
}

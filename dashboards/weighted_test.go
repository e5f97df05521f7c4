// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// TestWeightedRows: the panels read estimates of all traffic. Rows whose
// traces each stood for 10 (every <counter>_est ten times the count, audit
// weight 10) read as ten times rows of counted traces, ratios unchanged,
// the counts seen beside them unchanged; rows written before schema
// version 4 (estimates NULL) read as counted; trace_stats shows the
// traces counted and extrapolated and those set apart.
func TestWeightedRows(t *testing.T) {
	tests := []struct {
		name string
		// est is the SQL of every estimate column: NULL (a row from
		// before schema version 4) or a multiple of the count.
		est          string
		weight       float64
		extrapolated bool
		served, own  float64
		sampling     string
	}{
		{"written before the estimates", "NULL", 1, false, 10, 2, "counted"},
		{"counted", "1", 1, false, 10, 2, "counted"},
		{"each trace stands for 10", "10", 10, true, 100, 20, "extrapolated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dsn := pgtest.NewDatabase(t)
			st, err := store.OpenDSN(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			bucket := time.Now().UTC().Truncate(time.Minute)
			if err := st.EnsurePartitions(ctx, bucket, bucket); err != nil {
				t.Fatal(err)
			}
			conn := connect(t, ctx, dsn)
			x := func(col string) string {
				if tc.est == "NULL" {
					return "NULL"
				}
				return tc.est + " * " + col
			}
			extrapolated := "0"
			if tc.extrapolated {
				extrapolated = "served"
			}
			for _, sql := range []string{
				`INSERT INTO operation_stats (bucket, service, operation, served, failed, verdict_own, claims_correct, expected_claimed,
				   served_est, failed_est, verdict_own_est, claims_correct_est, expected_claimed_est, extrapolated)
				 SELECT $1, 'checkout', 'GET /w', served, 2, 2, 2, 2,
				   ` + x("served") + `, ` + x("2") + `, ` + x("2") + `, ` + x("2") + `, ` + x("2") + `, ` + extrapolated + `
				 FROM (SELECT 10 AS served) v`,
				`INSERT INTO coincidental_audit (time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason, weight)
				 VALUES ($1, '01', '02', 'checkout', 'GET /w', 'recs', 'GET /r', 'claimed', 'claimed', 'coincidental', ` + formatFloat(tc.weight) + `)`,
				`INSERT INTO trace_stats (bucket, traces, extrapolated, counted_failed, incomplete_missing_parent, incomplete_missing_callee, incomplete_inconsistent_sampling)
				 VALUES ($1, 16, 6, 2, 1, 2, 3)`,
			} {
				if _, err := conn.Exec(ctx, sql, bucket); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			r := panelRange{from: bucket.Add(-time.Hour), to: bucket.Add(time.Hour), interval: time.Minute}
			checked := map[string]bool{}
			for _, d := range loadDashboards(t) {
				vars := variablesFor(t, ctx, conn, d, scenario{}, r)
				for _, q := range queriesOf(d) {
					sql, err := interpolate(q.sql, vars, r)
					if err != nil {
						t.Fatal(err)
					}
					res, err := runAsGrafana(ctx, conn, sql)
					if err != nil {
						t.Fatalf("%s: %v\n%s", q, err, sql)
					}
					var want map[string]any
					switch q.panel {
					case "Failures by operation":
						want = map[string]any{"requests served": tc.served, "own": tc.own, "failures owned": 1.0,
							"requests seen": 10.0, "failed seen": 2.0, "sampling": tc.sampling}
					case "Coincidental errors by service and dependency":
						want = map[string]any{"coincidental errors": tc.weight, "audit entries": 1.0}
					case "Traces analysed":
						want = map[string]any{"traces": 16.0, "counted": 4.0, "extrapolated": 6.0, "extrapolated share": 0.6,
							"counted traces failed": 0.5, "incomplete: missing parent": 1.0, "incomplete: missing callee": 2.0,
							"incomplete: inconsistent sampling": 3.0}
					case "Claim accuracy per service and operation":
						want = map[string]any{"accuracy": 1.0}
					default:
						continue
					}
					checked[q.panel] = true
					if len(res.rows) != 1 {
						t.Fatalf("%s: %d rows, want 1: %v", q, len(res.rows), res.rows)
					}
					for col, w := range want {
						got := res.column(col)
						if len(got) != 1 {
							t.Errorf("%s: no column %q in %v", q, col, res.columns)
							continue
						}
						if s, ok := w.(string); ok {
							if got[0] != s {
								t.Errorf("%s: %s = %v, want %s", q, col, got[0], s)
							}
							continue
						}
						if f := float(t, got[0]); f < w.(float64)-1e-9 || f > w.(float64)+1e-9 {
							t.Errorf("%s: %s = %v, want %v", q, col, f, w)
						}
					}
				}
			}
			for _, panel := range []string{"Failures by operation", "Coincidental errors by service and dependency", "Traces analysed"} {
				if !checked[panel] {
					t.Errorf("no panel %q: the test checks what it no longer finds", panel)
				}
			}
		})
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/store/pgtest"
)

// planRecorder collects the plans auto_explain sends a pool's sessions.
type planRecorder struct {
	mu    sync.Mutex
	plans []string
}

func (r *planRecorder) onNotice(_ *pgconn.PgConn, n *pgconn.Notice) {
	if strings.Contains(n.Message, `"Plan"`) {
		r.mu.Lock()
		r.plans = append(r.plans, n.Message)
		r.mu.Unlock()
	}
}

// take returns the plans collected since the last call.
func (r *planRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.plans
	r.plans = nil
	return p
}

var indexName = regexp.MustCompile(`"Index Name": "([^"]+)"`)

// indexesIn returns the indexes the plans read, with each partition's
// index named as its parent's: edge_stats_p20261130_service_bucket_idx is
// edge_stats_service_bucket, edge_stats_p20261130_pkey edge_stats_pkey.
func indexesIn(plans []string) []string {
	partition := regexp.MustCompile(`^([a-z_]+)_p[0-9]{8}_(.+?)(?:_idx)?$`)
	var out []string
	for _, p := range plans {
		for _, m := range indexName.FindAllStringSubmatch(p, -1) {
			name := m[1]
			if pm := partition.FindStringSubmatch(name); pm != nil {
				name = pm[1] + "_" + pm[2]
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// fillRealistic writes testdata/realistic.sql's statistics of a mid-sized
// system into the migrated database at dsn.
func fillRealistic(t *testing.T, ctx context.Context, dsn string) {
	t.Helper()
	script, err := os.ReadFile("testdata/realistic.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	begin := time.Now()
	if _, err := conn.PgConn().Exec(ctx, string(script)).ReadAll(); err != nil {
		t.Fatalf("testdata/realistic.sql: %v", err)
	}
	t.Logf("testdata/realistic.sql took %v", time.Since(begin).Round(time.Millisecond))
}

// TestReadsOfOneServiceUseTheirIndexes runs the store's reads of one
// service on the statistics of a mid-sized system with generic plans
// forced — the plan a prepared statement settles on after a few
// executions, whatever the service asked for — and captures each
// statement's plan with auto_explain, nested ones (inside edge_model())
// included: each read must use the index that holds its service's rows.
// The control case runs the audit query as it was, one statement for one
// service and for all (an empty name), and shows that it does not.
func TestReadsOfOneServiceUseTheirIndexes(t *testing.T) {
	ctx := testContext(t)
	dsn := pgtest.NewDatabase(t)
	openStore(t, dsn, DefaultConfig()) // migrates
	fillRealistic(t, ctx, dsn)

	rec := new(planRecorder)
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	pcfg.ConnConfig.OnNotice = rec.onNotice
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_format = json;
SET auto_explain.log_level = notice`)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := New(pool, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	model := dependencyanalysis.DefaultConfig().EdgeModel
	now := time.Now()
	from, to := now.Add(-time.Hour), now.Add(time.Minute)

	for _, tc := range []struct {
		name string
		read func() error
		want []string // indexes the reads must use
		not  []string // indexes they must not
	}{
		{
			name: "Audit of one service",
			read: func() error {
				got, err := s.Audit(ctx, from, to, "svc-042", 50)
				if err == nil && len(got) == 0 {
					t.Error("Audit(svc-042) found nothing")
				}
				return err
			},
			want: []string{"coincidental_audit_service_time"},
		},
		{
			name: "EdgesFor one service",
			read: func() error {
				got, err := s.EdgesFor(ctx, "svc-042", now.Add(-ModelWindow(model.HalfLife)), model.HalfLife, model)
				if err == nil && (len(got) != 8 || len(got[0].PeerAddresses) != 1) {
					t.Errorf("EdgesFor(svc-042): %d edges, want 8, each with its address", len(got))
				}
				return err
			},
			want: []string{"address_stats_service_bucket", "edge_stats_service_bucket"},
		},
		{
			name: "the audit query as it was (control)",
			read: func() error {
				rows, err := pool.Query(ctx, `
SELECT time, trace_id FROM coincidental_audit
WHERE time >= $1 AND time < $2 AND ($3 = '' OR service = $3)
ORDER BY time DESC LIMIT $4`, from, to, "svc-042", 50)
				if err != nil {
					return err
				}
				rows.Close()
				return rows.Err()
			},
			not: []string{"coincidental_audit_service_time"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.take()
			// More than five runs: past them a plan_cache_mode of auto
			// would choose the generic plan too.
			for range 6 {
				if err := tc.read(); err != nil {
					t.Fatal(err)
				}
			}
			plans := rec.take()
			if len(plans) == 0 {
				t.Fatal("auto_explain sent no plans")
			}
			used := indexesIn(plans)
			t.Logf("indexes used: %v", used)
			for _, idx := range tc.want {
				if !slices.Contains(used, idx) {
					t.Errorf("the plans use %v, not %s:\n%s", used, idx, plans[len(plans)-1])
				}
			}
			for _, idx := range tc.not {
				if slices.Contains(used, idx) {
					t.Errorf("the plans use %s: %v", idx, used)
				}
			}
		})
	}
}

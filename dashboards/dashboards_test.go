// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	"github.com/errorownership/errorownership/dashboards/internal/simtest"
	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

func TestMain(m *testing.M) {
	defer stopCollector()
	pgtest.Main(m)
}

// TestCommittedDashboardsAreGenerated regenerates the dashboards and
// compares them with json/, file by file.
func TestCommittedDashboardsAreGenerated(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range all {
		want = append(want, d.File)
		gen, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("json", d.File))
		if err != nil {
			t.Errorf("%v: run make dashboards", err)
			continue
		}
		if !bytes.Equal(gen, committed) {
			t.Errorf("dashboards/json/%s differs from what the generator writes: run make dashboards and commit the result", d.File)
		}
	}
	files, _ := filepath.Glob(filepath.Join("json", "*.json"))
	for _, f := range files {
		if !slices.Contains(want, filepath.Base(f)) {
			t.Errorf("%s is not generated: remove it", f)
		}
	}
}

// The dashboards as committed, read as Grafana reads them.
type dashboardJSON struct {
	UID        string   `json:"uid"`
	Title      string   `json:"title"`
	Tags       []string `json:"tags"`
	Templating struct {
		List []struct {
			Type        string `json:"type"`
			Name        string `json:"name"`
			Description string `json:"description"`
			Query       any    `json:"query"`
			Multi       bool   `json:"multi"`
			IncludeAll  bool   `json:"includeAll"`
			AllValue    string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panelJSON `json:"panels"`
}

type panelJSON struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  struct {
		Type string `json:"type"`
	} `json:"datasource"`
	Targets []struct {
		RefID      string `json:"refId"`
		RawSQL     string `json:"rawSql"`
		Expr       string `json:"expr"`
		Instant    bool   `json:"instant"`
		Range      bool   `json:"range"`
		Format     string `json:"format"`
		QueryType  string `json:"queryType"`
		Datasource struct {
			Type string `json:"type"`
		} `json:"datasource"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds struct {
				Steps []any `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// loadDashboards reads the dashboards on the store, those the SQL tests
// run.
func loadDashboards(t *testing.T) []dashboardJSON {
	t.Helper()
	var out []dashboardJSON
	for _, d := range loadAllDashboards(t) {
		if !slices.Contains(d.Tags, PrometheusType) {
			out = append(out, d)
		}
	}
	if len(out) != 5 {
		t.Fatalf("%d dashboards on the store, want five", len(out))
	}
	return out
}

// loadAllDashboards reads every committed dashboard, the store's and
// Prometheus'.
func loadAllDashboards(t *testing.T) []dashboardJSON {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("json", "*.json"))
	if err != nil || len(files) != 9 {
		t.Fatalf("json/: %v, %v; want the five dashboards on the store and four on Prometheus", files, err)
	}
	var out []dashboardJSON
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // G304: a committed dashboard the test globbed from json/
		if err != nil {
			t.Fatal(err)
		}
		var d dashboardJSON
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, d)
	}
	return out
}

// TestEveryPanelIsExplained: a description, a unit and thresholds on every
// panel, a description on every variable, and every query aimed at one of
// the data sources, as the panel says: on the store, PostgreSQL or the
// plugin; else Prometheus, instant tables or range series.
func TestEveryPanelIsExplained(t *testing.T) {
	for _, d := range loadAllDashboards(t) {
		for _, v := range d.Templating.List {
			if v.Description == "" {
				t.Errorf("%s: variable %s has no description", d.Title, v.Name)
			}
		}
		if len(d.Panels) < 3 {
			t.Errorf("%s has %d panels", d.Title, len(d.Panels))
		}
		for _, p := range d.Panels {
			name := d.Title + " / " + p.Title
			if len(p.Description) < 40 {
				t.Errorf("%s: description %q says too little", name, p.Description)
			}
			if p.FieldConfig.Defaults.Unit == "" || len(p.FieldConfig.Defaults.Thresholds.Steps) == 0 {
				t.Errorf("%s: unit %q, %d threshold steps", name, p.FieldConfig.Defaults.Unit, len(p.FieldConfig.Defaults.Thresholds.Steps))
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s has no query", name)
			}
			for _, q := range p.Targets {
				switch q.Datasource.Type {
				case PostgresType:
					if q.RawSQL == "" || (q.Format != FormatTable && q.Format != FormatTimeSeries) {
						t.Errorf("%s %s: SQL %q, format %q", name, q.RefID, q.RawSQL, q.Format)
					}
				case plugin.ID:
					if !slices.Contains([]string{plugin.QueryServiceGraph, plugin.QueryEdgeModel, plugin.QueryHints}, q.QueryType) {
						t.Errorf("%s %s: query type %q", name, q.RefID, q.QueryType)
					}
				case PrometheusType:
					table := q.Instant && !q.Range && q.Format == "table" && p.Type != "timeseries"
					series := q.Range && !q.Instant && p.Type == "timeseries"
					if q.Expr == "" || (!table && !series) {
						t.Errorf("%s %s: expr %q, instant %v, range %v, format %q on a %s panel", name, q.RefID, q.Expr, q.Instant, q.Range, q.Format, p.Type)
					}
				default:
					t.Errorf("%s %s: data source %q", name, q.RefID, q.Datasource.Type)
				}
				if q.Datasource.Type != p.Datasource.Type {
					t.Errorf("%s %s: query on %s, panel on %s", name, q.RefID, q.Datasource.Type, p.Datasource.Type)
				}
			}
		}
	}
}

// dashQuery is one SQL query of a dashboard: a panel's, or a variable's.
type dashQuery struct {
	dashboard, panel, refID, sql string
}

func (q dashQuery) String() string { return q.dashboard + " / " + q.panel + " " + q.refID }

// queriesOf lists a dashboard's SQL: its variables', then its panels'.
func queriesOf(d dashboardJSON) []dashQuery {
	var out []dashQuery
	for _, v := range d.Templating.List {
		if s, ok := v.Query.(string); ok && v.Type == "query" {
			out = append(out, dashQuery{d.Title, "variable " + v.Name, "", s})
		}
	}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			if q.RawSQL != "" {
				out = append(out, dashQuery{d.Title, p.Title, q.RefID, q.RawSQL})
			}
		}
	}
	return out
}

// scenario is a selection of every variable of the dashboards, by name.
type scenario struct {
	name     string
	selected map[string][]string
	// noCustomAll makes "All" every option, as for a variable without the
	// custom all value.
	noCustomAll bool
}

// variablesFor resolves a dashboard's variables under a scenario, running
// the query variables in order as Grafana does (a variable's options
// depend on those before it).
func variablesFor(t *testing.T, ctx context.Context, conn *pgx.Conn, d dashboardJSON, sc scenario, r panelRange) map[string]*variable {
	t.Helper()
	vars, err := resolveVariables(ctx, conn, d, sc, r)
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

// resolveVariables is variablesFor, returning the error of a variable's
// query.
func resolveVariables(ctx context.Context, conn *pgx.Conn, d dashboardJSON, sc scenario, r panelRange) (map[string]*variable, error) {
	vars := map[string]*variable{}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			continue
		}
		vv := &variable{name: v.Name, multi: v.Multi, includeAll: v.IncludeAll, allValue: v.AllValue, textbox: v.Type == "textbox"}
		if sc.noCustomAll {
			vv.allValue = ""
		}
		if vv.textbox {
			vv.selected = []string{v.Query.(string)}
		} else {
			vv.query = v.Query.(string)
			sql, err := interpolate(vv.query, vars, r)
			if err != nil {
				return nil, fmt.Errorf("%s: variable %s: %w", d.Title, v.Name, err)
			}
			res, err := runAsGrafana(ctx, conn, sql)
			if err != nil {
				return nil, fmt.Errorf("%s: variable %s: %w\n%s", d.Title, v.Name, err, sql)
			}
			for _, row := range res.rows {
				vv.options = append(vv.options, fmt.Sprint(row[0]))
			}
			switch {
			case v.IncludeAll:
				vv.selected = []string{allSelected}
			case len(vv.options) > 0:
				vv.selected = vv.options[:1] // Grafana's first option
			}
		}
		if s, ok := sc.selected[v.Name]; ok {
			vv.selected = s
			if !vv.multi && len(s) > 1 {
				vv.selected = s[:1] // what a single-valued variable can hold
			}
		}
		vars[v.Name] = vv
	}
	return vars, nil
}

// The store the tests share, filled by a short simulator run.
var (
	simOnce sync.Once
	sim     *simtest.Store
	simErr  error
)

// simulated fills a database of the shared cluster with a short simulator
// run: real services, the real processor, PostgreSQL.
func simulated(t *testing.T) *simtest.Store {
	t.Helper()
	pgtest.RequireBinaries(t)
	simOnce.Do(func() {
		c := pgtest.Shared(t)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		dsn, err := c.CreateDatabase(ctx, "dashboards_simulated")
		if err != nil {
			simErr = err
			return
		}
		sim, simErr = simtest.Run(ctx, dsn)
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	return sim
}

// TestMain's cluster outlives the collector: stop it when the tests end.
func stopCollector() {
	if sim != nil {
		_ = sim.Collector.Shutdown(context.Background())
	}
}

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// float reads a numeric column's value.
func float(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case int16:
		return float64(x)
	case pgtype.Numeric:
		f, err := x.Float64Value()
		if err != nil {
			t.Fatal(err)
		}
		return f.Float64
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}

// TestPanelsOnASimulatedStore runs every variable's and every panel's SQL,
// expanded as Grafana expands it, against PostgreSQL filled by a short
// simulator run, under several selections of the variables: each runs,
// each panel returns rows, and the figures are the demo's.
func TestPanelsOnASimulatedStore(t *testing.T) {
	sim := simulated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connect(t, ctx, sim.DSN)
	dashboards := loadDashboards(t)
	r := panelRange{from: time.Now().Add(-time.Hour), to: time.Now().Add(5 * time.Minute), interval: time.Minute}

	// The figures the demo prints, read from the store as it reads them.
	sc := store.DefaultConfig()
	sc.DSN = configopaque.String(sim.DSN)
	st, err := store.Open(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	from, to := sim.Begin.Add(-2*time.Minute), time.Now().Add(2*time.Minute)
	retryOp := "GET " + simtest.RetryRoute
	served, err := st.ServedPerRoot(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	demoServed := make([]float64, len(simulation.ChainServices))
	for _, row := range served {
		if i := slices.Index(simulation.ChainServices, row.Service); i >= 0 && row.RootOperation == retryOp {
			demoServed[i] += row.PerRoot
		}
	}
	roots, err := st.Roots(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	demoRadius := -1
	for _, root := range roots {
		if root.RootOperation == retryOp {
			demoRadius = root.StormRadiusMax
		}
	}
	audit, err := st.Audit(ctx, from, to, "checkout", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	audited := audit[0].TraceID

	scenarios := []scenario{
		{name: "All, the custom all value"},
		{name: "All, every option listed", noCustomAll: true},
		{name: "several values", selected: map[string][]string{
			"service": {"a", "checkout", "d"}, "operation": {retryOp, "GET " + simtest.CheckoutRoute}, "dependency": {"recommendations", "payments"}}},
		{name: "one value", selected: map[string][]string{"service": {"checkout"}, "dependency": {"recommendations"}}},
		{name: "the chain of docs/design.md §1 under retry every hop", selected: map[string][]string{"operation": {retryOp}}},
		{name: "one trace, Tempo link", selected: map[string][]string{"trace_id": {" " + strings.ToUpper(audited) + " "},
			"trace_url": {`/explore?schemaVersion=1&panes={"a":{"datasource":"tempo","queries":[{"refId":"A","queryType":"traceql","query":"{trace_id}"}]}}`}}},
		{name: "lower rate interval", selected: map[string][]string{"service": {"d"}}},
	}
	rows := map[string]int{} // per query, over every scenario
	results := map[string]map[string]*result{}
	for _, sc := range scenarios {
		results[sc.name] = map[string]*result{}
		pr := r
		if sc.name == "lower rate interval" {
			pr.interval = 5 * time.Minute
		}
		for _, d := range dashboards {
			vars := variablesFor(t, ctx, conn, d, sc, pr)
			for _, q := range queriesOf(d) {
				sql, err := interpolate(q.sql, vars, pr)
				if err != nil {
					t.Fatalf("%s, %s: %v", q, sc.name, err)
				}
				res, err := runAsGrafana(ctx, conn, sql)
				if err != nil {
					t.Fatalf("%s, %s: %v\n%s", q, sc.name, err, sql)
				}
				rows[q.String()] += len(res.rows)
				results[sc.name][q.String()] = res
			}
		}
	}
	for _, d := range dashboards {
		for _, q := range queriesOf(d) {
			if rows[q.String()] == 0 {
				t.Errorf("%s returned no rows in any scenario", q)
			}
		}
	}
	get := func(sc, q string) *result {
		t.Helper()
		res := results[sc][q]
		if res == nil {
			t.Fatalf("no query %q", q)
		}
		return res
	}

	t.Run("served per root request is the demo's 1, 2, 4, 8, 8, 8, 8", func(t *testing.T) {
		res := get("the chain of docs/design.md §1 under retry every hop", "Retry amplification / Requests served per root request, by depth A")
		got := map[string]float64{}
		depth := map[string]int{}
		for _, row := range res.rows {
			if row[1] != retryOp {
				t.Fatalf("root operation %v chosen, %v shown", retryOp, row[1])
			}
			svc := row[3].(string)
			got[svc] = float(t, row[6])
			depth[svc] = int(float(t, row[2]))
		}
		for i, svc := range simulation.ChainServices {
			want, demoGot := simulation.ChainTheory[simulation.RetryEveryHop][i], demoServed[i]
			if math.Abs(got[svc]-demoGot) > 1e-9 || math.Abs(got[svc]-want) > 0.03*want || depth[svc] != i {
				t.Errorf("%s at depth %d: %.4f Ƞ; the demo's store %.4f, theory %.0f", svc, depth[svc], got[svc], demoGot, want)
			}
		}
	})
	t.Run("storm radius", func(t *testing.T) {
		res := get("All, the custom all value", "Retry amplification / Retry-storm radius per root operation A")
		for _, row := range res.rows {
			if row[1] == retryOp && (float(t, row[3]) != float64(demoRadius) || demoRadius != 3) {
				t.Errorf("radius max %v, the demo's %d, want 3", row[3], demoRadius)
			}
		}
	})
	t.Run("several values and All listed agree with All", func(t *testing.T) {
		a := get("All, the custom all value", "Error ownership / Failed requests by verdict, per service A")
		l := get("All, every option listed", "Error ownership / Failed requests by verdict, per service A")
		if fmt.Sprint(a.rows) != fmt.Sprint(l.rows) {
			t.Errorf("All as '__all' %v\nAll listed %v", a.rows, l.rows)
		}
		s := get("several values", "Error ownership / Failed requests by verdict, per service A")
		var names []string
		for _, row := range s.rows {
			names = append(names, row[0].(string))
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"a", "checkout", "d"}) {
			t.Errorf("services %v, want a, checkout, d", names)
		}
	})
	t.Run("services that never claim", func(t *testing.T) {
		// Under retry every hop nobody runs the hooks; under ownership every
		// service does, so over every operation nobody never claims.
		res := get("the chain of docs/design.md §1 under retry every hop", "Claim accuracy / Services that never claim (no hooks) A")
		var names []string
		for _, row := range res.rows {
			names = append(names, row[0].(string))
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"a", "b", "c", "d"}) {
			// e, f and g do not fail: D's failure never reaches below it.
			t.Errorf("services %v, want a, b, c, d", names)
		}
		if res := get("All, the custom all value", "Claim accuracy / Services that never claim (no hooks) A"); len(res.rows) != 0 {
			t.Errorf("rows %v, want none", res.rows)
		}
	})
	t.Run("the audit log links each row to its trace", func(t *testing.T) {
		res := get("All, the custom all value", "Coincidental errors / Coincidental errors to audit A")
		ids, links := res.column("trace_id"), res.column("trace_link")
		if len(ids) == 0 {
			t.Fatal("no audit entries")
		}
		for i := range ids {
			if links[i] != strings.ReplaceAll(DefaultTraceURL, TraceURLPlaceholder, ids[i].(string)) {
				t.Fatalf("link %v for trace %v", links[i], ids[i])
			}
		}
		res = get("one trace, Tempo link", "Coincidental errors / Coincidental errors to audit A")
		ids, links = res.column("trace_id"), res.column("trace_link")
		want := `/explore?schemaVersion=1&panes={"a":{"datasource":"tempo","queries":[{"refId":"A","queryType":"traceql","query":"` + audited + `"}]}}`
		if len(ids) == 0 || links[0] != want {
			t.Fatalf("trace %s: rows %v, link %v", audited, ids, links)
		}
		for _, id := range ids {
			if id != audited {
				t.Fatalf("trace filter %s let %s through", audited, id)
			}
		}
	})
	t.Run("the checkout audit is the demo's", func(t *testing.T) {
		res := get("one value", "Coincidental errors / Coincidental errors by service and dependency A")
		var n float64
		for _, row := range res.rows {
			n += float(t, row[2])
		}
		if int(n) != len(audit) || n == 0 {
			t.Errorf("%v coincidental errors of checkout with recommendations, store.Audit has %d", n, len(audit))
		}
	})
}

// The indexes a read of some services must use, by the table it reads.
var serviceIndex = map[string]string{
	"operation_stats":    "operation_stats_service_bucket",
	"claim_accuracy":     "claim_accuracy_service_bucket",
	"edge_stats":         "edge_stats_service_bucket",
	"depth_stats":        "depth_stats_root_service_bucket",
	"root_stats":         "root_stats_root_service_bucket",
	"coincidental_audit": "coincidental_audit_service_time",
}

var (
	fromTable = regexp.MustCompile(`FROM ([a-z_]+)`)
	indexName = regexp.MustCompile(`"Index Name": "([^"]+)"`)
	partition = regexp.MustCompile(`^([a-z_]+)_p[0-9]{8}_(.+?)(?:_idx)?$`)
)

// indexesIn returns the indexes a JSON plan reads, partitions' named as
// their parent's.
func indexesIn(plan string) []string {
	var out []string
	for _, m := range indexName.FindAllStringSubmatch(plan, -1) {
		name := m[1]
		if pm := partition.FindStringSubmatch(name); pm != nil {
			name = pm[1] + "_" + pm[2]
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// TestPanelsReadByIndex explains every query that filters by service on
// the statistics of a mid-sized system (store/testdata/realistic.sql), with
// one service chosen, and checks that each table is read through the index
// that leads with the service; and the audit log by its dependency and by
// trace ID.
func TestPanelsReadByIndex(t *testing.T) {
	pgtest.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	sc := store.DefaultConfig()
	sc.DSN = configopaque.String(dsn)
	st, err := store.Open(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, ctx, dsn)
	script, err := os.ReadFile(filepath.Join("..", "store", "testdata", "realistic.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PgConn().Exec(ctx, string(script)).ReadAll(); err != nil {
		t.Fatal(err)
	}
	var trace string
	if err := conn.QueryRow(ctx, `SELECT trace_id FROM coincidental_audit LIMIT 1`).Scan(&trace); err != nil {
		t.Fatal(err)
	}
	r := panelRange{from: time.Now().Add(-time.Hour), to: time.Now(), interval: time.Minute}
	explain := func(q dashQuery, vars map[string]*variable) []string {
		t.Helper()
		sql, err := interpolate(q.sql, vars, r)
		if err != nil {
			t.Fatal(err)
		}
		var plan string
		if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
			t.Fatalf("%s: %v\n%s", q, err, sql)
		}
		return indexesIn(plan)
	}
	checked := 0
	for _, d := range loadDashboards(t) {
		oneService := variablesFor(t, ctx, conn, d, scenario{selected: map[string][]string{"service": {"svc-042"}}}, r)
		for _, q := range queriesOf(d) {
			if !strings.Contains(q.sql, "service IN ($service)") && !strings.Contains(q.sql, "service = '${service}'") {
				continue
			}
			used := explain(q, oneService)
			for _, m := range fromTable.FindAllStringSubmatch(q.sql, -1) {
				want, ok := serviceIndex[m[1]]
				if !ok {
					continue // a CTE's name
				}
				if !slices.Contains(used, want) {
					t.Errorf("%s reads %s through %v, not %s", q, m[1], used, want)
				}
				checked++
			}
		}
		if d.Title != "Coincidental errors" {
			continue
		}
		for _, tc := range []struct {
			selected map[string][]string
			want     string
		}{
			{map[string][]string{"dependency": {"svc-007"}}, "coincidental_audit_peer_service_time"},
			{map[string][]string{"trace_id": {trace}}, "coincidental_audit_trace_id"},
		} {
			vars := variablesFor(t, ctx, conn, d, scenario{selected: tc.selected}, r)
			for _, q := range queriesOf(d) {
				if !strings.Contains(q.sql, "${trace_id}") {
					continue
				}
				if used := explain(q, vars); !slices.Contains(used, tc.want) {
					t.Errorf("%s with %v reads %v, not %s", q, tc.selected, used, tc.want)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d reads checked", checked)
	}
}

// hostile are variable values meant to break out of the SQL.
var hostile = []string{
	`x' OR '1'='1`,
	`'); DELETE FROM operation_stats; --`,
	`checkout'--`,
	`\'; SELECT pg_sleep(5); --`,
	`' UNION SELECT version(), 1, 1, 1 --`,
	`$$; DROP TABLE edge_stats; $$`,
	`服务 ünïcødé 🚀`,
	`$__timeFilter(bucket) OR true --`,
}

// TestHostileVariableValues gives every variable values meant to break out
// of the SQL, and a service whose real name is one, and runs every query:
// none may see other services' rows or change the store; a value that
// spells a Grafana macro may at worst make the query fail, as it does in
// Grafana.
func TestHostileVariableValues(t *testing.T) {
	sim := simulated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connect(t, ctx, sim.DSN)
	r := panelRange{from: time.Now().Add(-time.Hour), to: time.Now().Add(5 * time.Minute), interval: time.Minute}
	const named = `o'brien"); DROP TABLE operation_stats; -- ☃ 服务`
	bucket := time.Now().UTC().Truncate(time.Minute)
	for _, sql := range []string{
		`INSERT INTO operation_stats (bucket, service, operation, served, failed, verdict_own, claims_correct, expected_claimed)
		 VALUES ($1, $2, 'GET /h', 10, 2, 2, 2, 2) ON CONFLICT DO NOTHING`,
		`INSERT INTO claim_accuracy (bucket, service, operation, claim_sent, verdict, requests)
		 VALUES ($1, $2, 'GET /h', 'missing', 'own', 2) ON CONFLICT DO NOTHING`,
		`INSERT INTO edge_stats (bucket, service, operation, peer_service, peer_operation, calls, failed_calls, retries)
		 VALUES ($1, $2, 'GET /h', 'checkout', 'GET /checkout', 10, 1, 1) ON CONFLICT DO NOTHING`,
		`INSERT INTO coincidental_audit (time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason)
		 VALUES ($1, 'ffffffffffffffffffffffffffffffff', 'ffffffffffffffff', $2, 'GET /h', $2, 'GET /h', 'claimed', 'claimed', 'coincidental')`,
	} {
		if _, err := conn.Exec(ctx, sql, bucket, named); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() string {
		var s string
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM operation_stats) || ' ' || (SELECT count(*) FROM edge_stats) || ' ' ||
			(SELECT count(*) FROM claim_accuracy) || ' ' || (SELECT count(*) FROM coincidental_audit)`).Scan(&s); err != nil {
			t.Fatalf("the store after hostile values: %v", err)
		}
		return s
	}
	before := counts()
	for _, value := range append(slices.Clone(hostile), named) {
		sc := scenario{name: value, selected: map[string][]string{
			"service": {value}, "operation": {value}, "dependency": {value}, "trace_id": {value},
			"trace_url": {value + "{trace_id}"},
		}}
		for _, d := range loadDashboards(t) {
			vars, err := resolveVariables(ctx, conn, d, sc, r)
			if err != nil {
				if !strings.Contains(value, "$__") {
					t.Errorf("%q: %v", value, err)
				}
				continue
			}
			for _, q := range queriesOf(d) {
				sql, err := interpolate(q.sql, vars, r)
				if err == nil {
					var res *result
					if res, err = runAsGrafana(ctx, conn, sql); err == nil && filtersByService(q) {
						checkHostileRows(t, q, value, named, res)
					}
				}
				if err != nil && !strings.Contains(value, "$__") {
					t.Errorf("%s with %q: %v\n%s", q, value, err, sql)
				}
			}
		}
		if after := counts(); after != before {
			t.Fatalf("after %q the store's row counts are %s, were %s", value, after, before)
		}
	}
	// The named service's rows are found through its name.
	d := loadDashboards(t)
	for _, dash := range d {
		if dash.Title != "Claim accuracy" {
			continue
		}
		vars := variablesFor(t, ctx, conn, dash, scenario{selected: map[string][]string{"service": {named}}}, r)
		for _, q := range queriesOf(dash) {
			if q.panel != "Services that never claim (no hooks)" {
				continue
			}
			sql, _ := interpolate(q.sql, vars, r)
			res, err := runAsGrafana(ctx, conn, sql)
			if err != nil || len(res.rows) != 1 || res.rows[0][0] != named {
				t.Fatalf("never claim, service %q: %v, %v", named, res, err)
			}
		}
	}
}

// filtersByService reports whether a query reads the service variable.
func filtersByService(q dashQuery) bool {
	return strings.Contains(q.sql, "($service)") || strings.Contains(q.sql, "'${service}'")
}

// checkHostileRows: with every variable set to value, a query may only
// return rows of the service that is really named so.
func checkHostileRows(t *testing.T, q dashQuery, value, named string, res *result) {
	t.Helper()
	for _, col := range []string{"service", "root service", "dependency"} {
		for _, v := range res.column(col) {
			if v != value || value != named {
				t.Errorf("%s with %q returned %s %q", q, value, col, v)
				return
			}
		}
	}
	for _, v := range res.column("trace_link") {
		if !strings.HasPrefix(v.(string), value) {
			t.Errorf("%s: trace link %q is not the URL given, %q", q, v, value)
		}
	}
}

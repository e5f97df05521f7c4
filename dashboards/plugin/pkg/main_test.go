// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/data"
	"github.com/grafana/grafana-plugin-sdk-go/genproto/pluginv2"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	"github.com/errorownership/errorownership/dashboards/internal/simtest"
	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The handshake Grafana's plugin client (github.com/hashicorp/go-plugin)
// makes: the magic cookie of backend plugins, the protocol version Grafana
// speaks (grafana-plugin-sdk-go backend/grpcplugin) and the port range it
// offers a plugin listening on TCP.
var handshakeEnv = []string{
	"grafana_plugin_type=datasource",
	"PLUGIN_PROTOCOL_VERSIONS=2",
	"PLUGIN_MIN_PORT=10000",
	"PLUGIN_MAX_PORT=25000",
}

// buildPlugin builds the backend as make plugin does, named as Grafana
// looks for it: plugin.json's executable, _<os>_<arch>.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), fmt.Sprintf("gpx_errorownership_%s_%s", runtime.GOOS, runtime.GOARCH))
	// go test puts its own go first on the PATH of the tests it runs.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(goTool, "build", "-o", bin, ".") //nolint:gosec // G204: the go command, building this package into t.TempDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// pluginProcess is the plugin binary, started as Grafana starts it.
type pluginProcess struct {
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	exited chan error

	mu     sync.Mutex
	stderr bytes.Buffer
}

func (p *pluginProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

// log returns what the plugin wrote to its standard error, its log.
func (p *pluginProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startPlugin runs the binary with the handshake environment, reads the
// address it announces on standard output (core protocol version, app
// protocol version, network, address, protocol) and connects to it.
func startPlugin(t *testing.T, bin string) *pluginProcess {
	t.Helper()
	p := &pluginProcess{exited: make(chan error, 1)}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), handshakeEnv...)
	p.cmd.Stderr = p
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			t.Logf("plugin killed at the end of the test: %v", <-p.exited)
		}
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(time.Minute):
		t.Fatalf("the plugin announced no address within a minute; its log:\n%s", p.log())
	}
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 5 || parts[0] != "1" || parts[1] != "2" || parts[4] != "grpc" {
		t.Fatalf("handshake line %q, want 1|2|NETWORK|ADDRESS|grpc; log:\n%s", line, p.log())
	}
	target := parts[3]
	switch parts[2] {
	case "unix":
		target = "unix://" + target
	case "tcp":
		if _, _, err := net.SplitHostPort(target); err != nil {
			t.Fatalf("handshake address %q: %v", target, err)
		}
	default:
		t.Fatalf("handshake network %q, want unix or tcp", parts[2])
	}
	if p.conn, err = grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.conn.Close() })
	return p
}

// shutdown asks the plugin to stop as Grafana does, through go-plugin's
// controller service, and waits for it to exit.
func (p *pluginProcess) shutdown(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The controller's messages are empty, as emptypb.Empty is.
	_ = p.conn.Invoke(ctx, "/plugin.GRPCController/Shutdown", &emptypb.Empty{}, &emptypb.Empty{})
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("the plugin exited with %v; log:\n%s", err, p.log())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the plugin did not exit within 10s of Shutdown")
	}
}

// instance is a data source as Grafana passes it with every call.
func instance(id int64, jsonData string, secure map[string]string) *pluginv2.PluginContext {
	return &pluginv2.PluginContext{
		OrgId:    1,
		PluginId: plugin.ID,
		DataSourceInstanceSettings: &pluginv2.DataSourceInstanceSettings{
			Id: id, Uid: fmt.Sprintf("errorownership-%d", id), Name: fmt.Sprintf("errorownership %d", id), //nolint:staticcheck // SA1019: Grafana still sends the internal ID; the test passes what Grafana passes
			JsonData: []byte(jsonData), DecryptedSecureJsonData: secure, LastUpdatedMS: 1,
		},
	}
}

// storeJSON is the jsonData of a data source on dsn, with the hints the
// simulation's collector announces.
func storeJSON(dsn string) string {
	b, _ := json.Marshal(map[string]any{
		"store": map[string]string{"dsn": dsn},
		"hints": map[string]any{"ttl": "1s", "retry_budget": map[string]float64{"ratio": simulation.BudgetRatio, "min_retries_per_second": 0}},
	})
	return string(b)
}

// simulate fills a database of the shared cluster with a short simulator
// run, the collector that wrote it still running.
func simulate(t *testing.T, ctx context.Context) *simtest.Store {
	t.Helper()
	sim, err := simtest.Run(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Collector.Shutdown(context.Background()) })
	return sim
}

// client speaks the plugin protocol to a running plugin.
type client struct {
	t    *testing.T
	ctx  context.Context
	data pluginv2.DataClient
	diag pluginv2.DiagnosticsClient
	res  pluginv2.ResourceClient
	from time.Time
}

func (c *client) health(pc *pluginv2.PluginContext) *pluginv2.CheckHealthResponse {
	c.t.Helper()
	r, err := c.diag.CheckHealth(c.ctx, &pluginv2.CheckHealthRequest{PluginContext: pc})
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// query runs one query and returns its frames, or its error.
func (c *client) query(pc *pluginv2.PluginContext, q plugin.Query) (data.Frames, string) {
	c.t.Helper()
	body, _ := json.Marshal(q)
	r, err := c.data.QueryData(c.ctx, &pluginv2.QueryDataRequest{PluginContext: pc, Queries: []*pluginv2.DataQuery{{
		RefId: "A", QueryType: q.QueryType, Json: body, IntervalMS: 60_000, MaxDataPoints: 1000,
		TimeRange: &pluginv2.TimeRange{FromEpochMS: c.from.UnixMilli(), ToEpochMS: time.Now().Add(time.Minute).UnixMilli()},
	}}})
	if err != nil {
		c.t.Fatal(err)
	}
	resp := r.Responses["A"]
	if resp == nil {
		c.t.Fatalf("no response for A: %v", r.Responses)
	}
	if resp.Error != "" {
		return nil, resp.Error
	}
	frames, err := data.UnmarshalArrowFrames(resp.Frames)
	if err != nil {
		c.t.Fatal(err)
	}
	return frames, ""
}

// column returns a frame's field by name, failing without it.
func column(t *testing.T, f *data.Frame, name string) *data.Field {
	t.Helper()
	field, i := f.FieldByName(name)
	if i < 0 {
		t.Fatalf("frame %q has no field %q", f.Name, name)
	}
	return field
}

// row returns the row whose string field key holds value, or -1.
func row(t *testing.T, f *data.Frame, key, value string) int {
	t.Helper()
	field := column(t, f, key)
	for i := range field.Len() {
		if field.At(i).(string) == value {
			return i
		}
	}
	return -1
}

func fieldNames(f *data.Frame) []string {
	var names []string
	for _, field := range f.Fields {
		names = append(names, field.Name)
	}
	return names
}

// TestPluginAsGrafanaRunsIt builds the backend, starts it as Grafana does
// and speaks Grafana's plugin protocol to it over gRPC: the health check,
// every query type against PostgreSQL filled by a short simulator run
// through the real processor, the query editor's list of services, hostile
// service names, and settings that cannot work.
func TestPluginAsGrafanaRunsIt(t *testing.T) {
	pgtest.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildPlugin(t)
	sim := simulate(t, ctx)
	p := startPlugin(t, bin)
	c := &client{t: t, ctx: ctx, data: pluginv2.NewDataClient(p.conn), diag: pluginv2.NewDiagnosticsClient(p.conn),
		res: pluginv2.NewResourceClient(p.conn), from: sim.Begin.Add(-2 * time.Minute)}
	// The cluster trusts local connections; the password is given as
	// Grafana would, to show that it never appears in the plugin's log.
	const password = "pa55-never-logged" //nolint:gosec // G101: a made-up password, to show it never reaches the log
	ds := instance(1, storeJSON(sim.DSN), map[string]string{"password": password})

	t.Run("CheckHealth", func(t *testing.T) {
		r := c.health(ds)
		want := fmt.Sprintf("schema version %d.", store.SchemaVersionWanted())
		if r.Status != pluginv2.CheckHealthResponse_OK || !strings.Contains(r.Message, want) {
			t.Fatalf("health %v %q, want OK saying %q", r.Status, r.Message, want)
		}
		var details map[string]int64
		if err := json.Unmarshal(r.JsonDetails, &details); err != nil || details["schemaVersion"] != store.SchemaVersionWanted() {
			t.Fatalf("details %s: %v", r.JsonDetails, err)
		}
	})

	t.Run("serviceGraph", func(t *testing.T) {
		frames, errMsg := c.query(ds, plugin.Query{QueryType: plugin.QueryServiceGraph})
		if errMsg != "" || len(frames) != 2 {
			t.Fatalf("frames %v, error %q", frames, errMsg)
		}
		nodes, edges := frames[0], frames[1]
		wantNodes := []string{"id", "title", "subtitle", "mainstat", "secondarystat", "arc__ok", "arc__owned",
			"arc__propagated", "arc__unseen", "nodeRadius", "detail__served", "detail__failed", "detail__own",
			"detail__coincidental", "detail__propagated", "detail__retries_received", "detail__retries_sent", "detail__suppressed"}
		wantEdges := []string{"id", "source", "target", "mainstat", "secondarystat", "thickness", "color", "strokeDasharray",
			"detail__mode", "detail__edges", "detail__calls", "detail__failed_calls", "detail__attempts", "detail__retries",
			"detail__suppressed_unclaimed", "detail__suppressed_budget"}
		if nodes.Name != "nodes" || !reflect.DeepEqual(fieldNames(nodes), wantNodes) {
			t.Fatalf("nodes frame %q: %v", nodes.Name, fieldNames(nodes))
		}
		if edges.Name != "edges" || !reflect.DeepEqual(fieldNames(edges), wantEdges) {
			t.Fatalf("edges frame %q: %v", edges.Name, fieldNames(edges))
		}
		for _, f := range frames {
			if f.Meta == nil || f.Meta.PreferredVisualization != data.VisTypeNodeGraph {
				t.Errorf("frame %q is not marked for the Node Graph: %+v", f.Name, f.Meta)
			}
		}
		ids := column(t, nodes, "id")
		var got []string
		for i := range ids.Len() {
			got = append(got, ids.At(i).(string))
		}
		want := []string{"a", "b", "c", "checkout", "d", "e", "f", "g", "payments", "recommendations"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("nodes %v, want %v", got, want)
		}
		for i := range ids.Len() {
			sum := 0.0
			for _, arc := range []string{"arc__ok", "arc__owned", "arc__propagated", "arc__unseen"} {
				sum += column(t, nodes, arc).At(i).(float64)
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("node %s: arcs add up to %v, want 1", got[i], sum)
			}
		}
		at := func(name, field string) any { return column(t, nodes, field).At(row(t, nodes, "id", name)) }
		// D fails on its own; A, B and C only pass its failure on.
		if at("d", "detail__own").(float64) == 0 || at("d", "arc__owned").(float64) == 0 || at("d", "detail__propagated").(float64) != 0 {
			t.Errorf("d: own %v, arc owned %v, propagated %v", at("d", "detail__own"), at("d", "arc__owned"), at("d", "detail__propagated"))
		}
		if at("a", "detail__own").(float64) != 0 || at("a", "arc__propagated").(float64) == 0 {
			t.Errorf("a: own %v, arc propagated %v", at("a", "detail__own"), at("a", "arc__propagated"))
		}
		// Retries every hop: D serves eight times what A does, and is drawn larger.
		if ra, rd := at("a", "nodeRadius").(float64), at("d", "nodeRadius").(float64); !(rd > ra) {
			t.Errorf("nodeRadius a %v, d %v: d served more", ra, rd)
		}
		if at("checkout", "detail__coincidental").(float64) == 0 {
			t.Error("checkout has no coincidental errors")
		}
		edge := func(from, to, field string) any {
			for i := range edges.Rows() {
				if column(t, edges, "source").At(i) == from && column(t, edges, "target").At(i) == to {
					return column(t, edges, field).At(i)
				}
			}
			t.Fatalf("no edge %s → %s", from, to)
			return nil
		}
		for _, tc := range []struct{ from, to, mode, color string }{
			{"c", "d", "fail_close", "#F2495C"},
			{"checkout", "recommendations", "fail_open", "#73BF69"},
		} {
			if m, col := edge(tc.from, tc.to, "detail__mode"), edge(tc.from, tc.to, "color"); m != tc.mode || col != tc.color {
				t.Errorf("%s → %s: mode %v colour %v, want %s %s", tc.from, tc.to, m, col, tc.mode, tc.color)
			}
		}
		if r := edge("a", "b", "detail__retries").(float64); r == 0 || edge("a", "b", "thickness").(float64) <= 1 {
			t.Errorf("a → b: %v retries, thickness %v", r, edge("a", "b", "thickness"))
		}
		if s := edge("c", "d", "detail__suppressed_unclaimed").(float64); s != 0 {
			// Retries of D's failure are suppressed above C, not at C.
			t.Errorf("c → d: %v retries suppressed as unclaimed, want 0", s)
		}
		if s := edge("b", "c", "detail__suppressed_unclaimed").(float64); s == 0 {
			t.Error("b → c: no retries suppressed as unclaimed under ownership")
		}

		// Around one service: it, its callers and its callees.
		frames, errMsg = c.query(ds, plugin.Query{QueryType: plugin.QueryServiceGraph, Service: "c"})
		if errMsg != "" {
			t.Fatal(errMsg)
		}
		ids = column(t, frames[0], "id")
		got = nil
		for i := range ids.Len() {
			got = append(got, ids.At(i).(string))
		}
		if !reflect.DeepEqual(got, []string{"b", "c", "d"}) || frames[1].Rows() != 2 {
			t.Fatalf("around c: nodes %v, %d edges; want b, c, d and 2 edges", got, frames[1].Rows())
		}
	})

	t.Run("edgeModel", func(t *testing.T) {
		frames, errMsg := c.query(ds, plugin.Query{QueryType: plugin.QueryEdgeModel})
		if errMsg != "" || len(frames) != 1 {
			t.Fatalf("frames %v, error %q", frames, errMsg)
		}
		f := frames[0]
		var i = -1
		for r := range f.Rows() {
			if column(t, f, "service").At(r) == "checkout" && column(t, f, "peer_service").At(r) == "recommendations" {
				i = r
			}
		}
		if i < 0 {
			t.Fatal("no edge checkout → recommendations")
		}
		if m := column(t, f, "mode").At(i); m != "fail_open" {
			t.Errorf("mode %v, want fail_open", m)
		}
		conf, upper := column(t, f, "confidence").At(i).(float64), column(t, f, "p_upper").At(i).(float64)
		if math.Abs(conf-math.Round((1-upper)*1e4)/1e4) > 1e-9 || upper > 0.2 {
			t.Errorf("confidence %v, upper bound %v: want 1 − upper ≥ 0.8", conf, upper)
		}
		if n := column(t, f, "samples").At(i).(int64); n < 20 {
			t.Errorf("%d samples, fewer than min_samples", n)
		}
		if a := column(t, f, "peer_addresses").At(i).(string); !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("peer addresses %q", a)
		}
		// One caller's edges.
		frames, errMsg = c.query(ds, plugin.Query{QueryType: plugin.QueryEdgeModel, Service: "checkout"})
		if errMsg != "" || frames[0].Rows() != 2 {
			t.Fatalf("checkout's edges: %d rows, error %q; want 2 (recommendations, payments)", frames[0].Rows(), errMsg)
		}
	})

	t.Run("hints", func(t *testing.T) {
		// The same document as the collector's endpoint serves, but for
		// generated_at. The collector rereads the model every second, so
		// the two may differ for a moment while flushes land: ask the
		// collector before and after the plugin until the three agree.
		var want, got ownership.Hints
		for attempt := 1; ; attempt++ {
			before, err := sim.Hints(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			frames, errMsg := c.query(ds, plugin.Query{QueryType: plugin.QueryHints, Service: "checkout"})
			if errMsg != "" || len(frames) != 2 {
				t.Fatalf("frames %v, error %q", frames, errMsg)
			}
			doc := column(t, frames[1], "json").At(0).(string)
			got = ownership.Hints{}
			if err := json.Unmarshal([]byte(doc), &got); err != nil {
				t.Fatalf("document %s: %v", doc, err)
			}
			if got.GeneratedAt.IsZero() {
				t.Error("the document has no generated_at")
			}
			after, err := sim.Hints(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			before.GeneratedAt, after.GeneratedAt, got.GeneratedAt = time.Time{}, time.Time{}, time.Time{}
			want = after
			if rows := frames[0].Rows(); rows != len(got.Edges) {
				t.Errorf("hints frame: %d rows for %d edges", rows, len(got.Edges))
			}
			if reflect.DeepEqual(before, after) && reflect.DeepEqual(got, want) {
				break
			}
			if attempt == 60 {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("after %d attempts a second apart, the plugin's hints\n%s\nare not the collector's\n%s", attempt, g, w)
			}
			time.Sleep(time.Second)
		}
		if len(got.Edges) != 2 {
			t.Fatalf("%d edges, want recommendations and payments", len(got.Edges))
		}
		if _, errMsg := c.query(ds, plugin.Query{QueryType: plugin.QueryHints}); !strings.Contains(errMsg, "choose the service") {
			t.Errorf("hints without a service: %q", errMsg)
		}
	})

	t.Run("unknown query type", func(t *testing.T) {
		_, errMsg := c.query(ds, plugin.Query{QueryType: "whatIf"})
		if !strings.Contains(errMsg, `queryType "whatIf"`) || !strings.Contains(errMsg, "serviceGraph, edgeModel or hints") {
			t.Errorf("error %q", errMsg)
		}
	})

	t.Run("services resource", func(t *testing.T) {
		stream, err := c.res.CallResource(ctx, &pluginv2.CallResourceRequest{PluginContext: ds, Path: "services", Method: http.MethodGet, Url: "services"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var services []string
		if err := json.Unmarshal(r.Body, &services); err != nil || r.Code != http.StatusOK {
			t.Fatalf("%d %s: %v", r.Code, r.Body, err)
		}
		if !slices.Contains(services, "checkout") || !slices.Contains(services, "d") {
			t.Fatalf("services %v", services)
		}
	})

	t.Run("hostile service names", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, sim.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		// A service named like an attack exists, as span resources may
		// name one; the others do not.
		const existing = `o'brien"); DROP TABLE edge_stats; -- ☃`
		bucket := time.Now().UTC().Truncate(time.Minute)
		if _, err := conn.Exec(ctx, `INSERT INTO edge_stats (bucket, service, operation, peer_service, peer_operation, calls, failed_calls, attempts, failed_alone, failed_alone_request_failed)
VALUES ($1, $2, 'GET /x', 'checkout', 'GET /checkout', 40, 30, 45, 30, 30)`, bucket, existing); err != nil {
			t.Fatal(err)
		}
		count := func() (n int64) {
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM edge_stats").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		rows := count()
		for _, tc := range []struct {
			service string
			exists  bool
		}{
			{existing, true},
			{`x' OR '1'='1`, false},
			{`'; DELETE FROM edge_stats; --`, false},
			{`checkout'--`, false},
			{`\'; SELECT pg_sleep(10); --`, false},
			{"服务 ünïcødé 🚀", false},
			{"$1", false},
		} {
			frames, errMsg := c.query(ds, plugin.Query{QueryType: plugin.QueryServiceGraph, Service: tc.service})
			if errMsg != "" {
				t.Fatalf("serviceGraph %q: %s", tc.service, errMsg)
			}
			wantNodes := 0
			if tc.exists {
				wantNodes = 2 // it and checkout
			}
			if frames[0].Rows() != wantNodes || (tc.exists && row(t, frames[0], "id", tc.service) < 0) {
				t.Errorf("serviceGraph %q: %d nodes, want %d", tc.service, frames[0].Rows(), wantNodes)
			}
			frames, errMsg = c.query(ds, plugin.Query{QueryType: plugin.QueryEdgeModel, Service: tc.service})
			if errMsg != "" {
				t.Fatalf("edgeModel %q: %s", tc.service, errMsg)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.exists]; frames[0].Rows() != want {
				t.Errorf("edgeModel %q: %d edges, want %d", tc.service, frames[0].Rows(), want)
			}
			if tc.exists && column(t, frames[0], "mode").At(0) != "fail_close" {
				t.Errorf("edgeModel %q: mode %v, want fail_close (30 of 30 failed)", tc.service, column(t, frames[0], "mode").At(0))
			}
			frames, errMsg = c.query(ds, plugin.Query{QueryType: plugin.QueryHints, Service: tc.service})
			if errMsg != "" {
				t.Fatalf("hints %q: %s", tc.service, errMsg)
			}
			var doc ownership.Hints
			if err := json.Unmarshal([]byte(column(t, frames[1], "json").At(0).(string)), &doc); err != nil || doc.Service != tc.service {
				t.Errorf("hints %q: service %q, %v", tc.service, doc.Service, err)
			}
			if n := count(); n != rows {
				t.Fatalf("after %q edge_stats has %d rows, had %d", tc.service, n, rows)
			}
		}
	})

	t.Run("settings that cannot work", func(t *testing.T) {
		empty := pgtest.NewDatabase(t)
		// A port nothing listens on: reserved and never bound, so no other
		// test process's server takes it (internal/portlock).
		reserved, err := portlock.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(reserved.Release)
		closed := reserved.Number()
		for i, tc := range []struct {
			name, json string
			want       string
		}{
			{"password in the DSN", storeJSON("postgres://grafana:hunter2@db.internal/eo"), "store.dsn holds a password"},
			{"no DSN", `{}`, "store.dsn is empty"},
			{"a database without the schema", storeJSON(empty), "has no errorownership schema"},
			{"nobody listening", storeJSON(fmt.Sprintf("host=127.0.0.1 port=%d dbname=eo user=grafana sslmode=disable connect_timeout=5", closed)), "Cannot read the store host=127.0.0.1"},
			{"a half-life without a unit", `{"store": {"dsn": "host=db"}, "edge_model": {"half_life": "600"}}`, `edge_model.half_life: "600" is not a duration`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pc := instance(int64(10+i), tc.json, map[string]string{"password": password})
				r := c.health(pc)
				if r.Status != pluginv2.CheckHealthResponse_ERROR || !strings.Contains(r.Message, tc.want) {
					t.Fatalf("health %v %q, want an error saying %q", r.Status, r.Message, tc.want)
				}
				if strings.Contains(r.Message, "hunter2") || strings.Contains(r.Message, password) {
					t.Fatalf("the health message shows a password: %q", r.Message)
				}
				if _, errMsg := c.query(pc, plugin.Query{QueryType: plugin.QueryEdgeModel}); errMsg == "" {
					t.Fatal("a query on these settings succeeded")
				}
			})
		}
	})

	p.shutdown(t)
	if log := p.log(); strings.Contains(log, password) || strings.Contains(log, "hunter2") {
		t.Errorf("the plugin's log shows a password:\n%s", log)
	}
}

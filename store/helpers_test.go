// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testContext returns a context that ends with the test or after a while.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens a store on dsn with cfg's other settings, migrated.
func openStore(t testing.TB, dsn string, cfg Config) *Store {
	t.Helper()
	cfg.DSN = configopaque.String(dsn)
	s, err := Open(testContext(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(testContext(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

// newStore returns a migrated store on a fresh database.
func newStore(t testing.TB) *Store {
	t.Helper()
	return openStore(t, pgtest.NewDatabase(t), DefaultConfig())
}

// builder fills Stats by name, hiding the symbols.
type builder struct {
	names *dependencyanalysis.Symbols
	s     *dependencyanalysis.Stats
}

func newBuilder(names *dependencyanalysis.Symbols) *builder {
	if names == nil {
		names = dependencyanalysis.NewSymbols(0)
	}
	return &builder{names: names, s: dependencyanalysis.NewStats()}
}

func (b *builder) sym(name string) dependencyanalysis.Symbol { return b.names.Intern(name) }

func (b *builder) op(svc, op string) *dependencyanalysis.OperationStats {
	k := dependencyanalysis.OperationKey{Service: b.sym(svc), Operation: b.sym(op)}
	o, ok := b.s.Operations[k]
	if !ok {
		o = new(dependencyanalysis.OperationStats)
		b.s.Operations[k] = o
	}
	b.s.Traces++ // so that Stats.Empty is false
	return o
}

func (b *builder) edge(svc, op, peer, peerOp string) *dependencyanalysis.EdgeStats {
	k := dependencyanalysis.EdgeKey{Service: b.sym(svc), Operation: b.sym(op), PeerService: b.sym(peer), PeerOperation: b.sym(peerOp)}
	e, ok := b.s.Edges[k]
	if !ok {
		e = new(dependencyanalysis.EdgeStats)
		b.s.Edges[k] = e
	}
	return e
}

func (b *builder) depth(rootSvc, rootOp string, depth int16, svc string, served uint64) {
	k := dependencyanalysis.DepthKey{RootService: b.sym(rootSvc), RootOperation: b.sym(rootOp), Depth: depth, Service: b.sym(svc)}
	c, ok := b.s.Depths[k]
	if !ok {
		c = new(dependencyanalysis.DepthCount)
		b.s.Depths[k] = c
	}
	c.N += served
}

func (b *builder) root(svc, op string) *dependencyanalysis.RootStats {
	k := dependencyanalysis.OperationKey{Service: b.sym(svc), Operation: b.sym(op)}
	r, ok := b.s.Roots[k]
	if !ok {
		r = new(dependencyanalysis.RootStats)
		b.s.Roots[k] = r
	}
	return r
}

func (b *builder) address(svc, peer, addr string, calls uint64) {
	b.s.Addresses[dependencyanalysis.AddressKey{Service: b.sym(svc), PeerService: b.sym(peer), Address: b.sym(addr)}] += calls
}

func (b *builder) audit(at time.Time, trace byte, svc, op, peer, peerOp string) {
	b.s.Audit = append(b.s.Audit, dependencyanalysis.AuditEntry{
		Time:    pcommon.NewTimestampFromTime(at),
		TraceID: pcommon.TraceID{trace, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		SpanID:  pcommon.SpanID{trace, 0xab, 0, 0, 0, 0, 0, 1},
		Service: b.sym(svc), Operation: b.sym(op), PeerService: b.sym(peer), PeerOperation: b.sym(peerOp),
		ClaimSent: ownership.ClaimClaimed, ClaimExpected: ownership.ClaimClaimed,
	})
}

func (b *builder) flush(instance string, seq uint64, bucket time.Time) Flush {
	countedEstimates(b.s)
	return Flush{Instance: instance, Seq: seq, Bucket: bucket, Stats: b.s, Names: b.names}
}

// countedEstimates gives the figures set by hand the estimates the engine
// gives counted traces (weight 1): the counts themselves. Where the tests
// mean to weigh traces, they take them from the engine (sampling_test.go).
func countedEstimates(s *dependencyanalysis.Stats) {
	const counted = dependencyanalysis.SamplingCounted
	f := func(n uint64) float64 { return float64(n) }
	opCounts := func(c *dependencyanalysis.OperationCounts[float64], failed, correct int64, verdicts [4]int64, claims [3][4]int64, expected [3]int64) {
		c.Failed, c.ClaimsCorrect = float64(failed), float64(correct)
		for i := range verdicts {
			c.Verdicts[i] = float64(verdicts[i])
		}
		for i := range claims {
			for j := range claims[i] {
				c.Claims[i][j] = float64(claims[i][j])
			}
		}
		for i := range expected {
			c.ExpectedClaims[i] = float64(expected[i])
		}
	}
	for _, op := range s.Operations {
		if op.Est != ([2]dependencyanalysis.OperationCounts[float64]{}) {
			continue
		}
		v := op.VerdictCounts()
		opCounts(&op.Est[counted], v.Failed, v.ClaimsCorrect, v.Verdicts, v.Claims, v.ExpectedClaims)
		op.Est[counted].Served, op.Est[counted].RetriesReceived = f(op.Served), f(op.RetriesReceived)
	}
	for _, p := range s.Provisional {
		if p.Est == ([2]dependencyanalysis.OperationCounts[float64]{}) {
			opCounts(&p.Est[counted], p.Failed, p.ClaimsCorrect, p.Verdicts, p.Claims, p.ExpectedClaims)
		}
	}
	for _, e := range s.Edges {
		if e.Est != ([2]dependencyanalysis.EdgeTraffic[float64]{}) {
			continue
		}
		t := &e.Est[counted]
		t.Calls, t.FailedCalls, t.Attempts, t.Retries = f(e.Calls), f(e.FailedCalls), f(e.Attempts), f(e.Retries)
		t.CallFailedRequestFailed, t.CallOKRequestFailed = f(e.CallFailedRequestFailed), f(e.CallOKRequestFailed)
		t.FailedAlone, t.FailedAloneRequestFailed = f(e.FailedAlone), f(e.FailedAloneRequestFailed)
		for i, n := range e.Decisions {
			t.Decisions[i] = f(n)
		}
	}
	for _, d := range s.Depths {
		if d.Est == [2]float64{} {
			d.Est[counted] = f(d.N)
		}
	}
	for _, r := range s.Roots {
		if r.RequestsEst == [2]float64{} && r.RadiusSumEst == [2]float64{} {
			r.RequestsEst[counted], r.RadiusSumEst[counted] = f(r.Requests), f(r.RadiusSum)
		}
	}
}

// randomStats fills b with figures drawn from seed over a small universe of
// names, so that flushes from different seeds share keys. The figures
// depend only on seed, not on b's symbol table.
func randomStats(b *builder, seed uint64, at time.Time) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) //nolint:gosec // G404: figures that depend only on seed, on purpose
	svcs := []string{"frontend", "checkout", "payments", "cart", "db"}
	ops := []string{"GET /", "POST /buy", "Charge", "Get"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	n := func(k int) uint64 { return uint64(rng.IntN(k)) }
	for range 8 {
		o := b.op(pick(svcs), pick(ops))
		o.Served += 10 + n(100)
		o.RetriesReceived += n(10)
		o.Failed += n(10)
		o.Verdicts[1+rng.IntN(3)] += n(5)
		o.Claims[rng.IntN(3)][1+rng.IntN(3)] += 1 + n(5)
		o.ClaimsCorrect += n(5)
		o.ExpectedClaims[1+rng.IntN(2)] += n(5)
	}
	for range 8 {
		e := b.edge(pick(svcs), pick(ops), pick(svcs), pick(ops))
		e.Calls += 50 + n(50)
		e.FailedCalls += n(20)
		e.Attempts += 50 + n(80)
		e.Retries += n(30)
		e.CallFailedRequestFailed += n(20)
		e.CallOKRequestFailed += n(3)
		e.FailedAlone += n(15)
		e.FailedAloneRequestFailed += n(10)
		for d := range e.Decisions {
			e.Decisions[d] += n(4)
		}
	}
	for range 6 {
		b.depth("frontend", pick(ops), int16(rng.IntN(4)), pick(svcs), 1+n(50))
	}
	for range 3 {
		r := b.root("frontend", pick(ops))
		r.Requests += 1 + n(20)
		r.RadiusMax = max(r.RadiusMax, rng.IntN(4))
		r.RadiusSum += n(10)
	}
	for range 3 {
		b.address(pick(svcs), pick(svcs), fmt.Sprintf("10.0.0.%d:8080", rng.IntN(3)), 1+n(20))
	}
	for i := range 2 {
		b.audit(at.Add(time.Duration(i)*time.Second), byte(seed), pick(svcs), pick(ops), pick(svcs), pick(ops))
	}
}

// dump returns every row of the statistics tables as JSON text, sorted,
// for comparing two databases.
func dump(t testing.TB, s *Store) map[string][]string {
	t.Helper()
	out := make(map[string][]string)
	for _, table := range []string{"operation_stats", "claim_accuracy", "edge_stats", "depth_stats", "root_stats", "address_stats", "coincidental_audit"} {
		rows, err := s.pool.Query(testContext(t), fmt.Sprintf("SELECT row_to_json(t)::text FROM %s t", table))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(lines)
		out[table] = lines
	}
	return out
}

// queryInt returns the single integer a query returns.
func queryInt(t testing.TB, s *Store, sql string, args ...any) int64 {
	t.Helper()
	var n *int64
	if err := s.pool.QueryRow(testContext(t), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if n == nil {
		return 0
	}
	return *n
}

// queryText returns the single text a query returns.
func queryText(t testing.TB, s *Store, sql string) string {
	t.Helper()
	var v string
	if err := s.pool.QueryRow(testContext(t), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantInt fails the test unless the integer sql returns is want; what
// says what the number is, as a format with one %d for it.
func wantInt(t testing.TB, s *Store, want int64, what, sql string, args ...any) {
	t.Helper()
	if n := queryInt(t, s, sql, args...); n != want {
		t.Fatalf(what+"; want %d", n, want)
	}
}

// counted returns rows as a reader returns counted figures: each Seen
// figure equal to its estimate, which the test gives.
func counted[T any](rows ...T) []T {
	out := make([]T, len(rows))
	for i := range rows {
		out[i] = rows[i]
		v := reflect.ValueOf(&out[i]).Elem()
		seen := v.FieldByName("Seen")
		for j := range seen.NumField() {
			copyFigure(seen.Field(j), v.FieldByName(seen.Type().Field(j).Name))
		}
	}
	return out
}

// copyFigure sets a count (int64, or an array of them) to an estimate.
func copyFigure(dst, src reflect.Value) {
	if dst.Kind() == reflect.Array {
		for i := range dst.Len() {
			copyFigure(dst.Index(i), src.Index(i))
		}
		return
	}
	dst.SetInt(int64(math.Round(src.Float())))
}

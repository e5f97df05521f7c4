// SPDX-License-Identifier: Apache-2.0

package store

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
)

// t0 is a bucket start the tests write at: yesterday at 15:09 UTC, well
// within the retention the writers enforce.
var t0 = time.Now().UTC().Truncate(24 * time.Hour).Add(-24*time.Hour + 15*time.Hour + 9*time.Minute)

// knownFlush is a flush with figures the read tests know by heart.
func knownFlush(instance string, seq uint64, bucket time.Time) Flush {
	b := newBuilder(nil)
	o := b.op("frontend", "GET /")
	o.Served, o.RetriesReceived, o.Failed = 1000, 50, 100
	o.Verdicts[dependencyanalysis.VerdictOwn] = 40
	o.Verdicts[dependencyanalysis.VerdictPropagated] = 50
	o.Verdicts[dependencyanalysis.VerdictCoincidental] = 10
	o.Claims[ownership.ClaimClaimed][dependencyanalysis.VerdictOwn] = 40
	o.Claims[ownership.ClaimUnclaimed][dependencyanalysis.VerdictPropagated] = 45
	o.Claims[ownership.ClaimMissing][dependencyanalysis.VerdictPropagated] = 5
	o.Claims[ownership.ClaimClaimed][dependencyanalysis.VerdictCoincidental] = 10
	o.ClaimsCorrect = 95
	o.ExpectedClaims[ownership.ClaimClaimed] = 50
	o.ExpectedClaims[ownership.ClaimUnclaimed] = 50
	b.op("backend", "/api").Served = 1300

	e := b.edge("frontend", "GET /", "backend", "/api")
	e.Calls, e.FailedCalls, e.Attempts, e.Retries = 1000, 200, 1300, 300
	e.CallFailedRequestFailed, e.CallOKRequestFailed = 199, 1
	e.FailedAlone, e.FailedAloneRequestFailed = 150, 149
	e.Decisions[ownership.DecisionRetried] = 250
	e.Decisions[ownership.DecisionSuppressedUnclaimed] = 30
	e.Decisions[ownership.DecisionSuppressedBudget] = 20
	e.Decisions[ownership.DecisionNoPolicy] = 7
	e.Decisions[ownership.DecisionExhausted] = 9
	c := b.edge("frontend", "GET /", "cache", "get")
	c.Calls, c.FailedCalls, c.Attempts = 1000, 300, 1000
	c.FailedAlone = 250
	b.address("frontend", "backend", "10.0.0.7:8080", 900)
	b.address("frontend", "backend", "backend.shop.svc", 100)
	// A callee no attribute named is stored as "unknown".
	u := b.edge("backend", "/api", "", "")
	u.Calls, u.Attempts = 10, 10

	b.depth("frontend", "GET /", 0, "frontend", 1000)
	b.depth("frontend", "GET /", 1, "backend", 1300)
	b.depth("frontend", "GET /", 1, "cache", 1000)
	r := b.root("frontend", "GET /")
	r.Requests, r.RadiusMax, r.RadiusSum = 1000, 2, 150

	b.audit(bucket.Add(10*time.Second), 1, "frontend", "GET /", "cache", "get")
	b.audit(bucket.Add(20*time.Second), 2, "frontend", "GET /", "cache", "get")
	b.audit(bucket.Add(30*time.Second), 3, "backend", "/api", "", "")
	return b.flush(instance, seq, bucket)
}

func TestReadQueries(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	if dup, err := s.Write(ctx, knownFlush("a", 1, t0.Add(25*time.Second))); err != nil || dup {
		t.Fatalf("Write: duplicate %v, %v", dup, err)
	}
	from, to := t0.Add(-time.Hour), t0.Add(time.Hour)

	t.Run("ServedPerRoot", func(t *testing.T) {
		got, err := s.ServedPerRoot(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		row := func(depth int, svc string, served float64) RootDepth {
			return RootDepth{RootService: "frontend", RootOperation: "GET /", Depth: depth, Service: svc,
				DepthFigures: DepthFigures[float64]{served, 1000}, PerRoot: served / 1000}
		}
		want := counted(row(0, "frontend", 1000), row(1, "backend", 1300), row(1, "cache", 1000))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("Roots", func(t *testing.T) {
		got, err := s.Roots(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		want := counted(RootSummary{RootService: "frontend", RootOperation: "GET /",
			RootFigures: RootFigures[float64]{Requests: 1000, StormRadiusSum: 150}, StormRadiusMax: 2, StormRadiusMean: 0.15})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("ClaimAccuracy", func(t *testing.T) {
		got, err := s.ClaimAccuracy(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		want := ClaimAccuracy{Service: "frontend", Operation: "GET /", ClaimFigures: ClaimFigures[float64]{Failed: 100, Correct: 95,
			Verdicts: [4]float64{0, 40, 50, 10}, ExpectedClaimed: 50, ExpectedUnclaimed: 50}}
		want.Requests[ownership.ClaimClaimed][dependencyanalysis.VerdictOwn] = 40
		want.Requests[ownership.ClaimUnclaimed][dependencyanalysis.VerdictPropagated] = 45
		want.Requests[ownership.ClaimMissing][dependencyanalysis.VerdictPropagated] = 5
		want.Requests[ownership.ClaimClaimed][dependencyanalysis.VerdictCoincidental] = 10
		want = counted(want)[0]
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("got %+v\nwant [%+v]", got, want)
		}
		if a := got[0].Accuracy(); a != 0.95 {
			t.Fatalf("Accuracy() = %v, want 0.95", a)
		}
	})
	t.Run("Amplification", func(t *testing.T) {
		got, err := s.Amplification(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		want := counted(
			Amplification{Service: "backend", AmplificationFigures: AmplificationFigures[float64]{Served: 1300, Calls: 10, Attempts: 10}},
			Amplification{Service: "frontend", AmplificationFigures: AmplificationFigures[float64]{Served: 1000, RetriesReceived: 50,
				Calls: 2000, Attempts: 2300, RetriesSent: 300,
				Retried: 250, SuppressedUnclaimed: 30, SuppressedBudget: 20, NoPolicy: 7, Exhausted: 9}},
		)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
		if got[1].Suppressed() != 50 {
			t.Fatalf("Suppressed() = %v, want 50", got[1].Suppressed())
		}
	})
	t.Run("Audit", func(t *testing.T) {
		tests := []struct {
			service string
			limit   int
			traces  []string // first byte of each trace ID, newest first
		}{
			{"", 0, []string{"03", "02", "01"}},
			{"", 2, []string{"03", "02"}},
			{"frontend", 10, []string{"02", "01"}},
			{"nobody", 10, nil},
		}
		for _, tt := range tests {
			got, err := s.Audit(ctx, from, to, tt.service, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var traces []string
			for _, a := range got {
				traces = append(traces, a.TraceID[:2])
			}
			if !reflect.DeepEqual(traces, tt.traces) {
				t.Errorf("Audit(%q, %d): traces %v, want %v", tt.service, tt.limit, traces, tt.traces)
			}
		}
		got, err := s.Audit(ctx, from, to, "backend", 1)
		if err != nil {
			t.Fatal(err)
		}
		want := AuditRecord{
			Time: t0.Add(55 * time.Second), TraceID: "030102030405060708090a0b0c0d0e0f", SpanID: "03ab000000000001",
			Service: "backend", Operation: "/api", PeerService: "unknown", PeerOperation: "",
			ClaimSent: ownership.ClaimClaimed, ClaimExpected: ownership.ClaimClaimed, Reason: "coincidental",
			Weight: 1, // an entry without a weight counts once
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("got %+v\nwant [%+v]", got, want)
		}
		// The window is half-open and in the entries' own time.
		if got, _ := s.Audit(ctx, t0.Add(55*time.Second), to, "", 0); len(got) != 1 {
			t.Fatalf("Audit from the newest entry: %d entries, want 1", len(got))
		}
	})
	t.Run("SchemaVersion", func(t *testing.T) {
		if v, err := s.SchemaVersion(ctx); err != nil || v != SchemaVersionWanted() {
			t.Fatalf("SchemaVersion() = %d, %v; want %d", v, err, SchemaVersionWanted())
		}
	})
	t.Run("EmptyWindow", func(t *testing.T) {
		later := to.Add(time.Hour)
		if got, err := s.Amplification(ctx, to, later); err != nil || len(got) != 0 {
			t.Fatalf("Amplification of an empty window: %v, %v", got, err)
		}
		if got, err := s.EdgeModel(ctx, later, time.Minute, dependencyanalysis.DefaultConfig().EdgeModel); err != nil || len(got) != 0 {
			t.Fatalf("EdgeModel of an empty window: %v, %v", got, err)
		}
	})
}

func TestEdgeModel(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	cfg := dependencyanalysis.DefaultConfig().EdgeModel
	judge := dependencyanalysis.NewEdgeModel(cfg)

	// The same figures in two buckets ten minutes apart, from two
	// instances: with a ten-minute half-life the older bucket weighs half.
	for i, bucket := range []time.Time{t0, t0.Add(10 * time.Minute)} {
		if _, err := s.Write(ctx, knownFlush("a", uint64(i), bucket)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(ctx, knownFlush("b", uint64(i), bucket)); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name     string
		halfLife time.Duration
		since    time.Time
		weight   float64 // of one bucket of one instance, summed
		buckets  float64 // of both instances in the window
	}{
		{"decayed", 10 * time.Minute, t0, 2 * (1 + 0.5), 4},
		{"no decay", 0, t0, 2 * 2, 4},
		{"newest bucket only", 10 * time.Minute, t0.Add(time.Minute), 2 * 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.EdgeModel(ctx, tt.since, tt.halfLife, cfg)
			if err != nil {
				t.Fatal(err)
			}
			type edge struct{ svc, op, peer, peerOp string }
			wantCounts := map[edge]dependencyanalysis.EdgeCounts{
				{"frontend", "GET /", "backend", "/api"}: {Failed: 150, FailedRequestFailed: 149, OK: 800, OKRequestFailed: 1},
				{"frontend", "GET /", "cache", "get"}:    {Failed: 250, OK: 700},
				{"backend", "/api", "unknown", ""}:       {OK: 10},
			}
			wantAddresses := map[edge][]string{
				{"frontend", "GET /", "backend", "/api"}: {"10.0.0.7:8080", "backend.shop.svc"},
			}
			wantModes := map[edge]ownership.Mode{
				{"frontend", "GET /", "backend", "/api"}: ownership.ModeFailClose,
				{"frontend", "GET /", "cache", "get"}:    ownership.ModeFailOpen,
				{"backend", "/api", "unknown", ""}:       ownership.ModeUnknown,
			}
			if len(got) != len(wantCounts) {
				t.Fatalf("%d edges, want %d: %+v", len(got), len(wantCounts), got)
			}
			for _, e := range got {
				k := edge{e.Service, e.Operation, e.PeerService, e.PeerOperation}
				wc := wantCounts[k]
				wc.Samples = wc.Failed * tt.buckets // counted, not weighted
				wc.Failed *= tt.weight
				wc.FailedRequestFailed *= tt.weight
				wc.OK *= tt.weight
				wc.OKRequestFailed *= tt.weight
				if !reflect.DeepEqual(e.PeerAddresses, wantAddresses[k]) {
					t.Errorf("%v: addresses %q, want %q", k, e.PeerAddresses, wantAddresses[k])
				}
				if !closeCounts(e.Counts, wc) {
					t.Errorf("%v: counts %+v, want %+v", k, e.Counts, wc)
				}
				if e.Mode != wantModes[k] {
					t.Errorf("%v: mode %v, want %v", k, e.Mode, wantModes[k])
				}
				// One rule in one place: the engine's.
				if w := judge.Judge(e.Counts); w.Mode != e.Mode || w.Lower != e.Lower || w.Upper != e.Upper {
					t.Errorf("%v: estimate %+v, the engine judges %+v", k, e.Estimate, w)
				}
				if !e.LastSeen.Equal(t0.Add(10 * time.Minute)) {
					t.Errorf("%v: last seen %v, want %v", k, e.LastSeen, t0.Add(10*time.Minute))
				}
			}
		})
	}

	t.Run("EdgesFor", func(t *testing.T) {
		got, err := s.EdgesFor(ctx, "frontend", t0, 10*time.Minute, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].PeerService != "backend" || got[1].PeerService != "cache" {
			t.Fatalf("EdgesFor(frontend) = %+v", got)
		}
		// The decay is measured from the newest bucket of all edges, so a
		// caller's edges weigh the same as in the whole model.
		if !closeCounts(got[0].Counts, dependencyanalysis.EdgeCounts{Failed: 450, FailedRequestFailed: 447, Samples: 600, OK: 2400, OKRequestFailed: 3}) {
			t.Fatalf("EdgesFor(frontend) counts %+v", got[0].Counts)
		}
		if got, err := s.EdgesFor(ctx, "nobody", t0, 0, cfg); err != nil || len(got) != 0 {
			t.Fatalf("EdgesFor(nobody) = %v, %v", got, err)
		}
	})
	t.Run("InvalidConfig", func(t *testing.T) {
		bad := cfg
		bad.Confidence = 2
		if _, err := s.EdgeModel(ctx, t0, 0, bad); err == nil {
			t.Fatal("EdgeModel accepted confidence 2")
		}
	})
	t.Run("OldBucketsDoNotUnderflow", func(t *testing.T) {
		// 30 days at a one-minute half-life is 43,200 half-lives: the
		// weight must go to zero, not raise an underflow error.
		if _, err := s.Write(ctx, knownFlush("old", 1, t0.Add(-30*24*time.Hour))); err != nil {
			t.Fatal(err)
		}
		got, err := s.EdgeModel(ctx, t0.Add(-31*24*time.Hour), time.Minute, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("%d edges, want 3", len(got))
		}
	})
}

// TestEdgeModelClockAhead: a collector whose clock runs a day ahead writes
// a bucket in the future; it must not age every other collector's
// evidence, which decays from the database's clock at the latest.
func TestEdgeModelClockAhead(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	cfg := dependencyanalysis.DefaultConfig().EdgeModel
	now := time.Now().UTC()
	if _, err := s.Write(ctx, knownFlush("honest", 1, now.Add(-10*time.Minute))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, knownFlush("ahead", 1, now.Add(24*time.Hour))); err != nil {
		t.Fatal(err)
	}
	got, err := s.EdgeModel(ctx, now.Add(-time.Hour), 10*time.Minute, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got {
		if e.PeerService != "backend" {
			continue
		}
		// The future bucket weighs as if written now (1), the honest one
		// ten minutes old (about a half, the bucket being a minute wide):
		// 150 × (1 + ~0.5), not 150 × (1 + 2^-144).
		if e.Counts.Failed < 150*1.4 || e.Counts.Failed > 150*1.6 {
			t.Fatalf("failed_alone weighs %v, want about %v", e.Counts.Failed, 150*1.5)
		}
		if e.Mode != ownership.ModeFailClose {
			t.Fatalf("mode %v, want fail_close", e.Mode)
		}
		return
	}
	t.Fatalf("no backend edge in %+v", got)
}

func closeCounts(a, b dependencyanalysis.EdgeCounts) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*max(1, math.Abs(y)) }
	return near(a.Failed, b.Failed) && near(a.FailedRequestFailed, b.FailedRequestFailed) && near(a.Samples, b.Samples) &&
		near(a.OK, b.OK) && near(a.OKRequestFailed, b.OKRequestFailed)
}

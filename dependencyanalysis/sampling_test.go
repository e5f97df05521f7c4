// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/ownership"
)

// idWithRandomness is a trace ID whose last 56 bits are r.
func idWithRandomness(r uint64) pcommon.TraceID {
	var id pcommon.TraceID
	for i := 0; i < 7; i++ {
		id[15-i] = byte(r >> (8 * i))
	}
	return id
}

func TestSamplingOf(t *testing.T) {
	high := idWithRandomness(0xffffffffffffff) // kept by every threshold
	low := idWithRandomness(0x10000000000000)  // below 50 %'s threshold
	tests := []struct {
		name       string
		traceState string
		id         pcommon.TraceID
		rate       float64
		weight     float64
		method     SamplingMethod
		threshold  string
	}{
		{name: "no tracestate counts as one", id: high, weight: 1, method: SamplingCounted},
		{name: "another vendor's member alone", traceState: "dd=s:1", id: high, weight: 1, method: SamplingCounted},
		{name: "th:0 is everything, extrapolated", traceState: "ot=th:0", id: high, weight: 1, method: SamplingExtrapolated, threshold: "0"},
		{name: "50 %", traceState: "ot=th:8", id: high, weight: 2, method: SamplingExtrapolated, threshold: "8"},
		{name: "10 % as the probabilistic sampler writes it", traceState: "ot=th:e666", id: high,
			weight: 65536.0 / (65536 - 0xe666), method: SamplingExtrapolated, threshold: "e666"},
		{name: "1 % among other members and sub-keys", traceState: "vendor=x,ot=rv:ffffffffffffff;th:fd70a4;zz:1, dd=s:1", id: low,
			weight: 16777216.0 / (16777216 - 0xfd70a4), method: SamplingExtrapolated, threshold: "fd70a4"},
		{name: "rv satisfies th where the trace ID does not", traceState: "ot=th:8;rv:c0000000000000", id: low, weight: 2, method: SamplingExtrapolated, threshold: "8"},
		{name: "rv below th contradicts the span's being kept", traceState: "ot=th:8;rv:10000000000000", id: high, weight: 0, method: SamplingCounted},
		{name: "trace ID randomness below th contradicts it", traceState: "ot=th:8", id: low, weight: 0, method: SamplingCounted},
		{name: "a malformed rv falls back to the trace ID", traceState: "ot=th:8;rv:xyz", id: high, weight: 2, method: SamplingExtrapolated, threshold: "8"},
		{name: "a th of 15 digits is no threshold", traceState: "ot=th:123456789abcdef", id: high, weight: 1, method: SamplingCounted},
		{name: "a th not in hex is no threshold", traceState: "ot=th:zz", id: high, weight: 1, method: SamplingCounted},
		{name: "the rate attribute without th", id: high, rate: 10, weight: 10, method: SamplingExtrapolated},
		{name: "th wins over the rate attribute", traceState: "ot=th:8", id: high, rate: 10, weight: 2, method: SamplingExtrapolated, threshold: "8"},
		{name: "a rate below one is no rate", id: high, rate: 0.5, weight: 1, method: SamplingCounted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Extractor
			e.sampling = map[samplingKey]SamplingClass{}
			c := e.samplingClass(samplingOf(tt.traceState, tt.id, tt.rate))
			assert.InDelta(t, tt.weight, c.Weight(), 1e-9)
			assert.Equal(t, tt.method, c.Method())
			assert.Equal(t, tt.threshold, c.Threshold())
		})
	}
}

func TestCombineSampling(t *testing.T) {
	class := func(ts string, rate float64) SamplingClass {
		return internSampling(samplingOf(ts, idWithRandomness(0xffffffffffffff), rate))
	}
	half, tenth, rate5, rate20 := class("ot=th:8", 0), class("ot=th:e666", 0), class("", 5), class("", 20)
	tests := []struct {
		name string
		a, b SamplingClass
		want SamplingClass
	}{
		{"none with none", SamplingNone, SamplingNone, SamplingNone},
		{"none takes the other", SamplingNone, half, half},
		{"the higher threshold", half, tenth, tenth},
		{"the higher threshold, either order", tenth, half, tenth},
		{"a threshold over a rate", rate20, half, half},
		{"the larger rate", rate20, rate5, rate20},
		{"inconsistent wins", tenth, SamplingInconsistent, SamplingInconsistent},
		{"inconsistent over none", SamplingInconsistent, SamplingNone, SamplingInconsistent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, CombineSampling(tt.a, tt.b))
		})
	}
}

func TestExtractSampling(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Attributes.SampleRate = []string{"SampleRate", "sample.rate"}
	require.NoError(t, cfg.Validate())
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	add := func(ts string, attrs map[string]any) {
		s := spans.AppendEmpty()
		s.SetTraceID(idWithRandomness(0xffffffffffffff))
		s.SetSpanID(pcommon.SpanID{7: byte(spans.Len())})
		s.TraceState().FromRaw(ts)
		require.NoError(t, s.Attributes().FromRaw(attrs))
	}
	add("ot=th:e666", nil)
	add("", map[string]any{"SampleRate": 20})
	add("", map[string]any{"SampleRate": "4"})
	add("", nil)
	add("", map[string]any{"sample.rate": 5, "SampleRate": 50}) // the first name configured wins
	recs := NewExtractor(cfg, NewSymbols(0)).Append(nil, td)
	require.Len(t, recs, 5)
	for i, want := range []float64{65536.0 / (65536 - 0xe666), 20, 4, 1, 50} {
		assert.InDelta(t, want, recs[i].Sampling.Weight(), 1e-9, "span %d", i)
	}
}

// TestIncompleteTraces: a trace that is not whole is counted apart, never
// judged and never learned from.
func TestIncompleteTraces(t *testing.T) {
	// A front calls a back; the back is instrumented: one whole trace shows it.
	whole := records(
		sp{id: 1, kind: KindServer, svc: "front", op: "GET /", failed: true},
		sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", addr: "back:80", failed: true, answered: true},
		sp{id: 3, parent: 2, kind: KindServer, svc: "back", op: "GET /b", failed: true},
	)
	tests := []struct {
		name     string
		spans    []Span
		sampling SamplingClass
		want     Incomplete
	}{
		{name: "whole", spans: whole, want: IncompleteNone},
		{name: "a root whose caller exported nothing", want: IncompleteNone, spans: records(
			sp{id: 1, parent: 99, kind: KindServer, svc: "front", op: "GET /", failed: true},
			sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", addr: "back:80", failed: true, answered: true},
			sp{id: 3, parent: 2, kind: KindServer, svc: "back", op: "GET /b", failed: true},
		)},
		{name: "two roots under one absent caller", want: IncompleteNone, spans: records(
			sp{id: 1, parent: 99, kind: KindServer, svc: "front", op: "GET /"},
			sp{id: 4, parent: 99, kind: KindServer, svc: "front", op: "GET /"},
		)},
		{name: "missing parent", want: IncompleteMissingParent, spans: records(
			sp{id: 1, kind: KindServer, svc: "front", op: "GET /", failed: true},
			sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", addr: "back:80", failed: true, answered: true},
			sp{id: 5, parent: 4, kind: KindServer, svc: "deep", op: "GET /d", failed: true},
		)},
		{name: "missing callee server span", want: IncompleteMissingCallee, spans: records(
			sp{id: 1, kind: KindServer, svc: "front", op: "GET /", failed: true},
			sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", addr: "back:80", failed: true, answered: true},
		)},
		{name: "an uninstrumented callee has no server span", want: IncompleteNone, spans: records(
			sp{id: 1, kind: KindServer, svc: "front", op: "GET /", failed: true},
			sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "db", peerOp: "SELECT", addr: "db:5432", failed: true, answered: true},
		)},
		{name: "a refused connection reached no server", want: IncompleteNone, spans: records(
			sp{id: 1, kind: KindServer, svc: "front", op: "GET /", failed: true},
			sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", addr: "back:80", failed: true},
		)},
		{name: "inconsistent thresholds", spans: whole, sampling: SamplingInconsistent, want: IncompleteSampling},
	}
	syms := testSymbols
	front := OperationKey{syms.Intern("front"), syms.Intern("GET /")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			an := NewAnalyzer()
			callees := NewCallees(0)
			callees.Check(an.Link(testTrace, whole)) // learns that back:80 is instrumented

			model := NewEdgeModel(DefaultConfig().EdgeModel)
			stats := NewStats()
			tr := an.Link(traceID(2), tt.spans)
			tr.SetSampling(tt.sampling)
			callees.Check(tr)
			assert.Equal(t, tt.want, tr.Incomplete)
			model.Observe(tr)
			verdicts := an.Judge(tr, model)
			stats.Add(tr, verdicts)
			if tt.want == IncompleteNone {
				assert.NotEmpty(t, stats.Operations, "a whole trace is counted")
				return
			}
			assert.Empty(t, verdicts, "not judged")
			assert.Zero(t, model.Len(), "not learned from")
			op := stats.Operations[front]
			require.NotNil(t, op, "its spans count each alone")
			assert.EqualValues(t, 1, op.Served)
			assert.Zero(t, op.Failed, "failed requests are counted with their verdict")
			assert.Equal(t, [4]uint64{}, op.Verdicts, "no verdict")
			for k, e := range stats.Edges {
				assert.Zero(t, e.FailedAlone+e.CallFailedRequestFailed+e.CallOKRequestFailed, "no edge evidence on %v", k)
			}
			assert.Empty(t, stats.Audit)
			assert.EqualValues(t, 1, stats.Incomplete[tt.want])
			assert.EqualValues(t, 1, stats.Traces)
		})
	}
}

// TestStatsWeighed: every figure counts a trace once and estimates it by
// its adjusted count; ratios of estimates are the traffic's.
func TestStatsWeighed(t *testing.T) {
	tenth := internSampling(samplingOf("ot=th:e666", idWithRandomness(0xffffffffffffff), 0))
	w := tenth.Weight()
	an := NewAnalyzer()
	stats := NewStats()
	add := func(sampling SamplingClass, spans []Span) {
		tr := an.Link(testTrace, spans)
		tr.SetSampling(sampling)
		stats.Add(tr, an.Judge(tr, modes{{"front", "back"}: ownership.ModeFailOpen}))
	}
	coincidental := records(
		sp{id: 1, kind: KindServer, svc: "front", op: "GET /", failed: true, claim: ownership.ClaimClaimed},
		sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", failed: true, try: 1},
		sp{id: 3, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", failed: true, try: 2},
	)
	add(tenth, coincidental)
	add(SamplingNone, coincidental)

	syms := testSymbols
	op := stats.Operations[OperationKey{syms.Intern("front"), syms.Intern("GET /")}]
	require.NotNil(t, op)
	assert.EqualValues(t, 2, op.Served)
	assert.InDelta(t, w+1, op.Estimate().Served, 1e-9)
	assert.InDelta(t, 1.0, op.Est[SamplingCounted].Served, 1e-9, "counted apart")
	assert.InDelta(t, w, op.Est[SamplingExtrapolated].Served, 1e-9, "extrapolated apart")
	assert.EqualValues(t, 1, op.Extrapolated)
	assert.InDelta(t, w+1, op.Estimate().Verdicts[VerdictCoincidental], 1e-9)
	assert.InDelta(t, w+1, op.Estimate().ClaimsCorrect, 1e-9)
	e := stats.Edges[EdgeKey{syms.Intern("front"), syms.Intern("GET /"), syms.Intern("back"), syms.Intern("GET /b")}]
	require.NotNil(t, e)
	assert.EqualValues(t, 2, e.Retries)
	assert.InDelta(t, 2*(w+1), e.Estimate().Attempts, 1e-9)
	root := stats.Roots[OperationKey{syms.Intern("front"), syms.Intern("GET /")}]
	assert.InDelta(t, w+1, root.EstimatedRequests(), 1e-9)
	assert.EqualValues(t, 1, root.Extrapolated)
	require.Len(t, stats.Audit, 2)
	assert.InDelta(t, w, stats.Audit[0].Weight, 1e-9)
	assert.InDelta(t, 1.0, stats.Audit[1].Weight, 1e-9)
	assert.EqualValues(t, 1, stats.Extrapolated)
	assert.EqualValues(t, 1, stats.CountedFailed, "the counted trace failed")

	merged := NewStats()
	merged.Merge(stats)
	assert.Equal(t, stats.Operations, merged.Operations)
	assert.Equal(t, stats.Roots, merged.Roots)
	assert.Equal(t, stats.Depths, merged.Depths)
}

// TestModelLearnsFromWeighedEvidence: modes come from weighted frequencies;
// min_samples counts traces, so heavier traces decide no sooner.
func TestModelLearnsFromWeighedEvidence(t *testing.T) {
	hundredth := internSampling(samplingOf("ot=th:fd70a4", idWithRandomness(0xffffffffffffff), 0))
	cfg := DefaultConfig().EdgeModel
	cfg.HalfLife = 0
	model := NewEdgeModel(cfg)
	an := NewAnalyzer()
	tolerated := records(
		sp{id: 1, kind: KindServer, svc: "front", op: "GET /"},
		sp{id: 2, parent: 1, kind: KindClient, svc: "front", peer: "back", peerOp: "GET /b", failed: true},
	)
	key := EdgeKey{sym("front"), sym("GET /"), sym("back"), sym("GET /b")}
	for i := 1; i <= cfg.MinSamples; i++ {
		tr := an.Link(testTrace, tolerated)
		tr.SetSampling(hundredth)
		model.Observe(tr)
		est := model.Estimate(key)
		assert.InDelta(t, float64(i)*hundredth.Weight(), est.Counts.Failed, 1e-6)
		assert.EqualValues(t, i, est.Counts.Samples)
		if i < cfg.MinSamples {
			require.Equal(t, ownership.ModeUnknown, est.Mode, "decided on %d traces", i)
		}
	}
	est := model.Estimate(key)
	assert.Equal(t, ownership.ModeFailOpen, est.Mode)
	// The interval is that of the 20 traces seen, not of the 2,000 they stand for.
	lower, upper := Wilson(0, float64(cfg.MinSamples), model.z)
	assert.InDelta(t, lower, est.Lower, 1e-9)
	assert.InDelta(t, upper, est.Upper, 1e-9)
	assert.False(t, math.IsNaN(est.Upper))
}

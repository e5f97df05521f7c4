// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// chainServed is docs/design.md §1's table, one retry at every hop and d
// failing: the requests each service serves per root request, by depth.
var chainServed = []struct {
	service string
	perRoot float64
}{{"a", 1}, {"b", 2}, {"c", 4}, {"d", 8}, {"e", 8}, {"f", 8}, {"g", 8}}

// TestChainFigures feeds the chain of docs/design.md §1 under one retry at
// every hop, in each temporality: the requests served per root request
// come out as 1, 2, 4, 8, 8, 8, 8 by depth, the verdicts and claims as the
// scenario's hand-worked figures, the storm radius as 3.
func TestChainFigures(t *testing.T) {
	for _, temporality := range []string{Cumulative, Delta} {
		t.Run(temporality, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
			sink := &consumertest.MetricsSink{}
			cfg := testConfig(func(c *Config) { c.AggregationTemporality = temporality })
			c := newTestConnector(t, tt, cfg, sink)
			for _, td := range scenarioTraces(t, "chain_retry_every_hop") {
				require.NoError(t, c.ConsumeTraces(context.Background(), td))
			}
			require.NoError(t, c.Shutdown(context.Background()))
			f := readFigures(t, sink.AllMetrics())

			root := []string{AttrRootService + "=a", AttrRootOperation + "=GET /a"}
			roots := f.sum("errorownership.root.requests", root...)
			require.Equal(t, float64(10), roots, "root requests\n%s", f)
			for depth, want := range chainServed {
				served := f.sum("errorownership.root.served", append(root, AttrDepth+"="+strconv.Itoa(depth), AttrServiceName+"="+want.service)...)
				assert.Equal(t, want.perRoot*roots, served, "%s at depth %d", want.service, depth)
			}
			for svc, want := range map[string]float64{"a": 10, "b": 20, "c": 40} {
				assert.Equal(t, want, f.sum("errorownership.requests.failed", AttrServiceName+"="+svc, AttrVerdict+"=propagated", AttrClaim+"=missing"), svc)
			}
			assert.Equal(t, float64(80), f.sum("errorownership.requests.failed", AttrServiceName+"=d", AttrVerdict+"=own", AttrClaim+"=missing"))
			assert.Equal(t, float64(150), f.sum("errorownership.requests.failed"), "every failed request once")
			assert.Equal(t, float64(40), f.sum("errorownership.requests.retried", AttrServiceName+"=d"), "d's retries received")
			assert.Equal(t, float64(30), f.sum("errorownership.root.storm_hops", root...), "radius 3 for each root request")
			assert.Equal(t, float64(3), f.sum("errorownership.root.storm_radius", root...), "the largest radius")
			assert.Equal(t, float64(40), f.sum("errorownership.calls.retries", AttrServiceName+"=c", AttrPeerService+"=d"), "c's retries to d")
			assert.Zero(t, f.sum("errorownership.requests.correctly_claimed"), "no service sent a claim")

			// Cumulative points share the connector's start; delta ones
			// follow one another, each starting where the last ended.
			for _, p := range f["errorownership.root.served"] {
				assert.Less(t, p.start, p.time)
			}
		})
	}
}

// TestTemporality: cumulative points carry the running total from the
// connector's start, delta points what happened since the series' last
// point; a new series' first point is 0 in both, so that Prometheus'
// increase() counts its first figures. A sampled trace's figures go to the
// extrapolated series by its adjusted count, in either temporality.
func TestTemporality(t *testing.T) {
	weight := dependencyanalysis.SamplingOf(tenPercent, pcommon.TraceID{}, 0).Weight()
	for _, tc := range []struct {
		temporality string
		sampled     bool
		// want is the value of d's served series in three emissions: a
		// trace, another, none; the trace's 8 requests each by its weight.
		want    [3]float64
		restart bool // each point starts where the last ended
	}{
		{Cumulative, false, [3]float64{0, 16, 16}, false},
		{Delta, false, [3]float64{0, 16, 0}, true},
		{Cumulative, true, [3]float64{0, 16 * weight, 16 * weight}, false},
		{Delta, true, [3]float64{0, 16 * weight, 0}, true},
	} {
		method := dependencyanalysis.SamplingCounted
		traces := scenarioTraces(t, "chain_retry_every_hop")[:1]
		if tc.sampled {
			method = dependencyanalysis.SamplingExtrapolated
			traces = withTraceState(traces, tenPercent, func(pcommon.TraceID) bool { return true })
		}
		t.Run(tc.temporality+"/"+method.String(), func(t *testing.T) {
			cfg := testConfig(func(c *Config) { c.AggregationTemporality = tc.temporality })
			now := time.Unix(1_800_000_000, 0)
			acc := newAccumulator(cfg, func() time.Time { return now })
			bucket := analysed(t, traces)
			var got [3]float64
			var starts, times [3]pcommon.Timestamp
			for i := range got {
				if i < 2 {
					acc.Flushed(bucket)
				}
				now = now.Add(time.Minute)
				md, _ := acc.emit(false)
				f := readFigures(t, []pmetric.Metrics{md})
				require.Empty(t, f.sum("errorownership.requests.served", AttrSamplingMethod+"="+methods[1-method]), "the other method's series")
				p := f["errorownership.requests.served"][seriesKey(AttrServiceName, "d", AttrOperation, "GET /d", AttrSamplingMethod, method.String())]
				if p != nil {
					got[i], starts[i], times[i] = p.value, p.start, p.time
				}
			}
			// The 0 first point, then the two traces' 8 + 8.
			assert.InDeltaSlice(t, tc.want[:2], got[:2], 1e-9)
			if tc.restart {
				assert.Equal(t, times[0], starts[1], "a delta point starts where the last ended")
				assert.Equal(t, pcommon.Timestamp(0), times[2], "an idle delta series sends no point")
			} else {
				assert.Equal(t, starts[0], starts[2], "cumulative points share their start")
				assert.InDelta(t, tc.want[2], got[2], 1e-9)
			}
		})
	}
}

// TestFloodOfOperationNames: one service sends ten thousand distinct
// operation names, another a few: the flood stays within
// max_series_per_service, the rest of its figures counted in its overflow
// series and in series_overflowed, and the other service keeps its series.
// A flood of service names stays within max_series_per_metric. With every
// other trace sampled, each sampling method's series counts against the
// bounds, and each method has its overflow series.
func TestFloodOfOperationNames(t *testing.T) {
	weight := dependencyanalysis.SamplingOf(tenPercent, pcommon.TraceID{}, 0).Weight()
	overflow := func(svc string, methods ...string) []string {
		var keys []string
		for _, m := range methods {
			if svc == "" {
				keys = append(keys, seriesKey(AttrSamplingMethod, m, AttrOverflow, "true"))
			} else {
				keys = append(keys, seriesKey(AttrServiceName, svc, AttrSamplingMethod, m, AttrOverflow, "true"))
			}
		}
		return keys
	}
	tests := []struct {
		name             string
		services, ops    int
		perMetric, perSv int
		// sampled: the flood's odd trace IDs are sampled at 10 %.
		sampled bool
		// wantSeries is the bound a metric's series stay within; wantOverflow
		// the figures folded, by bound, and where.
		wantSeries        int
		wantOverflowBound string
		wantOverflowed    int64
		overflowKeys      []string
	}{
		{
			name: "distinct operation names", services: 1, ops: 10_000, perMetric: 1000, perSv: 100,
			wantSeries: 100 + 1 + 2, wantOverflowBound: "max_series_per_service", wantOverflowed: 10_000 - 100,
			overflowKeys: overflow("flood", "counted"),
		},
		{
			name: "distinct service names", services: 5000, ops: 1, perMetric: 500, perSv: 100,
			wantSeries: 500 + 1, wantOverflowBound: "max_series_per_metric", wantOverflowed: 5000 + 2 - 500,
			overflowKeys: overflow("", "counted"),
		},
		{
			name: "distinct operation names, every other trace sampled", services: 1, ops: 10_000, perMetric: 1000, perSv: 100, sampled: true,
			wantSeries: 100 + 2 + 2, wantOverflowBound: "max_series_per_service", wantOverflowed: 10_000 - 100,
			overflowKeys: overflow("flood", "counted", "extrapolated"),
		},
		{
			name: "distinct service names, every other trace sampled", services: 5000, ops: 1, perMetric: 500, perSv: 100, sampled: true,
			wantSeries: 500 + 2, wantOverflowBound: "max_series_per_metric", wantOverflowed: 5000 + 2 - 500,
			overflowKeys: overflow("", "counted", "extrapolated"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
			sink := &consumertest.MetricsSink{}
			cfg := testConfig(func(c *Config) {
				c.Cardinality.MaxSeriesPerMetric, c.Cardinality.MaxSeriesPerService = tc.perMetric, tc.perSv
			})
			c := newTestConnector(t, tt, cfg, sink)
			// The steady service comes first, so that its series exist
			// before the flood.
			require.NoError(t, c.ConsumeTraces(context.Background(), failedRequests("steady", []string{"GET /a", "GET /b"}, 1)))
			var ops []string
			for i := range tc.ops {
				ops = append(ops, fmt.Sprintf("GET /item/%d", i))
			}
			odd := func(id pcommon.TraceID) bool { return tc.sampled && id[15]%2 == 1 }
			for s := range tc.services {
				svc := "flood"
				if tc.services > 1 {
					svc = fmt.Sprintf("svc-%05d", s)
				}
				td := withTraceState([]ptrace.Traces{failedRequests(svc, ops, uint64(10+s*tc.ops))}, tenPercent, odd)[0]
				require.NoError(t, c.ConsumeTraces(context.Background(), td))
			}
			require.NoError(t, c.Shutdown(context.Background()))
			f := readFigures(t, sink.AllMetrics())

			served := f["errorownership.requests.served"]
			assert.LessOrEqual(t, len(served), tc.wantSeries, "series of requests.served")
			flood := float64(tc.services * tc.ops)
			want := 2 + flood
			if tc.sampled {
				want = 2 + flood/2 + flood/2*weight
			}
			assert.InEpsilon(t, want, f.sum("errorownership.requests.served"), 1e-12, "every request counted, in its series or the overflow")
			var overflowed float64 // requests, each once
			for _, k := range tc.overflowKeys {
				require.Contains(t, served, k)
				if strings.Contains(k, "=extrapolated") {
					overflowed += served[k].value / weight
				} else {
					overflowed += served[k].value
				}
			}
			if tc.services == 1 {
				assert.InDelta(t, float64(tc.ops-tc.perSv), overflowed, 1e-6, "the flood's requests past the bound")
				for _, op := range []string{"GET /a", "GET /b"} {
					assert.Contains(t, served, seriesKey(AttrServiceName, "steady", AttrOperation, op, AttrSamplingMethod, "counted"), "the steady service keeps its series")
				}
			}
			for name, ss := range f {
				assert.LessOrEqual(t, len(ss), tc.wantSeries, name)
			}
			got := telemetryCount(t, tt, "series_overflowed", attribute.String("connector", "errorownership"),
				attribute.String("metric", "errorownership.requests.served"), attribute.String("bound", tc.wantOverflowBound))
			assert.Equal(t, tc.wantOverflowed, got, "series_overflowed")
			t.Logf("%d services × %d operations: %d series of requests.served, %.0f requests in its overflow series; series_overflowed %d",
				tc.services, tc.ops, len(served), overflowed, got)
		})
	}
}

// failedRequests is one single-span trace per operation: a failed SERVER
// span of service, trace IDs from first on.
func failedRequests(service string, ops []string, first uint64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	base := time.Now().Add(-time.Minute)
	for i, op := range ops {
		sp := spans.AppendEmpty()
		var tid pcommon.TraceID
		n := first + uint64(i)
		for b := range 8 {
			tid[15-b] = byte(n >> (8 * b))
		}
		tid[0] = 1
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{7: 1})
		sp.SetName(op)
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(base))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Millisecond)))
		sp.Status().SetCode(ptrace.StatusCodeError)
	}
	return td
}

// TestExemplarsLinkToTheirTraces: the coincidental and propagated counts
// carry the trace and span of a request so judged, which the scenario's
// spans confirm: a failed SERVER span of the series' service and operation.
func TestExemplarsLinkToTheirTraces(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	sink := &consumertest.MetricsSink{}
	// Two passes, so that the second is judged by the edges the first taught.
	traces := append(scenarioTraces(t, "coincidental"), scenarioTraces(t, "chain_retry_every_hop")...)
	c := newTestConnector(t, tt, testConfig(func(c *Config) { c.Exemplars.MaxPerDataPoint = 3 }), sink)
	for _, td := range traces {
		require.NoError(t, c.ConsumeTraces(context.Background(), td))
	}
	require.NoError(t, c.Shutdown(context.Background()))
	f := readFigures(t, sink.AllMetrics())

	servers := map[[24]byte]ptrace.Span{}
	services := map[[24]byte]string{}
	for _, td := range traces {
		for i := range td.ResourceSpans().Len() {
			rs := td.ResourceSpans().At(i)
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for j := range rs.ScopeSpans().Len() {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := range spans.Len() {
					sp := spans.At(k)
					var id [24]byte
					tid, sid := sp.TraceID(), sp.SpanID()
					copy(id[:16], tid[:])
					copy(id[16:], sid[:])
					servers[id], services[id] = sp, svc.Str()
				}
			}
		}
	}
	checked := map[string]int{}
	for k, p := range f["errorownership.requests.failed"] {
		if containsAll(k, []string{AttrVerdict + "=own"}) {
			assert.Empty(t, p.exemplars, "own failures carry no exemplar: %s", k)
			continue
		}
		require.NotEmpty(t, p.exemplars, "%s has no exemplar", k)
		assert.LessOrEqual(t, len(p.exemplars), 3*2, "at most max_per_data_point a point")
		for _, e := range p.exemplars {
			var id [24]byte
			tid, sid := e.TraceID(), e.SpanID()
			copy(id[:16], tid[:])
			copy(id[16:], sid[:])
			sp, ok := servers[id]
			require.True(t, ok, "exemplar %s/%s of %s is no span sent", tid, sid, k)
			assert.Equal(t, ptrace.SpanKindServer, sp.Kind())
			assert.True(t, containsAll(k, []string{AttrServiceName + "=" + services[id], AttrOperation + "=" + sp.Name()}), "exemplar span %s %s on series %s", services[id], sp.Name(), k)
		}
		for _, v := range []string{"propagated", "coincidental"} {
			if containsAll(k, []string{AttrVerdict + "=" + v}) {
				checked[v]++
			}
		}
	}
	assert.Positive(t, checked["coincidental"], "coincidental series with exemplars")
	assert.Positive(t, checked["propagated"], "propagated series with exemplars")
}

// TestBesideTheProcessor: a connector naming a processor takes that
// processor's figures — the same as a connector analysing the spans
// itself gets — and ignores the spans it is sent; naming a processor that
// is not in the collector fails its start, saying what to do.
func TestBesideTheProcessor(t *testing.T) {
	ctx := context.Background()
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(ctx)) }()
	procID := component.MustNewIDWithName("errorownership", "beside_"+t.Name())
	pcfg := errorownershipprocessor.NewFactory().CreateDefaultConfig().(*errorownershipprocessor.Config)
	pcfg.DecisionWait = time.Hour
	pcfg.Rejudge.MaxHeld = 0
	pset := processortest.NewNopSettings(component.MustNewType("errorownership"))
	pset.ID = procID
	next := &consumertest.TracesSink{}
	proc, err := errorownershipprocessor.NewFactory().CreateTraces(ctx, pset, pcfg, next)
	require.NoError(t, err)

	beside, alone := &consumertest.MetricsSink{}, &consumertest.MetricsSink{}
	c := newTestConnector(t, tt, testConfig(func(c *Config) { c.Processor = &procID }), beside)
	own := newTestConnector(t, tt, testConfig(nil), alone)
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
	for _, td := range scenarioTraces(t, "chain_retry_every_hop") {
		require.NoError(t, proc.ConsumeTraces(ctx, td))
		require.NoError(t, c.ConsumeTraces(ctx, td), "the spans the connector is sent beside a processor")
		require.NoError(t, own.ConsumeTraces(ctx, td))
	}
	// As the collector does: the processor upstream first.
	require.NoError(t, proc.Shutdown(ctx))
	require.NoError(t, c.Shutdown(ctx))
	require.NoError(t, own.Shutdown(ctx))
	got, want := readFigures(t, beside.AllMetrics()), readFigures(t, alone.AllMetrics())
	require.NotEmpty(t, want)
	assert.Equal(t, float64(80), got.sum("errorownership.root.served", AttrServiceName+"=d"))
	for name := range want {
		for k, p := range want[name] {
			require.Contains(t, got[name], k, name)
			assert.Equal(t, p.value, got[name][k].value, "%s{%s}", name, k)
		}
	}

	missing := component.MustNewIDWithName("errorownership", "not_here")
	set := testConfig(func(c *Config) { c.Processor = &missing })
	nc, err := NewFactory().CreateTracesToMetrics(ctx, connectorSettings(tt), set, &consumertest.MetricsSink{})
	require.NoError(t, err)
	err = nc.Start(ctx, componenttest.NewNopHost())
	require.ErrorContains(t, err, "processor: no errorownership processor errorownership/not_here in this collector's pipelines; add it to a traces pipeline, or remove processor: to have the connector analyse the spans itself")
	require.NoError(t, nc.Shutdown(ctx))
}

// withClaimSent copies traces, setting the claim the SERVER spans of
// service send.
func withClaimSent(traces []ptrace.Traces, service string, claim ownership.Claim) []ptrace.Traces {
	out := make([]ptrace.Traces, len(traces))
	for i, td := range traces {
		out[i] = ptrace.NewTraces()
		td.CopyTo(out[i])
		for _, rs := range out[i].ResourceSpans().All() {
			if svc, _ := rs.Resource().Attributes().Get("service.name"); svc.Str() != service {
				continue
			}
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if sp.Kind() == ptrace.SpanKindServer {
						sp.Attributes().PutStr(ownership.AttrClaim, claim.String())
					}
				}
			}
		}
	}
	return out
}

// TestRetriesAfterUnclaimed: c retries d once for each of its 40 calls in
// the chain of docs/design.md §1, without hooks. When d's server spans
// send unclaimed, every one of those retries is one that ownership would
// have suppressed, and errorownership.calls.retries_after_unclaimed counts
// it on the edge c → d, by its trace's weight in the series of its
// sampling method, in each temporality, alone and beside the processor.
// When d claims its errors, or sends nothing, the metric has no series.
func TestRetriesAfterUnclaimed(t *testing.T) {
	weight := dependencyanalysis.SamplingOf(tenPercent, pcommon.TraceID{}, 0).Weight()
	chain := scenarioTraces(t, "chain_retry_every_hop")
	odd := func(id pcommon.TraceID) bool { return id[15]%2 == 1 }
	none := func(pcommon.TraceID) bool { return false }
	tests := []struct {
		name   string
		claim  ownership.Claim
		sample func(pcommon.TraceID) bool
		// want is the metric's c → d figure by sampling method; 0 is no series.
		want [2]float64
	}{
		{name: "unclaimed, counted", claim: ownership.ClaimUnclaimed, sample: none, want: [2]float64{40, 0}},
		{name: "unclaimed, half sampled at 10%", claim: ownership.ClaimUnclaimed, sample: odd, want: [2]float64{20, 20 * weight}},
		{name: "claimed", claim: ownership.ClaimClaimed, sample: none},
		{name: "no claim sent", claim: ownership.ClaimMissing, sample: none},
	}
	const metric = "errorownership.calls.retries_after_unclaimed"
	for _, tc := range tests {
		traces := withTraceState(chain, tenPercent, tc.sample)
		if tc.claim != ownership.ClaimMissing {
			traces = withClaimSent(traces, "d", tc.claim)
		}
		for _, beside := range []bool{false, true} {
			for _, temporality := range []string{Cumulative, Delta} {
				t.Run(fmt.Sprintf("%s/beside=%v/%s", tc.name, beside, temporality), func(t *testing.T) {
					f := runConnector(t, beside, temporality, traces)
					var series int
					for m, want := range tc.want {
						key := seriesKey(AttrServiceName, "c", AttrOperation, "GET /c", AttrPeerService, "d", AttrPeerOperation, "GET /d", AttrSamplingMethod, methods[m])
						p := f[metric][key]
						if want == 0 {
							assert.Nil(t, p, "%s{%s}", metric, key)
							continue
						}
						series++
						require.NotNil(t, p, "%s{%s}\n%s", metric, key, f)
						assert.InDelta(t, want, p.value, 1e-9, "%s{%s}", metric, key)
					}
					assert.Len(t, f[metric], series, "only the edge c → d retried after an unclaimed error")
					if tc.claim == ownership.ClaimUnclaimed {
						retries := f.sum("errorownership.calls.retries", AttrServiceName+"=c", AttrPeerService+"=d")
						assert.InDelta(t, retries, f.sum(metric), 1e-9, "every retry of c to d followed an unclaimed error")
					}
				})
			}
		}
	}
}

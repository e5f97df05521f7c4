// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// tenPercent is OpenTelemetry probability sampling at 10 % (th:e666), with
// explicit randomness above the threshold so that every span is
// consistently kept whatever its trace ID.
const tenPercent = "ot=th:e666;rv:ffffffffffffff"

// chainRoots is how many root requests chain_retry_every_hop sends, each
// the same tree of requests.
const chainRoots = 10

// withTraceState copies traces, setting the tracestate of every span of the
// traces keep selects.
func withTraceState(traces []ptrace.Traces, state string, keep func(pcommon.TraceID) bool) []ptrace.Traces {
	out := make([]ptrace.Traces, len(traces))
	for i, td := range traces {
		out[i] = ptrace.NewTraces()
		td.CopyTo(out[i])
		for _, rs := range out[i].ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if keep(sp.TraceID()) {
						sp.TraceState().FromRaw(state)
					}
				}
			}
		}
	}
	return out
}

// processors names the processors runConnector creates apart.
var processors atomic.Int64

// runConnector feeds traces to a connector in temporality, alone or beside
// a processor, and reads what it emitted by its shutdown.
func runConnector(t *testing.T, beside bool, temporality string, traces []ptrace.Traces) metricFigures {
	t.Helper()
	ctx := context.Background()
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(ctx)) }()
	sink := &consumertest.MetricsSink{}
	if !beside {
		c := newTestConnector(t, tt, testConfig(func(c *Config) { c.AggregationTemporality = temporality }), sink)
		for _, td := range traces {
			require.NoError(t, c.ConsumeTraces(ctx, td))
		}
		require.NoError(t, c.Shutdown(ctx))
		return readFigures(t, sink.AllMetrics())
	}
	procID := component.MustNewIDWithName("errorownership", "sampled_"+strconv.FormatInt(processors.Add(1), 10))
	pcfg := errorownershipprocessor.NewFactory().CreateDefaultConfig().(*errorownershipprocessor.Config)
	pcfg.DecisionWait = time.Hour
	pcfg.NumWorkers = 2
	pcfg.Rejudge.MaxHeld = 0
	pset := processortest.NewNopSettings(component.MustNewType("errorownership"))
	pset.ID = procID
	proc, err := errorownershipprocessor.NewFactory().CreateTraces(ctx, pset, pcfg, &consumertest.TracesSink{})
	require.NoError(t, err)
	c := newTestConnector(t, tt, testConfig(func(c *Config) {
		c.Processor = &procID
		c.AggregationTemporality = temporality
	}), sink)
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
	for _, td := range traces {
		require.NoError(t, proc.ConsumeTraces(ctx, td))
	}
	require.NoError(t, proc.Shutdown(ctx))
	require.NoError(t, c.Shutdown(ctx))
	return readFigures(t, sink.AllMetrics())
}

// TestSampledTrafficIsEstimated sends the chain of docs/design.md §1 with
// none, all or half of its traces sampled at 10 % (tracestate ot=th:e666),
// through the real processor and connector, in each temporality, alone and
// beside the processor. Every sum's sampling.method="counted" series counts
// the unsampled traces' figures, one each; its "extrapolated" series sums
// the sampled ones' adjusted counts (2^56/(2^56−T), about 10), exactly; a
// method without traces has no series. Ratios of the estimates (failed
// over served, served per root request) are those of the unsampled run,
// and the storm radius, a largest value, is unweighted and unlabelled.
func TestSampledTrafficIsEstimated(t *testing.T) {
	chain := scenarioTraces(t, "chain_retry_every_hop")
	weight := dependencyanalysis.SamplingOf(tenPercent, pcommon.TraceID{}, 0).Weight()
	require.InDelta(t, 10, weight, 0.001, "th:e666 is 10 %% sampling")
	odd := func(id pcommon.TraceID) bool { return id[15]%2 == 1 }
	tests := []struct {
		name   string
		sample func(pcommon.TraceID) bool
		// sampled is how many of the chainRoots root requests are.
		sampled int
	}{
		{name: "none sampled", sample: func(pcommon.TraceID) bool { return false }, sampled: 0},
		{name: "all sampled at 10%", sample: func(pcommon.TraceID) bool { return true }, sampled: chainRoots},
		{name: "half sampled at 10%", sample: odd, sampled: chainRoots / 2},
	}
	for _, mode := range []struct {
		name   string
		beside bool
	}{{"alone", false}, {"beside the processor", true}} {
		for _, temporality := range []string{Cumulative, Delta} {
			// The unsampled run is the reference: its figures are counts.
			base := runConnector(t, mode.beside, temporality, chain)
			require.Equal(t, float64(chainRoots), base.sum("errorownership.root.requests"), "root requests\n%s", base)
			for _, tc := range tests {
				t.Run(mode.name+"/"+temporality+"/"+tc.name, func(t *testing.T) {
					traces := withTraceState(chain, tenPercent, tc.sample)
					got := runConnector(t, mode.beside, temporality, traces)
					// Every root request is the same tree: a series'
					// figure is its share of the roots, each by its weight.
					share := [2]float64{
						float64(chainRoots-tc.sampled) / chainRoots,
						weight * float64(tc.sampled) / chainRoots,
					}
					var compared int
					for name, ss := range base {
						if name == "errorownership.root.storm_radius" {
							continue
						}
						var want int
						for k, p := range ss {
							require.Contains(t, k, AttrSamplingMethod+"=counted", "%s: unsampled traces are counted", name)
							for m, method := range methods {
								mk := strings.Replace(k, AttrSamplingMethod+"=counted", AttrSamplingMethod+"="+method, 1)
								if share[m] == 0 {
									assert.NotContains(t, got[name], mk, "%s: no traces, no series", name)
									continue
								}
								want++
								require.Contains(t, got[name], mk, "%s", name)
								assert.InEpsilon(t, p.value*share[m], got[name][mk].value, 1e-12, "%s{%s}", name, mk)
								compared++
							}
						}
						assert.Len(t, got[name], want, "%s: a series for each method with traces, no other\n%s", name, got)
					}
					assert.Positive(t, compared)

					// Ratios of estimates are the counts' ratios.
					for _, svc := range []string{"a", "b", "c", "d"} {
						ratio := func(f metricFigures) float64 {
							return f.sum("errorownership.requests.failed", AttrServiceName+"="+svc) / f.sum("errorownership.requests.served", AttrServiceName+"="+svc)
						}
						assert.InEpsilon(t, ratio(base), ratio(got), 1e-12, "failed/served of %s", svc)
					}
					for depth, want := range chainServed {
						served := got.sum("errorownership.root.served", AttrDepth+"="+strconv.Itoa(depth), AttrServiceName+"="+want.service)
						assert.InEpsilon(t, want.perRoot, served/got.sum("errorownership.root.requests"), 1e-12, "%s served per root request", want.service)
					}
					radius := got["errorownership.root.storm_radius"]
					assert.Len(t, radius, len(base["errorownership.root.storm_radius"]))
					for k, p := range base["errorownership.root.storm_radius"] {
						require.Contains(t, radius, k, "the radius is no count of either method: no sampling.method")
						assert.Equal(t, p.value, radius[k].value, "the largest radius, unweighted")
					}
				})
			}
		}
	}
}

// TestExemplarsOfTheirMethod: a sampled request's exemplar goes on the
// extrapolated series of its verdict, with its trace's adjusted count as
// its value; an unsampled one's on the counted series, with 1.
func TestExemplarsOfTheirMethod(t *testing.T) {
	weight := dependencyanalysis.SamplingOf(tenPercent, pcommon.TraceID{}, 0).Weight()
	chain := scenarioTraces(t, "chain_retry_every_hop")
	odd := func(id pcommon.TraceID) bool { return id[15]%2 == 1 }
	traces := withTraceState(chain, tenPercent, odd)
	for _, temporality := range []string{Cumulative, Delta} {
		t.Run(temporality, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
			sink := &consumertest.MetricsSink{}
			c := newTestConnector(t, tt, testConfig(func(c *Config) {
				c.AggregationTemporality = temporality
				c.Exemplars.MaxPerDataPoint = 3
			}), sink)
			for _, td := range traces {
				require.NoError(t, c.ConsumeTraces(context.Background(), td))
			}
			require.NoError(t, c.Shutdown(context.Background()))
			f := readFigures(t, sink.AllMetrics())
			tests := []struct {
				method  string
				sampled bool
				value   float64
			}{
				{"counted", false, 1},
				{"extrapolated", true, weight},
			}
			for _, tc := range tests {
				var seen int
				for k, p := range f["errorownership.requests.failed"] {
					if !containsAll(k, []string{AttrVerdict + "=propagated", AttrSamplingMethod + "=" + tc.method}) {
						continue
					}
					require.NotEmpty(t, p.exemplars, "%s has no exemplar", k)
					for _, e := range p.exemplars {
						assert.Equal(t, tc.sampled, odd(e.TraceID()), "%s: exemplar trace %s", k, e.TraceID())
						assert.InEpsilon(t, tc.value, e.DoubleValue(), 1e-12, "%s: the exemplar's value is its trace's weight", k)
						seen++
					}
				}
				assert.Positive(t, seen, "exemplars on the %s series", tc.method)
			}
		})
	}
}

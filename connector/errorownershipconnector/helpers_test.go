// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/errorownership/errorownership/connector/errorownershipconnector/internal/metadata"
	"github.com/errorownership/errorownership/dependencyanalysis"
	eofigures "github.com/errorownership/errorownership/internal/figures"
	"github.com/errorownership/errorownership/internal/otlpfile"
)

// testConfig is a connector that analyses the spans itself and analyses
// them only at shutdown, unless mutate says otherwise.
func testConfig(mutate func(*Config)) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.DecisionWait = time.Hour
	cfg.NumWorkers = 2
	cfg.Rejudge.MaxHeld = 0
	cfg.MetricsFlushInterval = time.Hour
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

// newTestConnector builds the connector through its factory, its telemetry
// recorded in tt and its metrics in sink, and starts it.
func newTestConnector(t testing.TB, tt *componenttest.Telemetry, cfg *Config, sink *consumertest.MetricsSink) connector.Traces {
	t.Helper()
	set := connectorSettings(tt)
	c, err := NewFactory().CreateTracesToMetrics(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	return c
}

// scenarioTraces reads a bundled scenario's requests.
func scenarioTraces(t testing.TB, name string) []ptrace.Traces {
	t.Helper()
	var out []ptrace.Traces
	require.NoError(t, otlpfile.ReadFile(filepath.Join("..", "..", "testdata", "scenarios", name+".json"), func(td ptrace.Traces) { out = append(out, td) }))
	return out
}

// point is a data point as the tests read it.
type point struct {
	value       float64
	start, time pcommon.Timestamp
	exemplars   []pmetric.Exemplar
}

// readFigures reads the metrics a sink got, by metric name and then by the
// series' attributes ("k=v,k=v", sorted): a cumulative series' last point,
// a delta series' points summed (start of the first, time of the last), a
// gauge's largest value.
type metricFigures map[string]map[string]*point

func readFigures(t testing.TB, all []pmetric.Metrics) metricFigures {
	t.Helper()
	out := metricFigures{}
	for _, md := range all {
		for i := range md.ResourceMetrics().Len() {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := range sms.Len() {
				ms := sms.At(j).Metrics()
				for k := range ms.Len() {
					m := ms.At(k)
					if out[m.Name()] == nil {
						out[m.Name()] = map[string]*point{}
					}
					var dps pmetric.NumberDataPointSlice
					delta, gauge := false, false
					switch m.Type() {
					case pmetric.MetricTypeSum:
						dps = m.Sum().DataPoints()
						delta = m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityDelta
					case pmetric.MetricTypeGauge:
						dps, gauge = m.Gauge().DataPoints(), true
					default:
						t.Fatalf("%s is a %v", m.Name(), m.Type())
					}
					// One value type a metric: doubles for the sums,
					// which add adjusted counts; an int for the gauge.
					wantType := pmetric.NumberDataPointValueTypeDouble
					if gauge {
						wantType = pmetric.NumberDataPointValueTypeInt
					}
					for l := range dps.Len() {
						dp := dps.At(l)
						require.Equal(t, wantType, dp.ValueType(), "%s's value type", m.Name())
						v := dp.DoubleValue()
						if gauge {
							v = float64(dp.IntValue())
						}
						k := attrs(dp.Attributes())
						p := out[m.Name()][k]
						if p == nil {
							p = &point{start: dp.StartTimestamp()}
							out[m.Name()][k] = p
						}
						switch {
						case gauge:
							p.value = max(p.value, v)
						case delta:
							p.value += v
						default:
							p.value = v
							p.start = dp.StartTimestamp()
						}
						p.time = dp.Timestamp()
						for e := range dp.Exemplars().Len() {
							p.exemplars = append(p.exemplars, dp.Exemplars().At(e))
						}
					}
				}
			}
		}
	}
	return out
}

func attrs(m pcommon.Map) string {
	var kv []string
	for k, v := range m.All() {
		kv = append(kv, k+"="+v.AsString())
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}

// seriesKey names a series as readFigures keys it, from alternating keys and values.
func seriesKey(kv ...string) string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, kv[i]+"="+kv[i+1])
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// sum adds up a metric's series whose key contains every fragment.
func (f metricFigures) sum(metric string, fragments ...string) float64 {
	var n float64
	for k, p := range f[metric] {
		if containsAll(k, fragments) {
			n += p.value
		}
	}
	return n
}

func containsAll(s string, fragments []string) bool {
	for _, f := range fragments {
		if !strings.Contains(","+s+",", ","+f+",") {
			return false
		}
	}
	return true
}

// telemetryCount reads a counter of the connector's telemetry for attrs.
func telemetryCount(t testing.TB, tt *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m, err := tt.GetMetric("otelcol_connector_errorownership_" + name)
	if err != nil {
		return 0
	}
	want := attribute.NewSet(attrs...)
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			if dp.Attributes.Equals(&want) {
				return dp.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			if dp.Attributes.Equals(&want) {
				return dp.Value
			}
		}
	}
	return 0
}

func (f metricFigures) String() string {
	var b strings.Builder
	for name, ss := range f {
		for k, p := range ss {
			fmt.Fprintf(&b, "%s{%s} %g\n", name, k, p.value)
		}
	}
	return b.String()
}

func connectorSettings(tt *componenttest.Telemetry) connector.Settings {
	set := connectortest.NewNopSettings(metadata.Type)
	set.ID = component.NewID(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	return set
}

// analysed runs the engine over traces, as an analysis does, into one
// bucket: every edge learned before any verdict, no verdict held, each
// trace weighed by its sampling.
func analysed(t testing.TB, traces []ptrace.Traces) *eofigures.Bucket {
	t.Helper()
	cfg := dependencyanalysis.DefaultConfig()
	syms := dependencyanalysis.NewSymbols(0)
	ex := dependencyanalysis.NewExtractor(cfg, syms)
	var records []dependencyanalysis.Record
	for _, td := range traces {
		records = ex.Append(records, td)
	}
	model := dependencyanalysis.NewEdgeModel(cfg.EdgeModel)
	an := dependencyanalysis.NewAnalyzer()
	dependencyanalysis.ForEachTraceSampled(records, func(id pcommon.TraceID, spans []dependencyanalysis.Span, class dependencyanalysis.SamplingClass) {
		tr := an.Link(id, spans)
		tr.SetSampling(class)
		model.Observe(tr)
	})
	st := dependencyanalysis.NewStats()
	dependencyanalysis.ForEachTraceSampled(records, func(id pcommon.TraceID, spans []dependencyanalysis.Span, class dependencyanalysis.SamplingClass) {
		tr := an.Link(id, spans)
		tr.SetSampling(class)
		st.Add(tr, an.Judge(tr, model))
	})
	return &eofigures.Bucket{Stats: st, Symbols: syms, Start: time.Now(), End: time.Now()}
}

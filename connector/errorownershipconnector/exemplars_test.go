// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// TestExemplarsOutliveTheirInterval: traffic stops, the processor hands on
// its last figures, and the connector goes on emitting every
// metrics_flush_interval (15 s of its clock, driven here) for 90 s. An
// exporter such as prometheus keeps only each series' latest point, so
// that point must carry the exemplars whenever a scrape comes: every
// cumulative point of the propagated and coincidental series does, a
// minute and more after the last span, at most max_per_data_point of them
// and the same ones, there being no newer. A delta series sends no point
// once idle; its last point, the one an exporter keeps, carries them.
func TestExemplarsOutliveTheirInterval(t *testing.T) {
	const emissions, maxPerPoint = 6, 2
	for _, temporality := range []string{Cumulative, Delta} {
		t.Run(temporality, func(t *testing.T) {
			ctx := context.Background()
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(ctx)) }()
			procID := component.MustNewIDWithName("errorownership", "exemplars_"+temporality)
			pcfg := errorownershipprocessor.NewFactory().CreateDefaultConfig().(*errorownershipprocessor.Config)
			pcfg.DecisionWait = time.Hour
			pcfg.Rejudge.MaxHeld = 0
			pset := processortest.NewNopSettings(component.MustNewType("errorownership"))
			pset.ID = procID
			proc, err := errorownershipprocessor.NewFactory().CreateTraces(ctx, pset, pcfg, &consumertest.TracesSink{})
			require.NoError(t, err)
			sink := &consumertest.MetricsSink{}
			c := newTestConnector(t, tt, testConfig(func(c *Config) {
				c.Processor = &procID
				c.AggregationTemporality = temporality
				c.Exemplars.MaxPerDataPoint = maxPerPoint
			}), sink).(*ownershipConnector)
			// The connector's clock, which the emissions read; its own
			// ticker (metrics_flush_interval 1 h) never fires here.
			now := time.Now()
			c.acc.now = func() time.Time { return now }
			require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
			for _, td := range append(scenarioTraces(t, "coincidental"), scenarioTraces(t, "chain_retry_every_hop")...) {
				require.NoError(t, proc.ConsumeTraces(ctx, td))
			}
			// The last span is in: the processor's last flush hands on
			// every verdict and bucket.
			require.NoError(t, proc.Shutdown(ctx))
			lastSpan := now

			// last is each failed series' latest point, as an exporter
			// keeps it, and when it was emitted.
			type kept struct {
				at        time.Time
				exemplars []pmetric.Exemplar
			}
			last := map[string]kept{}
			for range emissions {
				now = now.Add(15 * time.Second)
				c.emit(ctx, false)
				f := readFigures(t, sink.AllMetrics()[len(sink.AllMetrics())-1:])
				for k, p := range f["errorownership.requests.failed"] {
					last[k] = kept{at: now, exemplars: p.exemplars}
				}
			}
			checked := map[string]int{}
			for k, p := range last {
				if containsAll(k, []string{AttrVerdict + "=own"}) {
					assert.Empty(t, p.exemplars, "own failures carry no exemplar: %s", k)
					continue
				}
				for _, v := range []string{"propagated", "coincidental"} {
					if containsAll(k, []string{AttrVerdict + "=" + v}) {
						checked[v]++
					}
				}
				if temporality == Cumulative {
					assert.Equal(t, 90*time.Second, p.at.Sub(lastSpan), "%s: a point every emission", k)
				}
				require.NotEmpty(t, p.exemplars, "%s: the point emitted %v after the last span has no exemplar", k, p.at.Sub(lastSpan))
				assert.LessOrEqual(t, len(p.exemplars), maxPerPoint, k)
			}
			assert.Positive(t, checked["propagated"], "propagated series")
			assert.Positive(t, checked["coincidental"], "coincidental series")
			if temporality == Cumulative {
				// Every point of those series, from the first, carries the
				// same exemplars: no newer came.
				var points int
				for _, md := range sink.AllMetrics() {
					f := readFigures(t, []pmetric.Metrics{md})
					for k, p := range f["errorownership.requests.failed"] {
						if !containsAll(k, []string{AttrVerdict + "=own"}) {
							points++
							assert.Equal(t, exemplarIDs(last[k].exemplars), exemplarIDs(p.exemplars), k)
						}
					}
				}
				assert.Equal(t, emissions*(checked["propagated"]+checked["coincidental"]), points)
			}
			require.NoError(t, c.Shutdown(ctx))
		})
	}
}

func exemplarIDs(ex []pmetric.Exemplar) []string {
	var ids []string
	for _, e := range ex {
		tid, sid := e.TraceID(), e.SpanID()
		ids = append(ids, tid.String()+"/"+sid.String())
	}
	return ids
}

// TestNewerExemplarsReplaceOlder: a series keeps the latest
// max_per_data_point exemplars, the newer replacing the older.
func TestNewerExemplarsReplaceOlder(t *testing.T) {
	ex := func(ids ...byte) []exemplar {
		var out []exemplar
		for _, id := range ids {
			out = append(out, exemplar{spanID: pcommon.SpanID{7: id}})
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		had, came, want []exemplar
		limit           int
	}{
		{name: "none kept yet", came: ex(1), want: ex(1), limit: 2},
		{name: "room for one more", had: ex(1), came: ex(2), want: ex(1, 2), limit: 2},
		{name: "a newer replaces the oldest", had: ex(1, 2), came: ex(3), want: ex(2, 3), limit: 2},
		{name: "newer ones replace all", had: ex(1, 2), came: ex(3, 4, 5), want: ex(4, 5), limit: 2},
		{name: "nothing newer", had: ex(1), want: ex(1), limit: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &series{ex: tc.had}
			s.keep(tc.came, tc.limit)
			assert.Equal(t, tc.want, s.ex)
		})
	}
}

// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/e2e/scaleout"
	"github.com/errorownership/errorownership/store/pgtest"
)

// logWriter writes each progress line to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestScaleOutOnKafka runs the scale-out the README describes with the
// built collectors, configured from the shipped files: a front tier
// receiving OTLP and producing to a topic of 8 partitions on a real Kafka
// protocol endpoint (kfake), partitioned by trace ID, and two analysis
// collectors consuming it in one consumer group and writing to one
// PostgreSQL database. Beside it run one gateway collector, and two
// collectors behind a plain load balancer, each with a database of its
// own, and all three get the same spans from the simulator's services.
//
// Every figure the Kafka deployment's store holds must equal the
// gateway's, exactly. Verdicts depend on the edge model a collector read
// back from its store when it judged (docs/design.md §5), and while the
// model is learned that moment differs between deployments; so what
// depends on the model is compared over the measured phase, sent once
// every collector has read back the whole warm-up's model, which the
// measured traffic leaves unchanged; what does not depend on it is
// compared over everything. Then one analysis collector is stopped with
// SIGTERM and another joins while traffic flows: every span must still be
// passed on exactly once, and analysed once. Last a third joins, and the
// measured traffic again must give the gateway's figures exactly.
func TestScaleOutOnKafka(t *testing.T) {
	bin := buildCollector(t)
	cluster := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := scaleout.Run(ctx, scaleout.Options{
		Collector: bin,
		Configs:   filepath.Join(repoRoot, "testdata"),
		Cluster:   cluster,
		Dir:       t.TempDir(),
		Progress:  logWriter{t},
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range slices.Sorted(maps.Keys(rep.Logs)) {
				t.Logf("%s log:\n%s", name, rep.Logs[name])
			}
		}
	})
	require.NoError(t, err)
	var report strings.Builder
	rep.Print(&report)
	t.Log(report.String())

	t.Run("whole traces", func(t *testing.T) {
		// The figures are exact only if every collector held whole traces:
		// no span came after its trace was analysed, none was left out.
		for _, p := range [][2]*scaleout.Phase{{&rep.Warmup, nil}, {&rep.Measured, &rep.Warmup}, {&rep.Scaled, &rep.Rebalanced}} {
			for name := range p[0].Telemetry {
				tel := p[0].TelemetrySince(name, p[1])
				assert.Zero(t, tel.Late, "%s: late spans in the %s phase; decision_wait is too short for this machine", name, p[0].Name)
				assert.Zero(t, tel.Evicted+tel.Dropped, "%s: traces evicted or spans dropped in the %s phase", name, p[0].Name)
			}
		}
	})

	t.Run("figures that do not depend on the model, over everything", func(t *testing.T) {
		gw, kafka := rep.Measured.Figures[scaleout.Gateway], rep.Measured.Figures[scaleout.Kafka]
		require.NotZero(t, gw.Served())
		want, got := gw.ModelFree(), kafka.ModelFree()
		assert.Equal(t, want.Services, got.Services, "served, retries received, calls, attempts, retries, decisions")
		assert.Equal(t, want.Operations, got.Operations, "failed requests, own verdicts")
		assert.Equal(t, want.Edges, got.Edges, "edge model counts and modes")
		assert.Equal(t, want.Depths, got.Depths, "requests per root request by depth")
		assert.Equal(t, want.Roots, got.Roots, "root requests and storm radius")
	})

	for _, p := range []*scaleout.Phase{&rep.Measured, &rep.Scaled} {
		t.Run("every figure, over the "+p.Name+" phase", func(t *testing.T) {
			want, got := p.Gained[scaleout.Gateway], p.Gained[scaleout.Kafka]
			require.NotZero(t, want.Total(scaleout.FigCoincidental), "the phase has coincidental errors to judge")
			for _, d := range scaleout.Compare(want, got) {
				if d.Differing > 0 {
					t.Errorf("%s: %d of %d rows differ (gateway %v, Kafka %v)", d.Figure, d.Differing, d.Keys, d.Gateway, d.Other)
				}
			}
			assert.Equal(t, want, got)
		})
	}

	t.Run("hints", func(t *testing.T) {
		for _, p := range []*scaleout.Phase{&rep.Measured, &rep.Scaled} {
			var replicas []string
			for name := range p.Hints {
				if strings.HasPrefix(name, "analysis-") {
					replicas = append(replicas, name)
				}
			}
			slices.Sort(replicas)
			require.Len(t, replicas, map[string]int{"measured": 2, "scaled": 3}[p.Name], "analysis collectors serving hints in the %s phase", p.Name)
			for _, name := range replicas[1:] {
				assert.Equal(t, p.Hints[replicas[0]], p.Hints[name], "%s serves what %s serves (%s phase)", name, replicas[0], p.Name)
			}
		}
		// Before the rebalance, the merged model is the gateway's.
		assert.Equal(t, rep.Measured.Hints[scaleout.Gateway], rep.Measured.Hints["analysis-1"], "the replicas serve the gateway's hints")
	})

	t.Run("load balancer", func(t *testing.T) {
		// Each replica gets every other export request, so each inbound
		// span is counted once somewhere: requests served stay exact.
		assert.Equal(t, rep.Measured.Gained[scaleout.Gateway][scaleout.FigServed], rep.Measured.Gained[scaleout.LoadBalancer][scaleout.FigServed])
	})

	t.Run("rebalance", func(t *testing.T) {
		h := rep.Handover
		assert.Zero(t, h.Duplicates, "spans passed on twice")
		assert.Zero(t, h.Missing, "spans the front tier was sent and no analysis collector passed on")
		assert.Len(t, h.Delivered, 4, "spans passed on by each of the four analysis collectors")
		want, got := rep.Rebalanced.Gained[scaleout.Gateway], rep.Rebalanced.Gained[scaleout.Kafka]
		// A trace split at a handover is analysed in parts, each span in
		// one of them: what counts spans one by one is unchanged. (Its
		// failed requests are counted with their verdicts, and a trace in
		// parts is not judged: docs/design.md §8.1.)
		for _, fig := range []string{scaleout.FigServed, scaleout.FigRoots} {
			assert.Equal(t, want[fig], got[fig], "%s in the rebalance phase", fig)
		}
		for name, tel := range rep.Rebalanced.Telemetry {
			assert.Zero(t, tel.Dropped, "%s dropped spans", name)
		}
	})
}

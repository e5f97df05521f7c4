// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// scenarioRequests reads a scenario file's requests, one per line.
func scenarioRequests(t *testing.T, name string) []ptrace.Traces {
	t.Helper()
	var reqs []ptrace.Traces
	require.NoError(t, otlpfile.ReadFile(filepath.Join(repoRoot, "testdata", "scenarios", name+".json"), func(td ptrace.Traces) { reqs = append(reqs, td) }))
	return reqs
}

func canonicalJSON(t *testing.T, td ptrace.Traces) string {
	t.Helper()
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return string(b)
}

func TestCollectorEndToEnd(t *testing.T) {
	bin := buildCollector(t)
	c := startCollector(t, bin)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(c.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	grpcClient := ptraceotlp.NewGRPCClient(conn)
	sendGRPC := func(td ptrace.Traces) {
		_, err := grpcClient.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		require.NoError(t, err)
	}
	sendHTTP := func(td ptrace.Traces) { c.post(t, td) }
	verdicts := func(kind string) float64 {
		return c.metric(t, "otelcol_processor_errorownership_verdicts", `verdict="`+kind+`"`)
	}
	analysed := func() float64 { return c.metric(t, "otelcol_processor_errorownership_traces_analyzed") }

	var sent []string
	spans, traces := 0, 0
	send := func(td ptrace.Traces, over func(ptrace.Traces)) {
		over(td)
		sent = append(sent, canonicalJSON(t, td))
		spans += td.SpanCount()
		traces++ // each line of a scenario file is one trace
	}

	// The chain of docs/design.md §1 over OTLP/HTTP: d owns every error, whatever the
	// edges are learned as, so the counts are exact in any order.
	for _, td := range scenarioRequests(t, "chain_retry_every_hop") {
		send(td, sendHTTP)
	}
	// The coincidental story over OTLP/gRPC, twice: traces are analysed in
	// no fixed order, so in the first pass some coincidental errors meet an
	// edge not yet learned; those are held and judged again once the model
	// knows recommendations is fail-open, so that every one of the ten is
	// coincidental in both passes.
	coincidental := scenarioRequests(t, "coincidental")
	for _, td := range coincidental {
		send(td, sendGRPC)
	}
	// settled waits until every trace sent is analysed and no verdict is
	// held any more (held ones are judged again at a flush).
	settled := func() {
		t.Helper()
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			assert.Equal(ct, float64(traces), analysed(), "traces analysed")
			assert.Zero(ct, heldNow(ct, c.Process), "verdicts held, against those judged again")
		}, time.Minute, 100*time.Millisecond)
	}
	settled()
	require.Equal(t, float64(spans), c.metric(t, "otelcol_processor_errorownership_spans_seen"), "spans seen")
	assert.Equal(t, scenarioVerdicts(t, "chain_retry_every_hop")["own"]+scenarioVerdicts(t, "coincidental")["own"], verdicts("own"), "own")
	assert.Equal(t, 10.0, verdicts("coincidental"), "the first pass's coincidental errors, judged again once the edge was learned")
	for _, td := range coincidental {
		scenario.Restamp(td, 0xee)
		send(td, sendGRPC)
	}
	settled()
	assert.Equal(t, 20.0, verdicts("coincidental"), "the learned model judges the second pass's coincidental errors at once")
	// Every failed inbound span got one verdict: the chain's 150, and the
	// coincidental story's failed requests twice.
	want := total(scenarioVerdicts(t, "chain_retry_every_hop")) + 2*total(scenarioVerdicts(t, "coincidental"))
	assert.Equal(t, want, verdicts("own")+verdicts("propagated")+verdicts("coincidental"), "verdicts")
	assert.Zero(t, c.metric(t, "otelcol_processor_errorownership_panics_recovered"))
	c.stop(t)

	// Every span came out unchanged: each request is one line of the file
	// exporter's output, identical once both are marshalled the same way.
	var got []string
	require.NoError(t, otlpfile.ReadFile(c.outFile, func(td ptrace.Traces) { got = append(got, canonicalJSON(t, td)) }))
	slices.Sort(got)
	slices.Sort(sent)
	require.Equal(t, len(sent), len(got), "requests out")
	for i := range sent {
		require.JSONEq(t, sent[i], got[i])
	}
}

// scenarioVerdicts sums a scenario's expected verdicts by kind.
func scenarioVerdicts(t *testing.T, name string) map[string]float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "scenarios", name+".expected.json")) //nolint:gosec // G304: a scenario file of the repository's testdata, named by the test
	require.NoError(t, err)
	var e scenario.Expected
	require.NoError(t, json.Unmarshal(raw, &e))
	out := map[string]float64{}
	for _, svc := range e.Services {
		for kind, n := range svc.Verdicts {
			out[kind] += float64(n)
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	n := 0.0
	for _, v := range m {
		n += v
	}
	return n
}

// TestShippedConfigsValidate checks that the configurations the README and
// `make run` use are accepted by the built collector.
func TestShippedConfigsValidate(t *testing.T) {
	bin := buildCollector(t)
	for _, name := range []string{"otelcol-config.yaml", "otelcol-config-store.yaml", "otelcol-config-prometheus.yaml", "otelcol-config-sampled.yaml", "otelcol-kafka-front.yaml", "otelcol-kafka-analysis.yaml"} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(bin, "validate", "--config", filepath.Join(repoRoot, "testdata", name)).CombinedOutput() //nolint:gosec // G204: the collector the test built, on the repository's configs
			assert.NoError(t, err, "%s", out)
		})
	}
}

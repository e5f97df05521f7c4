// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"flag"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/ownership"
)

var update = flag.Bool("update", false, "rewrite the files in testdata/scenarios")

const scenarioDir = "../../../testdata/scenarios"

func TestFilesUpToDate(t *testing.T) {
	if *update {
		require.NoError(t, os.MkdirAll(scenarioDir, 0o755))
		require.NoError(t, WriteFiles(scenarioDir))
	}
	tmp := t.TempDir()
	require.NoError(t, WriteFiles(tmp))

	generated, err := filepath.Glob(filepath.Join(tmp, "*.json"))
	require.NoError(t, err)
	committed, err := filepath.Glob(filepath.Join(scenarioDir, "*.json"))
	require.NoError(t, err)
	assert.Equal(t, baseNames(generated), baseNames(committed), "scenario files; run go test ./internal/testsupport/scenario -run TestFilesUpToDate -update")
	for _, path := range generated {
		want, err := os.ReadFile(path) //nolint:gosec // G304: a file WriteFiles just wrote into t.TempDir
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(scenarioDir, filepath.Base(path)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is out of date; run go test ./internal/testsupport/scenario -run TestFilesUpToDate -update", filepath.Base(path))
		}
	}
}

func baseNames(paths []string) []string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	slices.Sort(names)
	return names
}

// TestFilesRoundTrip reads the traces back from their OTLP JSON lines.
func TestFilesRoundTrip(t *testing.T) {
	s := BrokenContext()
	data, err := MarshalTraces(s.Traces)
	require.NoError(t, err)
	var u ptrace.JSONUnmarshaler
	spans := 0
	for line := range bytes.Lines(data) {
		td, err := u.UnmarshalTraces(line)
		require.NoError(t, err)
		spans += td.SpanCount()
	}
	assert.Equal(t, s.Traces.SpanCount(), spans)
}

// spanInfo is what the structural checks need of a span.
type spanInfo struct {
	service string
	rsIndex int
	span    ptrace.Span
}

func collect(td ptrace.Traces) []spanInfo {
	var out []spanInfo
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		name, _ := rs.Resource().Attributes().Get("service.name")
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				out = append(out, spanInfo{service: name.Str(), rsIndex: i, span: spans.At(k)})
			}
		}
	}
	return out
}

type spanKey struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

func TestScenarios(t *testing.T) {
	for _, s := range All() {
		t.Run(s.Name, func(t *testing.T) {
			checkStructure(t, s)
			checkTruth(t, s)
		})
	}
}

// checkStructure checks the spans against Expected and the invariants of
// the simulator: IDs, parents, timing, resources.
func checkStructure(t *testing.T, s Scenario) {
	spans := collect(s.Traces)
	byID := map[spanKey]*spanInfo{}
	seen := map[pcommon.SpanID]bool{}
	for i := range spans {
		sp := spans[i].span
		require.False(t, sp.TraceID().IsEmpty(), "zero trace ID")
		require.False(t, sp.SpanID().IsEmpty(), "zero span ID")
		require.False(t, seen[sp.SpanID()], "span ID %s repeats", sp.SpanID())
		seen[sp.SpanID()] = true
		byID[spanKey{sp.TraceID(), sp.SpanID()}] = &spans[i]
	}

	served := map[string]int{}
	var roots, brokenContext, orphans int
	rsTrace := map[int]pcommon.TraceID{}
	for _, si := range spans {
		sp := si.span
		if id, ok := rsTrace[si.rsIndex]; ok {
			require.Equal(t, id, sp.TraceID(), "a ResourceSpans mixes traces")
		}
		rsTrace[si.rsIndex] = sp.TraceID()

		kind := sp.Kind()
		if kind == ptrace.SpanKindServer || kind == ptrace.SpanKindConsumer {
			served[si.service]++
		}
		d := sp.EndTimestamp().AsTime().Sub(sp.StartTimestamp().AsTime())
		assert.GreaterOrEqual(t, d, time.Millisecond, "span %s %q is too short", si.service, sp.Name())

		if sp.ParentSpanID().IsEmpty() {
			switch kind {
			case ptrace.SpanKindServer:
				roots++
			case ptrace.SpanKindClient, ptrace.SpanKindProducer:
				brokenContext++
			default:
				t.Errorf("parentless %s span %q", kind, sp.Name())
			}
			continue
		}
		parent, ok := byID[spanKey{sp.TraceID(), sp.ParentSpanID()}]
		if !ok {
			orphans++
			continue
		}
		p := parent.span
		if kind == ptrace.SpanKindServer && p.Kind() == ptrace.SpanKindClient && p.ParentSpanID().IsEmpty() {
			roots++ // the root request below a client at the edge
		}
		// A consumer runs after its producer; a callee may outlive a
		// caller that gave up on it. Everything else nests.
		if kind == ptrace.SpanKindConsumer || hasAttr(p, "error.type", errorTypeTimeout) {
			assert.GreaterOrEqual(t, sp.StartTimestamp(), p.StartTimestamp())
			continue
		}
		assert.True(t, p.StartTimestamp() <= sp.StartTimestamp() && sp.EndTimestamp() <= p.EndTimestamp(),
			"%s %q does not nest in %s %q", si.service, sp.Name(), parent.service, p.Name())
	}

	e := s.Expected
	assert.Equal(t, e.Roots, roots, "roots")
	assert.Equal(t, e.BrokenContext, brokenContext, "parentless client spans")
	assert.Equal(t, e.OrphanSpans, orphans, "orphans")
	for name, se := range e.Services {
		assert.Equal(t, se.Served, served[name], "served by %s", name)
	}
	for name := range served {
		assert.Contains(t, e.Services, name, "service with inbound spans missing from Expected")
	}
	checkSequentialAttempts(t, spans)
}

// checkSequentialAttempts checks that the attempts of one logical call
// (client spans of one parent to one peer operation) never overlap.
func checkSequentialAttempts(t *testing.T, spans []spanInfo) {
	type callKey struct {
		parent pcommon.SpanID
		name   string
	}
	last := map[callKey]ptrace.Span{}
	for _, si := range spans {
		sp := si.span
		if sp.Kind() != ptrace.SpanKindClient {
			continue
		}
		k := callKey{sp.ParentSpanID(), sp.Name()}
		if prev, ok := last[k]; ok && !sp.ParentSpanID().IsEmpty() {
			// The fanout's second pricing call and retries both start
			// after the previous span to the same operation ended.
			assert.GreaterOrEqual(t, sp.StartTimestamp(), prev.EndTimestamp(), "attempts of %q overlap", sp.Name())
		}
		last[k] = sp
	}
}

func hasAttr(sp ptrace.Span, key, value string) bool {
	v, ok := sp.Attributes().Get(key)
	return ok && v.AsString() == value
}

// checkTruth checks the hand-computed figures against what the simulator
// knows happened: served, retries, failures and claims per service, and
// the n and k of every listed edge against its mode.
func checkTruth(t *testing.T, s Scenario) {
	tr := s.truth
	e := s.Expected
	for name, se := range e.Services {
		st := tr.services[name]
		if st == nil {
			st = &serviceTruth{}
		}
		assert.Equal(t, st.served, se.Served, "%s served", name)
		assert.Equal(t, st.retries, se.RetriesReceived, "%s retries received", name)
		assert.Equal(t, st.failed, sum(se.Verdicts), "%s verdicts add up to its failures", name)
		assert.Equal(t, st.failed, sum(se.ExpectedClaims), "%s expected claims add up to its failures", name)
		if st.failed > 0 {
			assert.Equal(t, st.sent, se.SentClaims, "%s sent claims", name)
		}
		assert.Subset(t, []string{own, propagated, coincidental}, slices.Collect(maps.Keys(se.Verdicts)))
		assert.Subset(t, []string{claimed, unclaimed}, slices.Collect(maps.Keys(se.ExpectedClaims)))
	}

	modes := map[edgeKey]ownership.Mode{}
	for _, ee := range e.Edges {
		k := edgeKey{ee.Service, ee.Operation, ee.PeerService, ee.PeerOperation}
		modes[k] = ee.Mode
		var n, kk int
		if et := tr.edges[k]; et != nil {
			n, kk = et.n, et.k
		}
		assert.Equal(t, ee.Mode, mode(n, kk), "edge %v: k/n = %d/%d", k, kk, n)
	}

	// Verdicts and expected claims from the recorded calls, with the
	// listed edge modes (unlisted edges are unknown).
	verdicts := map[string]map[string]int{}
	claims := map[string]map[string]int{}
	for _, f := range tr.failures {
		v, c := judge(f.calls, modes)
		inc(verdicts, f.service, v)
		inc(claims, f.service, c)
	}
	for name, se := range e.Services {
		assert.Equal(t, nonEmpty(verdicts[name]), se.Verdicts, "%s verdicts", name)
		assert.Equal(t, nonEmpty(claims[name]), se.ExpectedClaims, "%s expected claims", name)
	}
}

// judge applies the claim decision table to one failed request.
func judge(calls []callRecord, modes map[edgeKey]ownership.Mode) (verdict, claim string) {
	var blocking []callRecord
	anyFailed := false
	for _, c := range calls {
		if !c.failed {
			continue
		}
		anyFailed = true
		if c.timedOut || modes[c.edge] != ownership.ModeFailOpen {
			blocking = append(blocking, c)
		}
	}
	switch {
	case !anyFailed:
		return own, claimed
	case len(blocking) == 0:
		return coincidental, claimed
	}
	for _, c := range blocking {
		if c.decision != ownership.DecisionNoPolicy || c.claim == ownership.ClaimUnclaimed {
			return propagated, unclaimed
		}
	}
	return propagated, claimed
}

// mode is the edge model's rule: Wilson score interval at z = 1.96, at
// least 20 failed calls.
func mode(n, k int) ownership.Mode {
	if n < 20 {
		return ownership.ModeUnknown
	}
	const z = 1.96
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	center := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	switch {
	case center-half >= 0.8:
		return ownership.ModeFailClose
	case center+half <= 0.2:
		return ownership.ModeFailOpen
	}
	return ownership.ModeUnknown
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func inc(m map[string]map[string]int, service, key string) {
	if m[service] == nil {
		m[service] = map[string]int{}
	}
	m[service][key]++
}

func nonEmpty(m map[string]int) map[string]int {
	if len(m) == 0 {
		return nil
	}
	return m
}

// TestMessyInstrumentation checks that the scenarios, together, hold the
// messy cases docs/design.md §4.1 names.
func TestMessyInstrumentation(t *testing.T) {
	var split, foreignResource bool
	for _, s := range All() {
		spans := collect(s.Traces)
		byID := map[pcommon.SpanID]spanInfo{}
		rsOf := map[pcommon.TraceID]map[string]map[int]bool{}
		for _, si := range spans {
			byID[si.span.SpanID()] = si
			tid := si.span.TraceID()
			if rsOf[tid] == nil {
				rsOf[tid] = map[string]map[int]bool{}
			}
			if rsOf[tid][si.service] == nil {
				rsOf[tid][si.service] = map[int]bool{}
			}
			rsOf[tid][si.service][si.rsIndex] = true
			if len(rsOf[tid][si.service]) > 1 {
				split = true
			}
		}
		for _, si := range spans {
			p, ok := byID[si.span.ParentSpanID()]
			if ok && si.span.Kind() == ptrace.SpanKindClient && p.span.Kind() == ptrace.SpanKindServer && p.service != si.service {
				foreignResource = true
			}
		}
	}
	assert.True(t, split, "some service's spans of one trace come in two ResourceSpans")
	assert.True(t, foreignResource, "some CLIENT span reports under another service.name than its parent")
}

func TestRetryMarkers(t *testing.T) {
	count := func(s Scenario, key string) int {
		n := 0
		for _, si := range collect(s.Traces) {
			if _, ok := si.span.Attributes().Get(key); ok {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 70, count(ChainRetryEveryHop(), ownership.AttrHTTPResendCount), "resends in the retry-every-hop chain")
	budget := ChainRetryBudget()
	assert.Zero(t, count(budget, ownership.AttrHTTPResendCount)+count(budget, ownership.AttrRetryAttempt), "the budget chain marks nothing")
	assert.Positive(t, count(ChainOwnership(), ownership.AttrRetryAttempt))
}

func TestSchedule(t *testing.T) {
	got := schedule(runs{"a", 2}, runs{"b", 4})
	assert.Equal(t, []string{"b", "a", "b", "b", "a", "b"}, got)
}

func TestMix(t *testing.T) {
	start := time.Now()
	td := Mix(10000, 1)
	t.Logf("Mix(10000): %d spans in %v", td.SpanCount(), time.Since(start))
	assert.InDelta(t, 200000, td.SpanCount(), 10000)

	var m ptrace.ProtoMarshaler
	a, err := m.MarshalTraces(Mix(300, 7))
	require.NoError(t, err)
	b, err := m.MarshalTraces(Mix(300, 7))
	require.NoError(t, err)
	assert.Equal(t, a, b, "same seed, same traces")
	c, err := m.MarshalTraces(Mix(300, 8))
	require.NoError(t, err)
	assert.NotEqual(t, a, c, "another seed, other traces")

	// About 5 % of the traces hold an error span; some calls are retried.
	failed := map[pcommon.TraceID]bool{}
	resends, kinds := 0, map[ptrace.SpanKind]int{}
	for _, si := range collect(td) {
		kinds[si.span.Kind()]++
		if si.span.Status().Code() == ptrace.StatusCodeError {
			failed[si.span.TraceID()] = true
		}
		if _, ok := si.span.Attributes().Get(ownership.AttrHTTPResendCount); ok {
			resends++
		}
	}
	assert.InDelta(t, 0.05, float64(len(failed))/10000, 0.02, "share of traces with an error")
	assert.Positive(t, resends)
	assert.InDelta(t, kinds[ptrace.SpanKindServer], kinds[ptrace.SpanKindClient], 1000)
}

func BenchmarkMix(b *testing.B) {
	for b.Loop() {
		Mix(1000, 1)
	}
}

func TestBySource(t *testing.T) {
	td := Mix(200, 1)
	batches := BySource(td, 64)
	total, tracesPerBatch := 0, 0
	seen := map[pcommon.TraceID]map[int]bool{}
	for i, b := range batches {
		require.Equal(t, 1, b.ResourceSpans().Len(), "one service a batch")
		spans := b.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		require.LessOrEqual(t, spans.Len(), 64)
		total += spans.Len()
		traces := map[pcommon.TraceID]bool{}
		for _, sp := range spans.All() {
			traces[sp.TraceID()] = true
			if seen[sp.TraceID()] == nil {
				seen[sp.TraceID()] = map[int]bool{}
			}
			seen[sp.TraceID()][i] = true
		}
		tracesPerBatch += len(traces)
	}
	assert.Equal(t, td.SpanCount(), total, "every span once")
	assert.Greater(t, float64(tracesPerBatch)/float64(len(batches)), 5.0, "a batch holds spans of many traces")
	batchesPerTrace := 0
	for _, b := range seen {
		batchesPerTrace += len(b)
	}
	assert.Greater(t, float64(batchesPerTrace)/float64(len(seen)), 3.0, "a trace arrives in several batches")
}

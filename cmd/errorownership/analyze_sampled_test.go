// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/internal/otlpfile"
)

// maxThreshold is 2^56, the range of sampling thresholds and randomness.
const maxThreshold = uint64(1) << 56

// parseTh reads a tracestate th value: 1 to 14 hex digits, trailing zeros
// left out.
func parseTh(t *testing.T, th string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(th, 16, 64)
	require.NoError(t, err)
	return n << (4 * (14 - len(th)))
}

// randomIDs gives every trace of td an ID whose last 56 bits are random, as
// an SDK's are: the scenarios number their traces, and consistent sampling
// takes its randomness from those bits. The first nine bytes stay, so IDs
// stay distinct; the same trace always gets the same ID.
func randomIDs(td ptrace.Traces) {
	forEachSpan(td, func(s ptrace.Span) {
		id := s.TraceID()
		z := binary.BigEndian.Uint64(id[:8])*0x9e3779b97f4a7c15 ^ binary.BigEndian.Uint64(id[8:])
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		var low [8]byte
		binary.BigEndian.PutUint64(low[:], z)
		copy(id[9:], low[1:])
		s.SetTraceID(id)
	})
}

// randomness is a trace ID's last 56 bits.
func randomness(id pcommon.TraceID) uint64 {
	return binary.BigEndian.Uint64(id[8:]) & (maxThreshold - 1)
}

// sampleCapture keeps the spans for which keep says yes (by trace), calling
// edit on each kept span, into a copy of td.
func sampleCapture(td ptrace.Traces, keep func(pcommon.TraceID) bool, edit func(ptrace.Span)) ptrace.Traces {
	out := ptrace.NewTraces()
	td.CopyTo(out)
	out.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(s ptrace.Span) bool {
				if !keep(s.TraceID()) {
					return true
				}
				edit(s)
				return false
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return out
}

func writeCapture(t *testing.T, path string, td ptrace.Traces) {
	t.Helper()
	doc, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, doc, 0o600))
}

// TestAnalyzeSampled is the acceptance test of weighted analysis: every
// bundled scenario, sampled as OpenTelemetry's consistent probability
// sampling does (a trace is kept iff its trace ID's last 56 bits are at
// least the threshold T, and each kept span says ot=th:T), is judged as the
// kept traces are without sampling information, and each verdict weighs
// 2^56/(2^56−T): the estimates per service and verdict are exactly that
// weight times the verdicts of the kept traces, beside their raw counts. A
// trace whose rv contradicts its th is counted as inconsistent_sampling and
// not judged; a "1 in N" attribute weighs N where there is no th.
func TestAnalyzeSampled(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.json"))
	require.NoError(t, err)
	all := ptrace.NewTraces()
	for _, f := range files {
		if filepath.Ext(f[:len(f)-len(".json")]) == ".expected" {
			continue
		}
		require.NoError(t, otlpfile.ReadFile(f, func(td ptrace.Traces) { td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans()) }))
	}
	randomIDs(all)
	traces := map[pcommon.TraceID]bool{}
	forEachSpan(all, func(s ptrace.Span) { traces[s.TraceID()] = true })

	tests := []struct {
		name string
		// th is the threshold each kept span carries (empty: none, and
		// keep is the kept traces' share, rate their attribute).
		th   string
		keep float64
		rate int
		// inconsistentEvery makes every n-th kept trace (by ID order) carry
		// a randomness rv below th, which contradicts its being kept.
		inconsistentEvery int
	}{
		{name: "p=0.25 (th:c, weight 4)", th: "c"},
		{name: "p=0.1 (th:e666, weight 65536/6554, as the probabilistic sampler writes it)", th: "e666"},
		{name: "p=0.1 to 14 digits (th:e6666666666666)", th: "e6666666666666"},
		{name: "p=0.25 with every third kept trace's rv below th", th: "c", inconsistentEvery: 3},
		{name: "1 in 8 by a sample-rate attribute, no th", keep: 0.125, rate: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var threshold uint64
			var weight float64
			if tt.th != "" {
				threshold = parseTh(t, tt.th)
				weight = float64(maxThreshold) / float64(maxThreshold-threshold)
			} else {
				threshold = uint64((1 - tt.keep) * float64(maxThreshold))
				weight = float64(tt.rate)
			}
			kept := map[pcommon.TraceID]bool{}
			for id := range traces {
				if randomness(id) >= threshold {
					kept[id] = true
				}
			}
			// Which kept traces are inconsistent: every n-th in ID order,
			// so that the case does not hang on map order.
			inconsistent := map[pcommon.TraceID]bool{}
			if tt.inconsistentEvery > 0 {
				byHex := map[string]pcommon.TraceID{}
				for id := range kept {
					byHex[hex.EncodeToString(id[:])] = id
				}
				for i, h := range sortedKeys(byHex) {
					if i%tt.inconsistentEvery == 0 {
						inconsistent[byHex[h]] = true
					}
				}
				require.NotEmpty(t, inconsistent)
			}
			require.NotEmpty(t, kept)
			require.Less(t, len(kept), len(traces), "the sampler drops traces")

			dir := t.TempDir()
			sampled := filepath.Join(dir, "sampled.json")
			writeCapture(t, sampled, sampleCapture(all, func(id pcommon.TraceID) bool { return kept[id] }, func(s ptrace.Span) {
				switch {
				case inconsistent[s.TraceID()]:
					// rv 0x10000000000000 < T: this trace cannot have been kept at th.
					s.TraceState().FromRaw(fmt.Sprintf("ot=th:%s;rv:10000000000000,vendor=x", tt.th))
				case tt.th != "":
					s.TraceState().FromRaw("vendor=x,ot=th:" + tt.th)
				default:
					s.Attributes().PutInt("SampleRate", int64(tt.rate))
				}
			}))
			// The truth: the kept traces that can be judged, as they are
			// judged without sampling information.
			truthFile := filepath.Join(dir, "truth.json")
			writeCapture(t, truthFile, sampleCapture(all, func(id pcommon.TraceID) bool { return kept[id] && !inconsistent[id] }, func(ptrace.Span) {}))

			args := []string{"analyze", "--format", "jsonl"}
			if tt.rate > 0 {
				args = append(args, "--sample-rate-attribute", "SampleRate")
			}
			out, stderr, err := runCLI(t, append(args, sampled)...)
			require.NoError(t, err, stderr)
			got := lines(t, out)
			out, stderr, err = runCLI(t, "analyze", "--format", "jsonl", truthFile)
			require.NoError(t, err, stderr)
			truth := lines(t, out)

			// The same verdicts on the same requests, each weighing the
			// trace's adjusted count.
			type request struct{ trace, span, service, verdict string }
			verdicts := func(ls []map[string]any) map[request]int {
				m := map[request]int{}
				for _, v := range ls {
					m[request{v["trace_id"].(string), v["span_id"].(string), v["service"].(string), v["verdict"].(string)}]++
				}
				return m
			}
			require.NotEmpty(t, truth["verdict"])
			t.Logf("%d of %d traces kept, %d of them inconsistent; %d verdicts at weight %v", len(kept), len(traces), len(inconsistent), len(truth["verdict"]), weight)
			assert.Equal(t, verdicts(truth["verdict"]), verdicts(got["verdict"]))
			weighed := map[[2]string]float64{}
			for _, v := range got["verdict"] {
				assert.Equal(t, weight, num(v["weight"]), "verdict %s/%s", v["trace_id"], v["span_id"])
				assert.Equal(t, "extrapolated", v["sampling"])
				weighed[[2]string{v["service"].(string), v["verdict"].(string)}] += num(v["weight"])
			}
			for _, v := range truth["verdict"] {
				assert.Equal(t, 1.0, num(v["weight"]))
				assert.Equal(t, "counted", v["sampling"])
			}

			// Per service and verdict: weight × the kept traces' count, the
			// raw count beside it.
			summary, truthSummary := got["summary"][0], truth["summary"][0]
			services := summary["services"].(map[string]any)
			checked := 0
			for svc, tc := range truthSummary["services"].(map[string]any) {
				want := tc.(map[string]any)
				c, ok := services[svc].(map[string]any)
				require.True(t, ok, "service %s in the summary", svc)
				for verdict, n := range want["verdicts_seen"].(map[string]any) {
					est := num(c["verdicts"].(map[string]any)[verdict])
					assert.Equal(t, num(n), num(c["verdicts_seen"].(map[string]any)[verdict]), "%s %s seen", svc, verdict)
					assert.InEpsilon(t, weight*num(n)+1, est+1, 1e-12, "%s %s: estimate %v of %v seen at weight %v", svc, verdict, est, n, weight)
					assert.InEpsilon(t, weight*num(n)+1, weighed[[2]string{svc, verdict}]+1, 1e-12, "%s %s: sum of the verdict lines' weights", svc, verdict)
					checked += int(num(n))
				}
				if tt.inconsistentEvery == 0 {
					// A trace whose weight is unknown counts its requests as
					// one each, unjudged: requests of that mix are no
					// multiple of the kept traces'.
					assert.InEpsilon(t, weight*num(want["requests_seen"]), num(c["requests"]), 1e-12, "%s requests", svc)
					assert.Equal(t, num(want["requests_seen"]), num(c["requests_seen"]), "%s requests seen", svc)
				}
			}
			assert.Equal(t, len(truth["verdict"]), checked, "every verdict of the kept traces is in the summary")
			assert.InEpsilon(t, weight*num(truthSummary["failed_requests_seen"]), num(summary["failed_requests"]), 1e-12)

			// Ratios of estimates equal the kept traces' ratios.
			ratios := func(ls map[string][]map[string]any) map[string]float64 {
				m := map[string]float64{}
				for _, a := range ls["accuracy"] {
					m["accuracy "+a["service"].(string)+" "+a["operation"].(string)] = num(a["accuracy"])
				}
				for _, a := range ls["amplification"] {
					if a["scope"] == "depth" {
						m[fmt.Sprint("per root ", a["root_operation"], a["depth"], a["service"])] = num(a["served_per_root"])
					}
				}
				return m
			}
			if tt.inconsistentEvery == 0 {
				assert.Equal(t, ratios(truth), ratios(got))
			}

			// Whole traces, by how they were weighed; incomplete ones by why.
			incomplete := summary["incomplete"].(map[string]any)
			truthIncomplete := truthSummary["incomplete"].(map[string]any)
			assert.Equal(t, float64(len(inconsistent)), num(incomplete["inconsistent_sampling"]), "inconsistent traces")
			for _, reason := range []string{"missing_parent", "missing_callee"} {
				assert.Equal(t, num(truthIncomplete[reason]), num(incomplete[reason]), reason)
			}
			assert.Equal(t, float64(len(kept)), num(summary["traces"]))
			assert.Zero(t, num(summary["traces_counted"]), "every kept trace says how it was sampled")
			assert.Equal(t, num(truthSummary["traces_counted"]), num(summary["traces_extrapolated"]))
			for _, v := range got["verdict"] {
				id, err := hex.DecodeString(v["trace_id"].(string))
				require.NoError(t, err)
				assert.False(t, inconsistent[pcommon.TraceID(id)], "an inconsistent trace is not judged: %s", v["trace_id"])
			}
		})
	}
}

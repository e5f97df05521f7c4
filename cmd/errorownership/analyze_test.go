// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

const scenarioDir = "../../testdata/scenarios"

// runCLI runs the command line in process and returns its output.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

// lines parses jsonl output into generic objects, grouped by "kind".
func lines(t *testing.T, out string) map[string][]map[string]any {
	t.Helper()
	byKind := map[string][]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		kind, _ := m["kind"].(string)
		require.NotEmpty(t, kind, "every line has a kind: %s", sc.Text())
		byKind[kind] = append(byKind[kind], m)
	}
	require.NoError(t, sc.Err())
	return byKind
}

// TestAnalyzeScenarios runs analyze over every committed scenario file and
// checks every figure its expected file holds.
func TestAnalyzeScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.expected.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "scenario files are missing")
	for _, expectedPath := range files {
		name := strings.TrimSuffix(filepath.Base(expectedPath), ".expected.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(expectedPath) //nolint:gosec // G304: a scenario file the test globbed from testdata
			require.NoError(t, err)
			var want scenario.Expected
			require.NoError(t, json.Unmarshal(raw, &want))

			out, stderr, err := runCLI(t, "analyze", "--format", "jsonl", filepath.Join(scenarioDir, name+".json"))
			require.NoError(t, err, stderr)
			got := lines(t, out)
			require.Len(t, got["summary"], 1)
			summary := got["summary"][0]

			// Verdicts and claims, per service, from the verdict lines.
			type counts map[string]int
			verdicts, sent, expected := map[string]counts{}, map[string]counts{}, map[string]counts{}
			add := func(m map[string]counts, svc, key string) {
				if m[svc] == nil {
					m[svc] = counts{}
				}
				m[svc][key]++
			}
			for _, v := range got["verdict"] {
				svc := v["service"].(string)
				add(verdicts, svc, v["verdict"].(string))
				add(sent, svc, v["claim_sent"].(string))
				add(expected, svc, v["claim_expected"].(string))
			}
			served := map[string]int{}
			received := map[string]int{}
			for _, a := range got["amplification"] {
				if a["scope"] == "service" {
					served[a["service"].(string)] = int(num(a["served"]))
					received[a["service"].(string)] = int(num(a["retries_received"]))
				}
			}
			for svc, w := range want.Services {
				assert.Equal(t, w.Served, served[svc], "%s served", svc)
				assert.Equal(t, w.RetriesReceived, received[svc], "%s retries received", svc)
				assert.Equal(t, nonEmpty(w.Verdicts), nonEmpty(verdicts[svc]), "%s verdicts", svc)
				assert.Equal(t, nonEmpty(w.SentClaims), nonEmpty(sent[svc]), "%s claims sent", svc)
				assert.Equal(t, nonEmpty(w.ExpectedClaims), nonEmpty(expected[svc]), "%s claims expected", svc)
			}

			modes := map[[4]string]string{}
			for _, e := range got["edge"] {
				modes[[4]string{e["service"].(string), e["operation"].(string), e["peer_service"].(string), e["peer_operation"].(string)}] = e["mode"].(string)
			}
			for _, e := range want.Edges {
				key := [4]string{e.Service, e.Operation, e.PeerService, e.PeerOperation}
				assert.Contains(t, modes, key, "edge %v", key)
				assert.Equal(t, e.Mode.String(), modes[key], "edge %v", key)
			}

			radius := map[string]int{}
			roots := 0
			for _, a := range got["amplification"] {
				if a["scope"] == "root" {
					radius[a["root_service"].(string)+" "+a["root_operation"].(string)] = int(num(a["storm_radius_max"]))
					roots += int(num(a["served"]))
				}
			}
			for op, r := range want.StormRadius {
				assert.Equal(t, r, radius[op], "storm radius of %s", op)
			}
			assert.Equal(t, want.Roots, roots, "root requests")
			unlinked := summary["unlinked"].(map[string]any)
			assert.Equal(t, want.BrokenContext, int(num(unlinked["root_outbound"])), "outbound spans without a request")
			assert.Equal(t, want.OrphanSpans, int(num(unlinked["orphans"])), "orphan spans")
			assert.Zero(t, num(summary["files_failed"]))
		})
	}
}

// TestAnalyzeServedPerRoot checks the tables of docs/design.md §1: requests served per
// node per root request, by depth, for the A–G chain under each policy.
func TestAnalyzeServedPerRoot(t *testing.T) {
	tests := []struct {
		file    string
		perRoot []float64 // a..g, exact
		maxDG   float64   // with the bound of docs/design.md §1 for d..g, when not exact
	}{
		{file: "chain_retry_every_hop", perRoot: []float64{1, 2, 4, 8, 8, 8, 8}},
		{file: "chain_retry_budget", perRoot: []float64{1, 1.1, 1.21, 1.33, 1.33, 1.33, 1.33}, maxDG: 1.331},
		{file: "chain_ownership", perRoot: []float64{1, 1, 1, 1.1, 1.1, 1.1, 1.1}, maxDG: 1.1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, stderr, err := runCLI(t, "analyze", "--format", "jsonl", filepath.Join(scenarioDir, tt.file+".json"))
			require.NoError(t, err, stderr)
			perRoot := map[string]float64{}
			depth := map[string]int{}
			for _, a := range lines(t, out)["amplification"] {
				if a["scope"] == "depth" {
					perRoot[a["service"].(string)] += num(a["served_per_root"])
					depth[a["service"].(string)] = int(num(a["depth"]))
				}
			}
			for i, svc := range []string{"a", "b", "c", "d", "e", "f", "g"} {
				assert.Equal(t, i, depth[svc], "depth of %s", svc)
				assert.InDelta(t, tt.perRoot[i], perRoot[svc], 0.005, "%s served per root", svc)
				if tt.maxDG > 0 && i >= 3 {
					assert.LessOrEqual(t, perRoot[svc], tt.maxDG, "%s within the bound of docs/design.md §1", svc)
				}
			}
		})
	}
}

func TestAnalyzeFormatsAndInputs(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(scenarioDir, "missing_claims.json")

	// The same traces as one protobuf ExportTraceServiceRequest and as one
	// indented JSON document.
	all := ptrace.NewTraces()
	require.NoError(t, otlpfile.ReadFile(src, func(td ptrace.Traces) { td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans()) }))
	body, err := ptraceotlp.NewExportRequestFromTraces(all).MarshalProto()
	require.NoError(t, err)
	pb := filepath.Join(dir, "traces.pb")
	require.NoError(t, os.WriteFile(pb, body, 0o644))
	doc, err := (&ptrace.JSONMarshaler{}).MarshalTraces(all)
	require.NoError(t, err)
	var indented bytes.Buffer
	require.NoError(t, json.Indent(&indented, doc, "", "  "))
	pretty := filepath.Join(dir, "pretty.json")
	require.NoError(t, os.WriteFile(pretty, indented.Bytes(), 0o644))

	want, _, err := runCLI(t, "analyze", "--format", "jsonl", src)
	require.NoError(t, err)
	for _, f := range []string{pb, pretty} {
		got, stderr, err := runCLI(t, "analyze", "--format", "jsonl", f)
		require.NoError(t, err, stderr)
		assert.Equal(t, lines(t, want)["verdict"], lines(t, got)["verdict"], f)
	}

	table, _, err := runCLI(t, "analyze", src)
	require.NoError(t, err)
	for _, heading := range []string{"VERDICTS", "EDGES", "CLAIM ACCURACY", "AMPLIFICATION", "SUMMARY", "missing_downstream_claim"} {
		assert.Contains(t, table, heading)
	}
}

func TestAnalyzeBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := map[string]string{
		"garbage.pb":     "\xff\xff\xff\xff not protobuf",
		"broken.json":    `{"resourceSpans": [`,
		"notobject.json": "{}\n[1, 2]\n",
	}
	var paths []string
	for name, body := range bad {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		paths = append(paths, p)
	}
	good := filepath.Join(scenarioDir, "http_4xx.json")
	missing := filepath.Join(dir, "absent.json")
	out, stderr, err := runCLI(t, append([]string{"analyze", "--format", "jsonl", good, missing}, paths...)...)

	var ee *exitError
	require.True(t, errors.As(err, &ee), "error %v", err)
	assert.Equal(t, 2, ee.code)
	for _, p := range append(paths, missing) {
		assert.Contains(t, stderr, p, "the error names the file")
	}
	assert.Contains(t, stderr, "OTLP JSON document 1")
	assert.Contains(t, stderr, "OTLP JSON document 2 (byte 2): not a JSON object")
	summary := lines(t, out)["summary"][0]
	assert.Equal(t, 4.0, summary["files_failed"])
	assert.Equal(t, 300.0, summary["requests"], "the good file is still analysed: web and users serve 150 each")

	_, _, err = runCLI(t, "analyze", "--format", "xml", good)
	assert.ErrorContains(t, err, `--format "xml": use table or jsonl`)
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// nonEmpty drops zero counts so that absent and zero compare equal.
func nonEmpty[M ~map[string]int](m M) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestAnalyzeNoSpans: input that reads but holds no span is an error that
// says what analyze reads, not an empty report.
func TestAnalyzeNoSpans(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body string }{
		{"JSON that is no OTLP export", `{"hello":"world"}`},
		{"an empty file", ""},
		{"an export without spans", `{"resourceSpans":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			require.NoError(t, os.WriteFile(path, []byte(tc.body), 0o600))
			out, _, err := runCLI(t, "analyze", path)
			var ee *exitError
			require.True(t, errors.As(err, &ee), "error %v", err)
			assert.Equal(t, 2, ee.code)
			assert.ErrorContains(t, err, "no spans in "+path+": analyze reads OTLP trace exports")
			assert.Empty(t, out, "no empty report")
		})
	}
}

// TestAnalyzeClockAhead: a capture taken just now, with one span from a
// host whose clock runs a day ahead. Under --half-life the span counts as
// made now, as in the processor, so the learned edges keep their evidence
// and the coincidental errors are still found; the summary's unlinked
// counts are the unlinked spans only.
func TestAnalyzeClockAhead(t *testing.T) {
	all := ptrace.NewTraces()
	require.NoError(t, otlpfile.ReadFile(filepath.Join(scenarioDir, "coincidental.json"), func(td ptrace.Traces) {
		td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}))
	var newest pcommon.Timestamp
	forEachSpan(all, func(s ptrace.Span) { newest = max(newest, s.EndTimestamp()) })
	shift := time.Now().Add(-time.Minute).Sub(newest.AsTime())
	forEachSpan(all, func(s ptrace.Span) {
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(s.StartTimestamp().AsTime().Add(shift)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(s.EndTimestamp().AsTime().Add(shift)))
	})
	// One more checkout, on a host a day ahead: its server span and its
	// call to a service of its own, both dated tomorrow.
	ahead := all.ResourceSpans().AppendEmpty()
	ahead.Resource().Attributes().PutStr("service.name", "clock-ahead")
	tomorrow := time.Now().Add(24 * time.Hour)
	spans := ahead.ScopeSpans().AppendEmpty().Spans()
	for i, kind := range []ptrace.SpanKind{ptrace.SpanKindServer, ptrace.SpanKindClient} {
		span := spans.AppendEmpty()
		span.SetName("GET /tick")
		span.SetKind(kind)
		span.SetTraceID(pcommon.TraceID{0xaa, 1})
		span.SetSpanID(pcommon.SpanID{0xaa, byte(i + 1)})
		if i > 0 {
			span.SetParentSpanID(pcommon.SpanID{0xaa, 1})
			span.Attributes().PutStr("server.address", "clock.internal")
			span.Attributes().PutInt("server.port", 80)
		}
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(tomorrow))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(tomorrow.Add(time.Millisecond)))
	}
	doc, err := (&ptrace.JSONMarshaler{}).MarshalTraces(all)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "capture.json")
	require.NoError(t, os.WriteFile(path, doc, 0o600))

	out, stderr, err := runCLI(t, "analyze", "--format", "jsonl", "--half-life", "10m", path)
	require.NoError(t, err, stderr)
	got := lines(t, out)
	summary := got["summary"][0]
	assert.Equal(t, 10.0, summary["verdicts"].(map[string]any)["coincidental"], "the coincidental errors, found under decay")
	assert.NotContains(t, summary["unlinked"], "spans", "unlinked counts only the unlinked spans")
	modes := map[string]string{}
	for _, e := range got["edge"] {
		modes[e["peer_service"].(string)] = e["mode"].(string)
	}
	assert.Equal(t, "fail_open", modes["recommendations"], "the tolerated edge keeps its evidence")
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	for i := range td.ResourceSpans().Len() {
		rs := td.ResourceSpans().At(i)
		for j := range rs.ScopeSpans().Len() {
			ss := rs.ScopeSpans().At(j).Spans()
			for k := range ss.Len() {
				f(ss.At(k))
			}
		}
	}
}

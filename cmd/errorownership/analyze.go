// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	da "github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/ownership"
)

func newAnalyzeCommand() *cobra.Command {
	cfg := da.DefaultConfig()
	cfg.EdgeModel.HalfLife = 0 // offline, every span in the files weighs the same
	var format string
	var maxVerdicts int
	cmd := &cobra.Command{
		Use:   "analyze [--format table|jsonl] FILE...",
		Short: "Give verdicts, edge modes and amplification for OTLP trace files",
		Long: `analyze reads OTLP trace files — protobuf ExportTraceServiceRequest bodies
(.pb, as sent over OTLP/HTTP) or OTLP JSON (one request per line, as the
collector's file exporter writes, or one document) — learns the edge model
over all of the input, then prints a verdict for every failed inbound request,
each edge with its mode, claim accuracy, amplification and a summary.

A file that cannot be read is named on standard error and the others are
still analysed; the exit status is then 2. Input that reads but holds no
span (an empty file, JSON that is not an OTLP export) is an error too.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if format != "table" && format != "jsonl" {
				return fmt.Errorf("--format %q: use table or jsonl", format)
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			rep, readErr := analyzeFiles(cfg, files, cmd.ErrOrStderr())
			if readErr == nil && rep.summary.Spans == 0 && rep.summary.MalformedSpans == 0 {
				return &exitError{code: 2, err: fmt.Errorf("no spans in %s: analyze reads OTLP trace exports, protobuf ExportTraceServiceRequest bodies or OTLP JSON with resourceSpans, as the collector's file exporter writes them", strings.Join(files, ", "))}
			}
			var err error
			if format == "jsonl" {
				err = rep.writeJSONL(cmd.OutOrStdout())
			} else {
				err = rep.writeTable(cmd.OutOrStdout(), maxVerdicts)
			}
			if err != nil {
				return err
			}
			if readErr != nil {
				return &exitError{code: 2, err: readErr}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "table", "output format: table or jsonl")
	f.IntVar(&maxVerdicts, "max-verdicts", 50, "table format: print at most this many verdicts (0: all); jsonl prints all")
	f.IntVar(&cfg.EdgeModel.MinSamples, "min-samples", cfg.EdgeModel.MinSamples, "failed calls an edge needs before it gets a mode")
	f.Float64Var(&cfg.EdgeModel.FailCloseThreshold, "fail-close-threshold", cfg.EdgeModel.FailCloseThreshold, "lower bound of P(request fails | call failed) for fail-close")
	f.Float64Var(&cfg.EdgeModel.FailOpenThreshold, "fail-open-threshold", cfg.EdgeModel.FailOpenThreshold, "upper bound of P(request fails | call failed) for fail-open")
	f.DurationVar(&cfg.EdgeModel.HalfLife, "half-life", 0, "let older spans weigh less (0: all weigh the same)")
	f.BoolVar(&cfg.Classification.HTTPClientErrors, "http-4xx-is-error", false, "count HTTP 4xx responses as errors")
	return cmd
}

// report is what analyze found, resolved to names.
type report struct {
	verdicts []verdictLine
	syms     *da.Symbols
	model    *da.EdgeModel
	stats    *da.Stats
	summary  summaryLine
}

type failedCallLine struct {
	PeerService   string `json:"peer_service"`
	PeerOperation string `json:"peer_operation"`
	EdgeMode      string `json:"edge_mode"`
	Attempts      int    `json:"attempts"`
	ClaimReceived string `json:"claim_received"`
	RetryDecision string `json:"retry_decision,omitempty"`
	InFlight      bool   `json:"in_flight,omitempty"`
}

type verdictLine struct {
	Kind          string           `json:"kind"`
	TraceID       string           `json:"trace_id"`
	SpanID        string           `json:"span_id"`
	Service       string           `json:"service"`
	Operation     string           `json:"operation"`
	Verdict       string           `json:"verdict"`
	ClaimSent     string           `json:"claim_sent"`
	ClaimExpected string           `json:"claim_expected"`
	Reason        string           `json:"reason"`
	TimedOut      bool             `json:"timed_out,omitempty"`
	FailedCalls   []failedCallLine `json:"failed_calls"`
}

type summaryLine struct {
	Kind           string            `json:"kind"`
	Files          int               `json:"files"`
	FilesFailed    int               `json:"files_failed"`
	Traces         uint64            `json:"traces"`
	Spans          uint64            `json:"spans"`
	MalformedSpans uint64            `json:"malformed_spans"`
	Unlinked       unlinkedLine      `json:"unlinked"`
	Requests       uint64            `json:"requests"`
	Failed         uint64            `json:"failed_requests"`
	Verdicts       map[string]uint64 `json:"verdicts"`
	Edges          map[string]int    `json:"edges"`
}

// unlinkedLine counts the spans that could not be linked into a request,
// by why (dependencyanalysis.LinkStats without its total).
type unlinkedLine struct {
	Duplicates   uint64 `json:"duplicate_span_ids"`
	SelfParents  uint64 `json:"self_parents"`
	Cycles       uint64 `json:"cycles"`
	Orphans      uint64 `json:"orphans"`
	RootOutbound uint64 `json:"root_outbound"`
}

// analyzeFiles reads every file, learns the edge model over all of them,
// then judges every trace. Unreadable files are reported to errw and
// joined into the returned error; the report covers the rest.
func analyzeFiles(cfg da.Config, files []string, errw io.Writer) (*report, error) {
	rep := &report{
		syms:    da.NewSymbols(0),
		stats:   da.NewStats(),
		summary: summaryLine{Kind: "summary", Files: len(files), Verdicts: map[string]uint64{}, Edges: map[string]int{}},
	}
	// Spans dated ahead of this machine's clock count as made now, as in
	// the processor: one host whose clock runs a day ahead must not age
	// every other observation away under --half-life.
	rep.model = da.NewEdgeModel(cfg.EdgeModel, da.WithClock(time.Now))
	ex := da.NewExtractor(cfg, rep.syms)
	var spans []da.Record
	var errs []error
	for _, path := range files {
		err := otlpfile.ReadFile(path, func(td ptrace.Traces) { spans = ex.Append(spans, td) })
		if err != nil {
			fmt.Fprintln(errw, "errorownership analyze:", err)
			errs = append(errs, err)
			rep.summary.FilesFailed++
		}
	}
	rep.summary.MalformedSpans = ex.Malformed

	an := da.NewAnalyzer()
	da.ForEachTrace(spans, func(id pcommon.TraceID, trace []da.Span) { rep.model.Observe(an.Link(id, trace)) })
	da.ForEachTrace(spans, func(id pcommon.TraceID, trace []da.Span) {
		tr := an.Link(id, trace)
		vs := an.Judge(tr, rep.model)
		rep.stats.Add(tr, vs)
		for i := range vs {
			rep.verdicts = append(rep.verdicts, rep.verdictLine(tr, &vs[i]))
		}
	})

	s := &rep.summary
	s.Traces = rep.stats.Traces
	s.Spans = rep.stats.Link.Spans
	l := rep.stats.Link
	s.Unlinked = unlinkedLine{Duplicates: l.Duplicates, SelfParents: l.SelfParents, Cycles: l.Cycles, Orphans: l.Orphans, RootOutbound: l.RootOutbound}
	for _, op := range rep.stats.Operations {
		s.Requests += op.Served
		s.Failed += op.Failed
		for k := da.VerdictOwn; k <= da.VerdictCoincidental; k++ {
			s.Verdicts[k.String()] += op.Verdicts[k]
		}
	}
	rep.model.Edges(func(_ da.EdgeKey, est da.Estimate, _ []da.Symbol) { s.Edges[est.Mode.String()]++ })
	return rep, errors.Join(errs...)
}

func (rep *report) verdictLine(tr *da.Trace, v *da.Verdict) verdictLine {
	req := tr.RequestSpan(&tr.Requests[v.Request])
	line := verdictLine{
		Kind:          "verdict",
		TraceID:       hex.EncodeToString(tr.ID[:]),
		SpanID:        hex.EncodeToString(req.SpanID[:]),
		Service:       rep.syms.Name(req.Service),
		Operation:     rep.syms.Name(req.Operation),
		Verdict:       v.Kind.String(),
		ClaimSent:     v.Sent.String(),
		ClaimExpected: v.Expected.String(),
		Reason:        v.Reason.String(),
		TimedOut:      v.TimedOut,
		FailedCalls:   []failedCallLine{},
	}
	for _, ci := range v.FailedCalls {
		c := &tr.Calls[ci]
		mode := rep.model.Mode(da.EdgeKey{Service: req.Service, Operation: req.Operation, PeerService: c.PeerService, PeerOperation: c.PeerOperation})
		line.FailedCalls = append(line.FailedCalls, failedCallLine{
			PeerService:   rep.syms.Name(c.PeerService),
			PeerOperation: rep.syms.Name(c.PeerOperation),
			EdgeMode:      mode.String(),
			Attempts:      c.Attempts(),
			ClaimReceived: c.Claim.String(),
			RetryDecision: c.Decision.String(),
			InFlight:      c.InFlight && v.TimedOut,
		})
	}
	return line
}

type edgeLine struct {
	Kind                     string            `json:"kind"`
	Service                  string            `json:"service"`
	Operation                string            `json:"operation"`
	PeerService              string            `json:"peer_service"`
	PeerOperation            string            `json:"peer_operation"`
	Mode                     string            `json:"mode"`
	Lower                    float64           `json:"p_request_fails_lower"`
	Upper                    float64           `json:"p_request_fails_upper"`
	PeerAddresses            []string          `json:"peer_addresses,omitempty"`
	FailedAlone              float64           `json:"failed_alone"`
	FailedAloneRequestFailed float64           `json:"failed_alone_request_failed"`
	Samples                  float64           `json:"samples"`
	CallOK                   float64           `json:"call_ok"`
	CallOKRequestFailed      float64           `json:"call_ok_request_failed"`
	LogicalCalls             uint64            `json:"logical_calls"`
	FailedCalls              uint64            `json:"failed_calls"`
	Attempts                 uint64            `json:"attempts"`
	Retries                  uint64            `json:"retries"`
	RetriesSuppressed        uint64            `json:"retries_suppressed"`
	Decisions                map[string]uint64 `json:"retry_decisions,omitempty"`
}

func (rep *report) edges() []edgeLine {
	var out []edgeLine
	rep.model.Edges(func(k da.EdgeKey, est da.Estimate, addrs []da.Symbol) {
		e := edgeLine{
			Kind:                     "edge",
			Service:                  rep.syms.Name(k.Service),
			Operation:                rep.syms.Name(k.Operation),
			PeerService:              nameOr(rep.syms.Name(k.PeerService), "unknown"),
			PeerOperation:            rep.syms.Name(k.PeerOperation),
			Mode:                     est.Mode.String(),
			Lower:                    round(est.Lower),
			Upper:                    round(est.Upper),
			FailedAlone:              est.Counts.Failed,
			FailedAloneRequestFailed: est.Counts.FailedRequestFailed,
			Samples:                  est.Counts.Samples,
			CallOK:                   est.Counts.OK,
			CallOKRequestFailed:      est.Counts.OKRequestFailed,
		}
		for _, a := range addrs {
			e.PeerAddresses = append(e.PeerAddresses, rep.syms.Name(a))
		}
		slices.Sort(e.PeerAddresses)
		if st := rep.stats.Edges[k]; st != nil {
			e.LogicalCalls, e.FailedCalls, e.Attempts, e.Retries = st.Calls, st.FailedCalls, st.Attempts, st.Retries
			e.RetriesSuppressed = st.Suppressed()
			for d, n := range st.Decisions {
				if n > 0 && d != int(ownership.DecisionNone) {
					if e.Decisions == nil {
						e.Decisions = map[string]uint64{}
					}
					e.Decisions[ownership.RetryDecision(d).String()] = n
				}
			}
		}
		out = append(out, e)
	})
	slices.SortFunc(out, func(a, b edgeLine) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Operation, b.Operation),
			cmp.Compare(a.PeerService, b.PeerService), cmp.Compare(a.PeerOperation, b.PeerOperation))
	})
	return out
}

type accuracyLine struct {
	Kind      string `json:"kind"`
	Service   string `json:"service"`
	Operation string `json:"operation"`
	Failed    uint64 `json:"failed_requests"`
	// Matrix is claim sent → verdict → count.
	Matrix   map[string]map[string]uint64 `json:"matrix"`
	Correct  uint64                       `json:"claims_correct"`
	Accuracy float64                      `json:"accuracy"`
}

func (rep *report) accuracy() []accuracyLine {
	var out []accuracyLine
	for k, op := range rep.stats.Operations {
		if op.Failed == 0 {
			continue
		}
		l := accuracyLine{
			Kind: "accuracy", Service: rep.syms.Name(k.Service), Operation: rep.syms.Name(k.Operation),
			Failed: op.Failed, Correct: op.ClaimsCorrect, Matrix: map[string]map[string]uint64{},
			Accuracy: round(float64(op.ClaimsCorrect) / float64(op.Failed)),
		}
		for sent := range op.Claims {
			row := map[string]uint64{}
			for v := da.VerdictOwn; v <= da.VerdictCoincidental; v++ {
				if n := op.Claims[sent][v]; n > 0 {
					row[v.String()] = n
				}
			}
			if len(row) > 0 {
				l.Matrix[ownership.Claim(sent).String()] = row
			}
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b accuracyLine) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Operation, b.Operation))
	})
	return out
}

// amplificationLine is one of three scopes: "service" (per service),
// "depth" (requests served per root request, by depth below a root
// operation) and "root" (per root operation, with its storm radius).
type amplificationLine struct {
	Kind              string  `json:"kind"`
	Scope             string  `json:"scope"`
	Service           string  `json:"service,omitempty"`
	RootService       string  `json:"root_service,omitempty"`
	RootOperation     string  `json:"root_operation,omitempty"`
	Depth             *int    `json:"depth,omitempty"`
	Served            uint64  `json:"served"`
	PerRoot           float64 `json:"served_per_root,omitempty"`
	RetriesReceived   uint64  `json:"retries_received,omitempty"`
	RetriesSent       uint64  `json:"retries_sent,omitempty"`
	RetriesSuppressed uint64  `json:"retries_suppressed,omitempty"`
	StormRadius       *int    `json:"storm_radius_max,omitempty"`
	StormRadiusMean   float64 `json:"storm_radius_mean,omitempty"`
}

func (rep *report) amplification() []amplificationLine {
	type svcAgg struct{ served, received, sent, suppressed uint64 }
	bySvc := map[string]*svcAgg{}
	agg := func(name string) *svcAgg {
		if bySvc[name] == nil {
			bySvc[name] = &svcAgg{}
		}
		return bySvc[name]
	}
	for k, op := range rep.stats.Operations {
		a := agg(rep.syms.Name(k.Service))
		a.served += op.Served
		a.received += op.RetriesReceived
	}
	for k, e := range rep.stats.Edges {
		a := agg(rep.syms.Name(k.Service))
		a.sent += e.Retries
		a.suppressed += e.Suppressed()
	}
	var out []amplificationLine
	for _, name := range sortedKeys(bySvc) {
		a := bySvc[name]
		out = append(out, amplificationLine{Kind: "amplification", Scope: "service", Service: name,
			Served: a.served, RetriesReceived: a.received, RetriesSent: a.sent, RetriesSuppressed: a.suppressed})
	}
	var depth []amplificationLine
	for k, n := range rep.stats.Depths {
		root := rep.stats.Roots[da.OperationKey{Service: k.RootService, Operation: k.RootOperation}]
		d := int(k.Depth)
		depth = append(depth, amplificationLine{Kind: "amplification", Scope: "depth",
			RootService: rep.syms.Name(k.RootService), RootOperation: rep.syms.Name(k.RootOperation),
			Depth: &d, Service: rep.syms.Name(k.Service), Served: n.N, PerRoot: round(float64(n.N) / float64(root.Requests))})
	}
	slices.SortFunc(depth, func(a, b amplificationLine) int {
		return cmp.Or(cmp.Compare(a.RootService, b.RootService), cmp.Compare(a.RootOperation, b.RootOperation),
			cmp.Compare(*a.Depth, *b.Depth), cmp.Compare(a.Service, b.Service))
	})
	var roots []amplificationLine
	for k, r := range rep.stats.Roots {
		radius := r.RadiusMax
		roots = append(roots, amplificationLine{Kind: "amplification", Scope: "root",
			RootService: rep.syms.Name(k.Service), RootOperation: rep.syms.Name(k.Operation),
			Served: r.Requests, StormRadius: &radius, StormRadiusMean: round(float64(r.RadiusSum) / float64(r.Requests))})
	}
	slices.SortFunc(roots, func(a, b amplificationLine) int {
		return cmp.Or(cmp.Compare(a.RootService, b.RootService), cmp.Compare(a.RootOperation, b.RootOperation))
	})
	return append(append(out, depth...), roots...)
}

func (rep *report) writeJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, v := range rep.verdicts {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	for _, e := range rep.edges() {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	for _, a := range rep.accuracy() {
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	for _, a := range rep.amplification() {
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	return enc.Encode(rep.summary)
}

func (rep *report) writeTable(w io.Writer, maxVerdicts int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title, header string) {
		fmt.Fprintf(tw, "\n%s\n%s\n", title, header)
	}
	section("VERDICTS", "TRACE\tSPAN\tSERVICE\tOPERATION\tVERDICT\tREASON\tCLAIM SENT\tEXPECTED\tFAILED CALLS")
	for i, v := range rep.verdicts {
		if maxVerdicts > 0 && i == maxVerdicts {
			fmt.Fprintf(tw, "… %d more (--max-verdicts 0 or --format jsonl for all)\n", len(rep.verdicts)-i)
			break
		}
		calls := ""
		for i, c := range v.FailedCalls {
			if i > 0 {
				calls += ", "
			}
			calls += fmt.Sprintf("%s %s (%s, %d attempts, %s)", c.PeerService, c.PeerOperation, c.EdgeMode, c.Attempts, c.ClaimReceived)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.TraceID, v.SpanID, v.Service, v.Operation,
			v.Verdict, v.Reason, v.ClaimSent, v.ClaimExpected, calls)
	}
	section("EDGES", "SERVICE\tOPERATION\tPEER\tPEER OPERATION\tMODE\tP(FAIL|CALL FAILED ALONE)\tFAILED ALONE\tCALLS\tATTEMPTS\tRETRIES\tSUPPRESSED")
	for _, e := range rep.edges() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f–%.2f\t%g/%g\t%d\t%d\t%d\t%d\n", e.Service, e.Operation, e.PeerService,
			e.PeerOperation, e.Mode, e.Lower, e.Upper, e.FailedAloneRequestFailed, e.FailedAlone, e.LogicalCalls, e.Attempts, e.Retries, e.RetriesSuppressed)
	}
	section("CLAIM ACCURACY", "SERVICE\tOPERATION\tFAILED\tCORRECT\tACCURACY\tSENT → VERDICT")
	for _, a := range rep.accuracy() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%s\n", a.Service, a.Operation, a.Failed, a.Correct, a.Accuracy, matrixString(a.Matrix))
	}
	section("AMPLIFICATION", "SCOPE\tROOT\tDEPTH\tSERVICE\tSERVED\tPER ROOT\tRETRIES IN\tRETRIES OUT\tSUPPRESSED\tSTORM RADIUS")
	for _, a := range rep.amplification() {
		root, depth, radius := "", "", ""
		if a.RootService != "" {
			root = a.RootService + " " + a.RootOperation
		}
		if a.Depth != nil {
			depth = fmt.Sprint(*a.Depth)
		}
		if a.StormRadius != nil {
			radius = fmt.Sprintf("%d (mean %.2f)", *a.StormRadius, a.StormRadiusMean)
		}
		perRoot := ""
		if a.PerRoot > 0 {
			perRoot = fmt.Sprintf("%.2f Ƞ", a.PerRoot)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\n", a.Scope, root, depth, a.Service, a.Served, perRoot,
			a.RetriesReceived, a.RetriesSent, a.RetriesSuppressed, radius)
	}
	s := rep.summary
	fmt.Fprintf(tw, "\nSUMMARY\n")
	fmt.Fprintf(tw, "files\t%d (%d unreadable)\n", s.Files, s.FilesFailed)
	fmt.Fprintf(tw, "traces\t%d\nspans\t%d (%d malformed, skipped)\n", s.Traces, s.Spans, s.MalformedSpans)
	fmt.Fprintf(tw, "requests\t%d (%d failed: %d own, %d propagated, %d coincidental)\n", s.Requests, s.Failed,
		s.Verdicts["own"], s.Verdicts["propagated"], s.Verdicts["coincidental"])
	fmt.Fprintf(tw, "edges\t%d fail_close, %d fail_open, %d unknown\n", s.Edges["fail_close"], s.Edges["fail_open"], s.Edges["unknown"])
	u := s.Unlinked
	fmt.Fprintf(tw, "not linked\t%d orphans (parent absent), %d outbound without a request (edge clients or broken context), %d duplicate IDs, %d self-parents, %d cycles\n",
		u.Orphans, u.RootOutbound, u.Duplicates, u.SelfParents, u.Cycles)
	return tw.Flush()
}

func matrixString(m map[string]map[string]uint64) string {
	out := ""
	for _, sent := range sortedKeys(m) {
		for _, v := range sortedKeys(m[sent]) {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%s→%s %d", sent, v, m[sent][v])
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func nameOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func round(f float64) float64 { return float64(int64(f*10000+0.5)) / 10000 }

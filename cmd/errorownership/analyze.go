// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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

Each trace weighs its adjusted count, how many traces of all traffic it
stands for: 2^56/(2^56−T) for OpenTelemetry probability sampling's threshold
(tracestate ot=th:T), N for a "1 in N" --sample-rate-attribute, 1 for a trace
with neither (docs/design.md §8.1). Every figure is then an estimate of all
traffic with the count seen beside it, and ratios are ratios of estimates.
Traces that are not whole (a missing parent, a missing callee, a threshold
their randomness contradicts) are counted by reason and not judged.

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
	f.StringSliceVar(&cfg.Attributes.SampleRate, "sample-rate-attribute", nil, `span attribute carrying a "1 in N" sample rate, read where tracestate has no ot=th (repeatable)`)
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
	Kind          string `json:"kind"`
	TraceID       string `json:"trace_id"`
	SpanID        string `json:"span_id"`
	Service       string `json:"service"`
	Operation     string `json:"operation"`
	Verdict       string `json:"verdict"`
	ClaimSent     string `json:"claim_sent"`
	ClaimExpected string `json:"claim_expected"`
	Reason        string `json:"reason"`
	TimedOut      bool   `json:"timed_out,omitempty"`
	// Weight is the trace's adjusted count, how many such verdicts of all
	// traffic this one stands for; Sampling says where it came from
	// ("extrapolated": the trace's sampling) or that there was none
	// ("counted", weight 1).
	Weight      float64          `json:"weight"`
	Sampling    string           `json:"sampling"`
	FailedCalls []failedCallLine `json:"failed_calls"`
}

// counts are the request figures of a service or of all of them: each an
// estimate of all traffic (a sum of adjusted counts) with the count of
// requests seen beside it.
type counts struct {
	Requests     float64            `json:"requests"`
	RequestsSeen uint64             `json:"requests_seen"`
	Failed       float64            `json:"failed_requests"`
	FailedSeen   uint64             `json:"failed_requests_seen"`
	Verdicts     map[string]float64 `json:"verdicts"`
	VerdictsSeen map[string]uint64  `json:"verdicts_seen"`
}

func newCounts() counts {
	return counts{Verdicts: map[string]float64{}, VerdictsSeen: map[string]uint64{}}
}

func (c *counts) add(op *da.OperationStats) {
	est := op.Estimate()
	c.Requests += est.Served
	c.RequestsSeen += op.Served
	c.Failed += est.Failed
	c.FailedSeen += op.Failed
	for k := da.VerdictOwn; k <= da.VerdictCoincidental; k++ {
		c.Verdicts[k.String()] += est.Verdicts[k]
		c.VerdictsSeen[k.String()] += op.Verdicts[k]
	}
}

type summaryLine struct {
	Kind        string `json:"kind"`
	Files       int    `json:"files"`
	FilesFailed int    `json:"files_failed"`
	// Traces counts every trace read; TracesCounted the whole ones without
	// sampling information (weight 1), TracesExtrapolated the whole ones
	// weighed by their sampling, and Incomplete, by reason, the others,
	// which are not judged.
	Traces             uint64            `json:"traces"`
	TracesCounted      uint64            `json:"traces_counted"`
	TracesExtrapolated uint64            `json:"traces_extrapolated"`
	Incomplete         map[string]uint64 `json:"incomplete"`
	Spans              uint64            `json:"spans"`
	MalformedSpans     uint64            `json:"malformed_spans"`
	Unlinked           unlinkedLine      `json:"unlinked"`
	counts
	// Services are the same figures per service.
	Services map[string]counts `json:"services"`
	Edges    map[string]int    `json:"edges"`
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
		syms:  da.NewSymbols(0),
		stats: da.NewStats(),
		summary: summaryLine{Kind: "summary", Files: len(files), Incomplete: map[string]uint64{},
			counts: newCounts(), Services: map[string]counts{}, Edges: map[string]int{}},
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

	// As the processor does (Link, SetSampling, Callees.Check, then Observe
	// and Judge), with one difference: offline every trace is at hand, so
	// the instrumented callees are learned from all of them first, and a
	// trace missing one is set apart whichever order the files are in.
	an := da.NewAnalyzer()
	callees := da.NewCallees(cfg.EdgeModel.MaxEdges)
	link := func(id pcommon.TraceID, trace []da.Span, class da.SamplingClass) *da.Trace {
		tr := an.Link(id, trace)
		tr.SetSampling(class)
		callees.Check(tr)
		return tr
	}
	da.ForEachTraceSampled(spans, func(id pcommon.TraceID, trace []da.Span, class da.SamplingClass) { link(id, trace, class) })
	da.ForEachTraceSampled(spans, func(id pcommon.TraceID, trace []da.Span, class da.SamplingClass) {
		rep.model.Observe(link(id, trace, class))
	})
	da.ForEachTraceSampled(spans, func(id pcommon.TraceID, trace []da.Span, class da.SamplingClass) {
		tr := link(id, trace, class)
		vs := an.Judge(tr, rep.model)
		rep.stats.Add(tr, vs)
		for i := range vs {
			rep.verdicts = append(rep.verdicts, rep.verdictLine(tr, &vs[i]))
		}
	})

	s := &rep.summary
	st := rep.stats
	s.Traces, s.TracesExtrapolated = st.Traces, st.Extrapolated
	s.TracesCounted = st.Traces - st.Extrapolated
	for _, r := range da.IncompleteReasons() {
		s.Incomplete[r.String()] = st.Incomplete[r]
		s.TracesCounted -= st.Incomplete[r]
	}
	s.Spans = st.Link.Spans
	l := st.Link
	s.Unlinked = unlinkedLine{Duplicates: l.Duplicates, SelfParents: l.SelfParents, Cycles: l.Cycles, Orphans: l.Orphans, RootOutbound: l.RootOutbound}
	for k, op := range st.Operations {
		s.add(op)
		name := rep.syms.Name(k.Service)
		c, ok := s.Services[name]
		if !ok {
			c = newCounts()
		}
		c.add(op)
		s.Services[name] = c
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
		Weight:        tr.Weight,
		Sampling:      tr.Sampling.Method().String(),
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

// edgeLine is an edge: its mode and the model's evidence (weighted by the
// traces' adjusted counts, as the model learns it; samples is the failed
// calls seen), then its traffic, estimated, with the calls seen beside.
type edgeLine struct {
	Kind                     string             `json:"kind"`
	Service                  string             `json:"service"`
	Operation                string             `json:"operation"`
	PeerService              string             `json:"peer_service"`
	PeerOperation            string             `json:"peer_operation"`
	Mode                     string             `json:"mode"`
	Lower                    float64            `json:"p_request_fails_lower"`
	Upper                    float64            `json:"p_request_fails_upper"`
	PeerAddresses            []string           `json:"peer_addresses,omitempty"`
	FailedAlone              float64            `json:"failed_alone"`
	FailedAloneRequestFailed float64            `json:"failed_alone_request_failed"`
	Samples                  float64            `json:"samples"`
	CallOK                   float64            `json:"call_ok"`
	CallOKRequestFailed      float64            `json:"call_ok_request_failed"`
	LogicalCalls             float64            `json:"logical_calls"`
	LogicalCallsSeen         uint64             `json:"logical_calls_seen"`
	FailedCalls              float64            `json:"failed_calls"`
	FailedCallsSeen          uint64             `json:"failed_calls_seen"`
	Attempts                 float64            `json:"attempts"`
	AttemptsSeen             uint64             `json:"attempts_seen"`
	Retries                  float64            `json:"retries"`
	RetriesSeen              uint64             `json:"retries_seen"`
	RetriesSuppressed        float64            `json:"retries_suppressed"`
	RetriesSuppressedSeen    uint64             `json:"retries_suppressed_seen"`
	Decisions                map[string]float64 `json:"retry_decisions,omitempty"`
	DecisionsSeen            map[string]uint64  `json:"retry_decisions_seen,omitempty"`
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
			t := st.Estimate()
			e.LogicalCalls, e.FailedCalls, e.Attempts, e.Retries = t.Calls, t.FailedCalls, t.Attempts, t.Retries
			e.LogicalCallsSeen, e.FailedCallsSeen, e.AttemptsSeen, e.RetriesSeen = st.Calls, st.FailedCalls, st.Attempts, st.Retries
			e.RetriesSuppressedSeen = st.Suppressed()
			for d, n := range st.Decisions {
				if n == 0 || d == int(ownership.DecisionNone) {
					continue
				}
				if e.Decisions == nil {
					e.Decisions, e.DecisionsSeen = map[string]float64{}, map[string]uint64{}
				}
				dec := ownership.RetryDecision(d)
				e.Decisions[dec.String()], e.DecisionsSeen[dec.String()] = t.Decisions[d], n
				if dec == ownership.DecisionSuppressedUnclaimed || dec == ownership.DecisionSuppressedBudget {
					e.RetriesSuppressed += t.Decisions[d]
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
	Kind       string  `json:"kind"`
	Service    string  `json:"service"`
	Operation  string  `json:"operation"`
	Failed     float64 `json:"failed_requests"`
	FailedSeen uint64  `json:"failed_requests_seen"`
	// Matrix is claim sent → verdict → estimated count, MatrixSeen the
	// same seen.
	Matrix      map[string]map[string]float64 `json:"matrix"`
	MatrixSeen  map[string]map[string]uint64  `json:"matrix_seen"`
	Correct     float64                       `json:"claims_correct"`
	CorrectSeen uint64                        `json:"claims_correct_seen"`
	// Accuracy is Correct / Failed: a ratio of estimates.
	Accuracy float64 `json:"accuracy"`
}

func (rep *report) accuracy() []accuracyLine {
	var out []accuracyLine
	for k, op := range rep.stats.Operations {
		if op.Failed == 0 {
			continue
		}
		est := op.Estimate()
		l := accuracyLine{
			Kind: "accuracy", Service: rep.syms.Name(k.Service), Operation: rep.syms.Name(k.Operation),
			Failed: est.Failed, FailedSeen: op.Failed, Correct: est.ClaimsCorrect, CorrectSeen: op.ClaimsCorrect,
			Matrix: map[string]map[string]float64{}, MatrixSeen: map[string]map[string]uint64{},
			Accuracy: round(ratioOf(est.ClaimsCorrect, est.Failed)),
		}
		for sent := range op.Claims {
			row, seen := map[string]float64{}, map[string]uint64{}
			for v := da.VerdictOwn; v <= da.VerdictCoincidental; v++ {
				if n := op.Claims[sent][v]; n > 0 {
					row[v.String()], seen[v.String()] = est.Claims[sent][v], n
				}
			}
			if len(row) > 0 {
				l.Matrix[ownership.Claim(sent).String()] = row
				l.MatrixSeen[ownership.Claim(sent).String()] = seen
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
// Figures are estimates with the count seen beside; served_per_root and
// storm_radius_mean are ratios of estimates.
type amplificationLine struct {
	Kind                  string  `json:"kind"`
	Scope                 string  `json:"scope"`
	Service               string  `json:"service,omitempty"`
	RootService           string  `json:"root_service,omitempty"`
	RootOperation         string  `json:"root_operation,omitempty"`
	Depth                 *int    `json:"depth,omitempty"`
	Served                float64 `json:"served"`
	ServedSeen            uint64  `json:"served_seen"`
	PerRoot               float64 `json:"served_per_root,omitempty"`
	RetriesReceived       float64 `json:"retries_received,omitempty"`
	RetriesReceivedSeen   uint64  `json:"retries_received_seen,omitempty"`
	RetriesSent           float64 `json:"retries_sent,omitempty"`
	RetriesSentSeen       uint64  `json:"retries_sent_seen,omitempty"`
	RetriesSuppressed     float64 `json:"retries_suppressed,omitempty"`
	RetriesSuppressedSeen uint64  `json:"retries_suppressed_seen,omitempty"`
	StormRadius           *int    `json:"storm_radius_max,omitempty"`
	StormRadiusMean       float64 `json:"storm_radius_mean,omitempty"`
}

func (rep *report) amplification() []amplificationLine {
	bySvc := map[string]*amplificationLine{}
	agg := func(name string) *amplificationLine {
		if bySvc[name] == nil {
			bySvc[name] = &amplificationLine{Kind: "amplification", Scope: "service", Service: name}
		}
		return bySvc[name]
	}
	for k, op := range rep.stats.Operations {
		a, est := agg(rep.syms.Name(k.Service)), op.Estimate()
		a.Served += est.Served
		a.ServedSeen += op.Served
		a.RetriesReceived += est.RetriesReceived
		a.RetriesReceivedSeen += op.RetriesReceived
	}
	for k, e := range rep.stats.Edges {
		a, est := agg(rep.syms.Name(k.Service)), e.Estimate()
		a.RetriesSent += est.Retries
		a.RetriesSentSeen += e.Retries
		a.RetriesSuppressed += est.Decisions[ownership.DecisionSuppressedUnclaimed] + est.Decisions[ownership.DecisionSuppressedBudget]
		a.RetriesSuppressedSeen += e.Suppressed()
	}
	var out []amplificationLine
	for _, name := range sortedKeys(bySvc) {
		out = append(out, *bySvc[name])
	}
	var depth []amplificationLine
	for k, n := range rep.stats.Depths {
		root := rep.stats.Roots[da.OperationKey{Service: k.RootService, Operation: k.RootOperation}]
		d := int(k.Depth)
		depth = append(depth, amplificationLine{Kind: "amplification", Scope: "depth",
			RootService: rep.syms.Name(k.RootService), RootOperation: rep.syms.Name(k.RootOperation),
			Depth: &d, Service: rep.syms.Name(k.Service), Served: n.Estimate(), ServedSeen: n.N,
			PerRoot: round(ratioOf(n.Estimate(), root.EstimatedRequests()))})
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
			Served: r.EstimatedRequests(), ServedSeen: r.Requests, StormRadius: &radius,
			StormRadiusMean: round(ratioOf(r.EstimatedRadiusSum(), r.EstimatedRequests()))})
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
	fmt.Fprintln(tw, "Figures are estimates of all traffic, each trace weighing its adjusted count; where they were extrapolated, the count seen is beside them.")
	section("VERDICTS", "TRACE\tSPAN\tSERVICE\tOPERATION\tVERDICT\tWEIGHT\tSAMPLING\tREASON\tCLAIM SENT\tEXPECTED\tFAILED CALLS")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.TraceID, v.SpanID, v.Service, v.Operation,
			v.Verdict, figure(v.Weight), v.Sampling, v.Reason, v.ClaimSent, v.ClaimExpected, calls)
	}
	section("EDGES", "SERVICE\tOPERATION\tPEER\tPEER OPERATION\tMODE\tP(FAIL|CALL FAILED ALONE)\tFAILED ALONE\tCALLS\tATTEMPTS\tRETRIES\tSUPPRESSED")
	for _, e := range rep.edges() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f–%.2f\t%s/%s\t%s\t%s\t%s\t%s\n", e.Service, e.Operation, e.PeerService,
			e.PeerOperation, e.Mode, e.Lower, e.Upper, figure(e.FailedAloneRequestFailed), figure(e.FailedAlone),
			seen(e.LogicalCalls, e.LogicalCallsSeen), seen(e.Attempts, e.AttemptsSeen), seen(e.Retries, e.RetriesSeen),
			seen(e.RetriesSuppressed, e.RetriesSuppressedSeen))
	}
	section("CLAIM ACCURACY", "SERVICE\tOPERATION\tFAILED\tCORRECT\tACCURACY\tSENT → VERDICT")
	for _, a := range rep.accuracy() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%s\n", a.Service, a.Operation, seen(a.Failed, a.FailedSeen),
			seen(a.Correct, a.CorrectSeen), a.Accuracy, matrixString(a.Matrix, a.MatrixSeen))
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
		var in, out, suppressed string
		if a.Scope == "service" {
			in, out, suppressed = seen(a.RetriesReceived, a.RetriesReceivedSeen), seen(a.RetriesSent, a.RetriesSentSeen), seen(a.RetriesSuppressed, a.RetriesSuppressedSeen)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Scope, root, depth, a.Service, seen(a.Served, a.ServedSeen), perRoot,
			in, out, suppressed, radius)
	}
	s := rep.summary
	section("VERDICTS BY SERVICE", "SERVICE\tREQUESTS\tFAILED\tOWN\tPROPAGATED\tCOINCIDENTAL")
	for _, name := range sortedKeys(s.Services) {
		c := s.Services[name]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, seen(c.Requests, c.RequestsSeen), seen(c.Failed, c.FailedSeen),
			seen(c.Verdicts["own"], c.VerdictsSeen["own"]), seen(c.Verdicts["propagated"], c.VerdictsSeen["propagated"]),
			seen(c.Verdicts["coincidental"], c.VerdictsSeen["coincidental"]))
	}
	fmt.Fprintf(tw, "\nSUMMARY\n")
	fmt.Fprintf(tw, "files\t%d (%d unreadable)\n", s.Files, s.FilesFailed)
	fmt.Fprintf(tw, "traces\t%d: %d counted (no sampling information, weight 1), %d extrapolated (weighed by their sampling)\n",
		s.Traces, s.TracesCounted, s.TracesExtrapolated)
	fmt.Fprintf(tw, "not judged\t%d incomplete: %d missing_parent, %d missing_callee, %d inconsistent_sampling\n",
		s.Traces-s.TracesCounted-s.TracesExtrapolated, s.Incomplete["missing_parent"], s.Incomplete["missing_callee"], s.Incomplete["inconsistent_sampling"])
	fmt.Fprintf(tw, "spans\t%d (%d malformed, skipped)\n", s.Spans, s.MalformedSpans)
	fmt.Fprintf(tw, "requests\t%s, failed %s: own %s, propagated %s, coincidental %s\n", seen(s.Requests, s.RequestsSeen),
		seen(s.Failed, s.FailedSeen), seen(s.Verdicts["own"], s.VerdictsSeen["own"]),
		seen(s.Verdicts["propagated"], s.VerdictsSeen["propagated"]), seen(s.Verdicts["coincidental"], s.VerdictsSeen["coincidental"]))
	fmt.Fprintf(tw, "edges\t%d fail_close, %d fail_open, %d unknown\n", s.Edges["fail_close"], s.Edges["fail_open"], s.Edges["unknown"])
	u := s.Unlinked
	fmt.Fprintf(tw, "not linked\t%d orphans (parent absent), %d outbound without a request (edge clients or broken context), %d duplicate IDs, %d self-parents, %d cycles\n",
		u.Orphans, u.RootOutbound, u.Duplicates, u.SelfParents, u.Cycles)
	return tw.Flush()
}

// seen prints an estimate with the count seen beside it where the two
// differ, as the store's readers do (figureSeen): "40 (4 seen)".
func seen(est float64, n uint64) string {
	if math.Abs(est-float64(n)) < 1e-6 {
		return figure(est)
	}
	return fmt.Sprintf("%s (%d seen)", figure(est), n)
}

// ratioOf is a/b, 0 when b is 0.
func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func matrixString(m map[string]map[string]float64, n map[string]map[string]uint64) string {
	out := ""
	for _, sent := range sortedKeys(m) {
		for _, v := range sortedKeys(m[sent]) {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%s→%s %s", sent, v, seen(m[sent][v], n[sent][v]))
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

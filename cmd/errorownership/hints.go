// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	da "github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// minHintsTTL is the hints extension's minimum ttl.
const minHintsTTL = time.Second

type hintsOptions struct {
	db       storeFlags
	format   string
	endpoint string // the collector's hints endpoint, whose ttl and budget are used
	ttl      time.Duration
	budget   ownership.RetryBudget
	model    da.ModelConfig
}

func newHintsCommand() *cobra.Command {
	o := hintsOptions{ttl: 30 * time.Second, budget: ownership.DefaultRetryBudget(), model: da.DefaultConfig().EdgeModel}
	cmd := &cobra.Command{
		Use:   "hints SERVICE",
		Short: "Show the ownership hints a service gets now, and why each edge has its mode",
		Long: `hints answers: what does SERVICE currently believe about its dependencies? It builds,
from the store, the document the collector's hints endpoint serves the service
(GET /v1/hints?service=SERVICE, docs/design.md §9.3): the edge model merged in the store over
the last seven half-lives, judged by the engine's rule (docs/design.md §5).

The table shows each edge's mode with the evidence behind it: the requests in which the call
failed alone (weighted by age) and how many of them failed too, the Wilson bounds of
P(request fails | call failed alone), the samples counted, and which threshold decided.
--format json prints exactly the endpoint's document; --format evidence adds the evidence.

The endpoint's TTL and retry budget, and the edge model's rule, are the collector's
configuration: the flags take the defaults; give the values your collector has, or
--endpoint, the collector's hints endpoint, to take its TTL and budget from what it serves.`,
		Example: `  # What checkout is told, with the evidence
  errorownership hints checkout --dsn postgres://reader@db.internal:5432/errorownership

  # The endpoint's document, for an errorownership_hints extension with ttl 10s and a 5 % retry budget
  errorownership hints checkout --format json --ttl 10s --retry-ratio 0.05

  # With the TTL and budget the collector's hints endpoint serves
  errorownership hints checkout --endpoint http://otel-collector:4320`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	f := cmd.Flags()
	o.db.add(f)
	f.StringVar(&o.format, "format", "table", "table, json (the endpoint's document) or evidence (the document and each edge's evidence)")
	f.StringVar(&o.endpoint, "endpoint", "", "the collector's hints endpoint (http://host:4320): take the ttl and retry budget it serves rather than the flags'")
	f.DurationVar(&o.ttl, "ttl", o.ttl, "the errorownership_hints extension's ttl")
	f.Float64Var(&o.budget.Ratio, "retry-ratio", o.budget.Ratio, "the errorownership_hints extension's retry_budget.ratio")
	f.Float64Var(&o.budget.MinRetriesPerSecond, "min-retries-per-second", o.budget.MinRetriesPerSecond, "the errorownership_hints extension's retry_budget.min_retries_per_second")
	f.DurationVar(&o.model.HalfLife, "half-life", o.model.HalfLife, "the collector's edge_model.half_life (0: old evidence weighs as much as new)")
	f.IntVar(&o.model.MinSamples, "min-samples", o.model.MinSamples, "the collector's edge_model.min_samples")
	f.Float64Var(&o.model.Confidence, "confidence", o.model.Confidence, "the collector's edge_model.confidence")
	f.Float64Var(&o.model.FailCloseThreshold, "fail-close-threshold", o.model.FailCloseThreshold, "the collector's edge_model.fail_close_threshold")
	f.Float64Var(&o.model.FailOpenThreshold, "fail-open-threshold", o.model.FailOpenThreshold, "the collector's edge_model.fail_open_threshold")
	completeFixed(cmd, "format", "table", "json", "evidence")
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		win := windowFlags{since: store.ModelWindow(o.model.HalfLife)}
		return storeNames(cmd, &o.db, &win, toComplete, func(n *store.Names) []string { return n.Services })
	}
	return cmd
}

func (o *hintsOptions) validate() error {
	switch {
	case o.format != "table" && o.format != "json" && o.format != "evidence":
		return fmt.Errorf("--format %q: use table, json or evidence", o.format)
	case o.ttl < minHintsTTL:
		return fmt.Errorf("--ttl %v: the errorownership_hints extension's ttl is at least %v, such as 30s", o.ttl, minHintsTTL)
	}
	if err := o.budget.Validate(); err != nil {
		return fmt.Errorf("--retry-ratio, --min-retries-per-second: %w", err)
	}
	cfg := da.Config{EdgeModel: o.model}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("the edge model flags: %w", err)
	}
	return nil
}

func (o *hintsOptions) run(cmd *cobra.Command, service string) error {
	ctx := cmd.Context()
	if o.endpoint != "" {
		for _, flag := range []string{"ttl", "retry-ratio", "min-retries-per-second"} {
			if cmd.Flags().Changed(flag) {
				return fmt.Errorf("--endpoint and --%s both given: the endpoint says its %s; give one", flag, strings.ReplaceAll(flag, "-", " "))
			}
		}
		served, err := fetchHints(ctx, o.endpoint, service)
		if err != nil {
			return err
		}
		o.ttl, o.budget = time.Duration(served.TTLSeconds)*time.Second, served.Budget()
	}
	if err := o.validate(); err != nil {
		return err
	}
	st, err := o.db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	doc, est, err := o.read(ctx, st, service, time.Now())
	if err != nil {
		return err
	}
	if len(doc.Edges) == 0 {
		// The endpoint answers an unknown service with no edges; a person
		// asking about one most likely misspelt it.
		if err := o.checkService(ctx, st, service); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	switch o.format {
	case "json":
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "evidence":
		return o.writeEvidence(w, doc, est)
	}
	return o.writeTable(w, doc, est)
}

// fetchHints gets the document the hints endpoint at base serves service,
// with the hint client the services' hooks use.
func fetchHints(ctx context.Context, base, service string) (*ownership.Hints, error) {
	c := hints.New(base, service, hints.WithFetchTimeout(10*time.Second))
	if _, err := c.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("--endpoint %s: %w; give the hints endpoint's base URL, such as http://otel-collector:4320", base, err)
	}
	doc, ok := c.Hints()
	if !ok {
		return nil, fmt.Errorf("--endpoint %s: no hints document for %s", base, service)
	}
	return doc, nil
}

// read builds the document exactly as the processor's hints endpoint does
// with a store: the merged model over store.ModelWindow, each edge in the
// hints' form (dependencyanalysis.Estimate.HintEdge), in the order
// ownership.SortHintEdges gives, marshalled by encoding/json. It returns
// the estimates in the document's order too.
func (o *hintsOptions) read(ctx context.Context, st *store.Store, service string, now time.Time) (*ownership.Hints, []store.EdgeEstimate, error) {
	est, err := st.EdgesFor(ctx, service, now.Add(-store.ModelWindow(o.model.HalfLife)), o.model.HalfLife, o.model)
	if err != nil {
		return nil, nil, err
	}
	edges := make([]ownership.HintEdge, len(est))
	for i := range est {
		e := &est[i]
		edges[i] = e.HintEdge(e.Operation, e.PeerService, e.PeerOperation, e.PeerAddresses)
	}
	order := make([]int, len(est))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return ownership.CompareHintEdges(edges[a], edges[b]) })
	sortedEdges := make([]ownership.HintEdge, len(est))
	sortedEst := make([]store.EdgeEstimate, len(est))
	for i, j := range order {
		sortedEdges[i], sortedEst[i] = edges[j], est[j]
	}
	budget := o.budget
	return &ownership.Hints{
		Version:     ownership.HintsVersion,
		Service:     service,
		GeneratedAt: now.UTC(),
		TTLSeconds:  int(o.ttl / time.Second),
		RetryBudget: &budget,
		Edges:       sortedEdges,
	}, sortedEst, nil
}

// checkService returns an error unless service served requests in the
// model's window.
func (o *hintsOptions) checkService(ctx context.Context, st *store.Store, service string) error {
	window := store.ModelWindow(o.model.HalfLife)
	now := time.Now()
	// Buckets from a collector whose clock runs ahead count in the model.
	names, err := windowNames(ctx, st, now.Add(-window), now.Add(24*time.Hour))
	if err != nil {
		return err
	}
	if slices.Contains(names.Services, service) {
		return nil
	}
	return unknownName("service", "hints", service, names.Services, fmt.Sprintf("in the edge model's window (the last %v: seven half-lives)", window))
}

// why says which rule gave the edge its mode (docs/design.md §5).
func (o *hintsOptions) why(e *da.Estimate) string {
	c := o.model
	switch {
	case e.Counts.Samples < 1:
		return "no call failed alone yet"
	case e.Counts.Samples+1e-9 < float64(c.MinSamples):
		return fmt.Sprintf("%.0f samples, fewer than min_samples %d", e.Counts.Samples, c.MinSamples)
	case e.Mode == ownership.ModeFailClose:
		return fmt.Sprintf("lower bound %.2f ≥ fail_close_threshold %g", e.Lower, c.FailCloseThreshold)
	case e.Mode == ownership.ModeFailOpen:
		return fmt.Sprintf("upper bound %.2f ≤ fail_open_threshold %g", e.Upper, c.FailOpenThreshold)
	}
	return fmt.Sprintf("bounds %.2f–%.2f: lower < %g and upper > %g", e.Lower, e.Upper, c.FailCloseThreshold, c.FailOpenThreshold)
}

func (o *hintsOptions) writeTable(w io.Writer, doc *ownership.Hints, est []store.EdgeEstimate) error {
	fmt.Fprintf(w, "Hints for %s, as the hints endpoint serves them now: ttl %ds, retry budget %g%% of requests + %g retries/s\n",
		doc.Service, doc.TTLSeconds, 100*doc.RetryBudget.Ratio, doc.RetryBudget.MinRetriesPerSecond)
	fade := "every bucket weighing the same"
	if o.model.HalfLife > 0 {
		fade = fmt.Sprintf("fading with half-life %v", o.model.HalfLife)
	}
	fmt.Fprintf(w, "Edge model: the store's buckets of the last %v, %s; %d samples at least, Wilson bounds at %g:\n",
		store.ModelWindow(o.model.HalfLife), fade, o.model.MinSamples, o.model.Confidence)
	fmt.Fprintf(w, "fail_close when the lower bound of P(request fails | call failed alone) ≥ %g, fail_open when the upper ≤ %g\n",
		o.model.FailCloseThreshold, o.model.FailOpenThreshold)
	if len(doc.Edges) == 0 {
		fmt.Fprintf(w, "no edges: %s made no calls in the window, so every call is unknown (treated as fail-close)\n", doc.Service)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tDEPENDENCY\tDEPENDENCY OPERATION\tMODE\tCONFIDENCE\tSAMPLES\tFAILED ALONE\tREQUEST FAILED TOO\tBOUNDS\tWHY\tADDRESSES")
	for i, h := range doc.Edges {
		e := &est[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%d\t%.1f\t%.1f\t%.2f–%.2f\t%s\t%s\n", h.Operation, h.PeerService, h.PeerOperation,
			h.Mode, h.Confidence, h.Samples, e.Counts.Failed, e.Counts.FailedRequestFailed, e.Lower, e.Upper,
			o.why(&e.Estimate), nameOr(strings.Join(h.PeerAddresses, ","), "-"))
	}
	return tw.Flush()
}

// edgeEvidence is one edge's evidence, as --format evidence writes it.
type edgeEvidence struct {
	Operation     string `json:"operation"`
	PeerService   string `json:"peer_service"`
	PeerOperation string `json:"peer_operation"`
	Mode          string `json:"mode"`
	// The edge model's counts (docs/design.md §5), weighted by age but for
	// Samples.
	FailedAlone              float64 `json:"failed_alone"`
	FailedAloneRequestFailed float64 `json:"failed_alone_request_failed"`
	Samples                  float64 `json:"samples"`
	CallOK                   float64 `json:"call_ok"`
	CallOKRequestFailed      float64 `json:"call_ok_request_failed"`
	Lower                    float64 `json:"p_request_fails_lower"`
	Upper                    float64 `json:"p_request_fails_upper"`
	Why                      string  `json:"why"`
}

func (o *hintsOptions) writeEvidence(w io.Writer, doc *ownership.Hints, est []store.EdgeEstimate) error {
	ev := make([]edgeEvidence, len(est))
	for i := range est {
		e := &est[i]
		ev[i] = edgeEvidence{Operation: e.Operation, PeerService: e.PeerService, PeerOperation: e.PeerOperation,
			Mode: e.Mode.String(), FailedAlone: e.Counts.Failed, FailedAloneRequestFailed: e.Counts.FailedRequestFailed,
			Samples: e.Counts.Samples, CallOK: e.Counts.OK, CallOKRequestFailed: e.Counts.OKRequestFailed,
			Lower: round(e.Lower), Upper: round(e.Upper), Why: o.why(&e.Estimate)}
	}
	return writeJSON(w, struct {
		Hints    *ownership.Hints `json:"hints"`
		Evidence []edgeEvidence   `json:"evidence"`
	}{doc, ev})
}

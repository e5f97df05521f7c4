// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/internal/pgcluster"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// DemoOptions configure Demo. Zero values take the defaults in brackets.
type DemoOptions struct {
	// DSN is an existing database; empty starts a throwaway PostgreSQL
	// cluster with pgcluster, removed at the end unless Keep.
	DSN  string
	Keep bool
	// Topology is run under the three retry policies [Chain()].
	Topology *Topology
	// ChainRequests are root requests per chain policy [200, or with
	// Sample below 1 SampledRequests for the policy]; CheckoutRequests per
	// checkout phase [3000, or 1400/Sample if more]; AvailabilityRequests
	// per error rate [100000]; Concurrency root requests at once [4].
	ChainRequests, CheckoutRequests, AvailabilityRequests, Concurrency int
	Seed                                                               uint64
	// Sample is the share of traces the collector keeps, in (0, 1] [1:
	// all]. Below 1, contrib's probabilistic_sampler keeps them in front of
	// the errorownership processor (CollectorConfig.Sample), and the store's
	// figures are estimates of all traffic from the kept traces.
	Sample float64
	// Out receives the progress lines and the report.
	Out io.Writer
}

// BudgetRatio is the demo's retry budget; the min-retries floor is 0.
const BudgetRatio = 0.1

// unsampledChainRequests are the root requests per chain policy without
// sampling.
const unsampledChainRequests = 200

// How close a sampled run's estimates are to the theory: within
// SampledTolerance of it (relative), by SampledZ standard errors.
const (
	SampledTolerance = 0.05
	SampledZ         = 4.0
)

// SampledHalfWidths returns, for a chain whose requests served per root
// request are theory (by depth, the root first), the half-width of the
// interval of SampledZ standard errors around each figure that the store
// estimates from the traces kept when a share sample of n root requests'
// traces is kept.
//
// Why: the store's figure at depth k is the mean, over the kept root
// requests, of each trace's count x_k of requests served at depth k (a
// ratio of estimates: each kept trace weighs the same 1/sample). The
// sampler keeps each trace independently with probability sample (by its
// trace ID's randomness, unrelated to what happened in it), so the mean's
// standard error is sqrt(V_k·(1−sample)/(sample·n)), V_k the variance of x_k
// over the traces (finite population corrected). Along the chain every
// request at depth k−1 makes one call of one or two attempts, the second
// with probability q_k = theory_k/theory_{k−1} − 1, so x_k is a branching
// count of mean theory_k and variance
//
//	V_k = theory_{k−1}·q_k·(1−q_k) + V_{k−1}·(1+q_k)².
//
// Retry-every-hop (q = 1, 1, 1, 0, 0, 0) gives V = 0: its traces are all
// alike, and any sample gives its figures exactly. The budget (q = 0.1 on
// A→B, B→C and C→D) gives V_3 = 1.21·0.09 + 0.2079·1.21 = 0.3605 at
// theory 1.331, ownership (q = 0.1 on C→D alone) V_3 = 0.09 at 1.1.
func SampledHalfWidths(theory []float64, sample float64, n int) []float64 {
	out := make([]float64, len(theory))
	v := 0.0
	for k := 1; k < len(theory); k++ {
		q := math.Min(math.Max(theory[k]/theory[k-1]-1, 0), 1)
		v = theory[k-1]*q*(1-q) + v*(1+q)*(1+q)
		out[k] = SampledZ * math.Sqrt(v*(1-sample)/(sample*float64(n)))
	}
	return out
}

// SampledRequests returns how many root requests a chain policy whose
// figures are theory needs when a share sample of its traces is kept, so
// that each estimate is within SampledTolerance of its theory by the
// interval of SampledHalfWidths, not by luck: solving
// SampledZ·sqrt(V_k·(1−s)/(s·n)) ≤ SampledTolerance·theory_k for n,
//
//	n ≥ SampledZ²·V_k·(1−s) / (s·(SampledTolerance·theory_k)²).
//
// At s = 0.1: the budget needs 16·0.3605·0.9/(0.1·0.06655²) = 11,720 root
// requests, ownership 16·0.09·0.9/(0.1·0.055²) = 4,284, retry-every-hop
// none beyond the unsampled 200. At 4 standard errors a figure misses its
// interval 6·10⁻⁵ of the time, so that one of the demo's dozen distinct
// sampled figures misses less than once in a thousand runs. The count is
// rounded up to hundreds, and never below the unsampled 200.
func SampledRequests(theory []float64, sample float64) int {
	if sample >= 1 {
		return unsampledChainRequests
	}
	need := 0.0
	// The half-width at n = 1 is SampledZ·sqrt(V_k·(1−s)/s); n scales it
	// by 1/sqrt(n).
	for k, h := range SampledHalfWidths(theory, sample, 1) {
		r := h / (SampledTolerance * theory[k])
		need = math.Max(need, r*r)
	}
	return max(unsampledChainRequests, int(math.Ceil(need/100))*100)
}

// Chain services in order, the policies the demo runs, and the
// theoretical requests served per root request (docs/design.md §1) for
// each policy.
var (
	ChainServices = []string{"a", "b", "c", "d", "e", "f", "g"}
	ChainPolicies = []Policy{RetryEveryHop, BudgetPolicy, Ownership}
	ChainTheory   = map[Policy][]float64{
		RetryEveryHop: {1, 2, 4, 8, 8, 8, 8},
		BudgetPolicy:  {1, 1.1, 1.21, 1.331, 1.331, 1.331, 1.331},
		Ownership:     {1, 1, 1, 1.1, 1.1, 1.1, 1.1},
	}
	AvailabilityRates = []float64{0.001, 0.01, 0.05, 0.10, 0.20, 0.30}
)

// CoincidentalPhase is the checkout scenario's outcome in one phase.
type CoincidentalPhase struct {
	Hints    bool
	Requests int
	// Kept counts the root requests whose trace the sampler kept (all of
	// them without sampling). The processor sees only those, so the ground
	// truth of TrueCoincidental is theirs.
	Kept int
	// TrueCoincidental counts root requests where checkout failed on its
	// own while its fail-open recommendations call failed and payments did
	// not; Detected those the processor audited as coincidental;
	// TruePositives both.
	TrueCoincidental, Detected, TruePositives int
	Precision, Recall                         float64
	// OwnFailures counts checkout's own failures (ground truth), OwnClaimed
	// those it answered with Error-Claim: claimed.
	OwnFailures, OwnClaimed int
}

// DemoReport holds every figure Demo prints.
type DemoReport struct {
	// Topology is the one run under the three policies; Services its
	// services in order.
	Topology *Topology
	Services []string
	// ServedStore and ServedServers: requests served per root request, by
	// policy, in Services order: from store.ServedPerRoot and from the
	// servers' own counters; Theory: predicted (Model.Predict, one retry,
	// budget BudgetRatio), which for the chain is ChainTheory.
	ServedStore, ServedServers, Theory map[Policy][]float64
	// DepthStore and DepthTheory are the same per depth below the root.
	DepthStore, DepthTheory map[Policy][]float64
	Radius                  map[Policy]store.RootSummary
	RadiusTheory            map[Policy]int
	// Requests are the root requests run per policy.
	Requests map[Policy]int
	// Sample is the share of traces kept (1: all), Threshold the sampler's
	// ot=th for it and Weight a kept trace's adjusted count; HalfWidths are
	// SampledHalfWidths per policy, in Services order for the chain; Spans
	// and KeptSpans the spans the collector received and the sampler kept.
	Sample           float64
	Threshold        string
	Weight           float64
	HalfWidths       map[Policy][]float64
	Spans, KeptSpans int64
	Availability     []AvailabilityRow
	Coincidental     []CoincidentalPhase
	// Traffic is the store's service graph over the demo's window.
	Traffic  *store.Traffic
	Where    string
	Duration time.Duration
}

func (o *DemoOptions) defaults() {
	if o.Sample == 0 {
		o.Sample = 1
	}
	if o.CheckoutRequests <= 0 {
		// The edge model learns that recommendations is fail-open from the
		// kept checkouts whose recommendations call failed alone, about 0.22
		// of them (measured), once the Wilson upper bound (95 %) of
		// P(checkout fails | that) ≈ 0.10 is at most 0.2. Over 300 such
		// calls the bound is 0.14, and passes 0.2 only if the observed
		// share is 0.155 or more, 3.2 standard errors (0.017) above 0.10:
		// 300/0.22 ≈ 1400 kept checkouts, 1400/Sample requests, 14,000 at
		// 0.1. Unsampled, 3000 give about 660.
		o.CheckoutRequests = max(3000, int(math.Ceil(1400/o.Sample/100))*100)
	}
	if o.AvailabilityRequests <= 0 {
		o.AvailabilityRequests = 100_000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Topology == nil {
		o.Topology = Chain()
	}
}

// Demo runs the whole demonstration and prints it to o.Out.
func Demo(ctx context.Context, o DemoOptions) (rep *DemoReport, err error) {
	custom := o.Topology != nil
	o.defaults()
	threshold, err := SampleThreshold(o.Sample)
	if err != nil {
		return nil, err
	}
	// Without --chain-requests, a sampled run has as many root requests as
	// its estimates need (SampledRequests); a topology of the user's takes
	// the chain's counts, sized for the chain.
	requests := map[Policy]int{}
	for _, p := range ChainPolicies {
		requests[p] = cmp.Or(o.ChainRequests, SampledRequests(ChainTheory[p], o.Sample))
	}
	begin := time.Now()
	out := o.Out
	progress := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}

	// In a database of the user's (--dsn), earlier demos' rows may share the
	// time window: a run tag in every route keeps this demo's operations apart.
	dsn, prefix, cluster, cleanup, err := database(ctx, o.DSN, o.Keep, begin, progress)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cleanup()) }()

	progress("starting the errorownership processor in process (decision_wait %v, flush_interval 1s)…", decisionWait)
	col, err := StartCollector(ctx, CollectorConfig{DSN: dsn, DecisionWait: decisionWait,
		FlushInterval: time.Second, BudgetRatio: BudgetRatio, BudgetMin: 0, Sample: o.Sample})
	if err != nil {
		return nil, err
	}
	collectorUp := true
	defer func() {
		if collectorUp {
			_ = col.Shutdown(context.Background())
		}
	}()
	progress("collector: OTLP/HTTP at %s, hints at %s", col.OTLPEndpoint, col.HintsURL)
	if o.Sample < 1 {
		progress("sampling: probabilistic_sampler (proportional) keeps %g of the traces, ot=th:%s: each kept trace weighs %.4f",
			o.Sample, threshold.TValue(), threshold.AdjustedCount())
	}

	top := o.Topology
	rep = &DemoReport{Topology: top, ServedStore: map[Policy][]float64{}, ServedServers: map[Policy][]float64{},
		Theory: map[Policy][]float64{}, DepthStore: map[Policy][]float64{}, DepthTheory: map[Policy][]float64{},
		Radius: map[Policy]store.RootSummary{}, RadiusTheory: map[Policy]int{}, Requests: requests,
		Sample: o.Sample, Threshold: threshold.TValue(), Weight: threshold.AdjustedCount(), HalfWidths: map[Policy][]float64{}}
	for _, p := range ChainPolicies {
		rep.HalfWidths[p] = SampledHalfWidths(ChainTheory[p], o.Sample, requests[p])
	}
	for _, s := range top.Services {
		rep.Services = append(rep.Services, s.Name)
	}
	for _, p := range ChainPolicies {
		pred, err := top.Model().Predict(RetryPolicy{Policy: p, Retries: 1, Budget: BudgetRatio})
		if err != nil {
			return nil, err
		}
		rep.Theory[p] = make([]float64, len(rep.Services))
		for i, s := range rep.Services {
			rep.Theory[p][i] = pred.ServedByService[s]
		}
		rep.DepthTheory[p], rep.RadiusTheory[p] = pred.ServedByDepth, pred.StormRadius
	}
	run := func(top *Topology, p Policy, route string, withHints bool, n int, addrs map[string]string) (*RunResult, error) {
		r, err := Run(ctx, RunConfig{Topology: top, Policy: p, Route: route, Hints: withHints,
			HintsURL: col.HintsURL, OTLPEndpoint: col.OTLPEndpoint, Requests: n, Concurrency: o.Concurrency,
			BudgetRatio: BudgetRatio, BudgetMin: 0, Seed: o.Seed, Addrs: addrs})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", route, p, err)
		}
		total := int64(0)
		for _, v := range r.Served {
			total += v
		}
		progress("  %-28s %4d root requests in %5.2fs: %5d requests served, %d root failures, %d spans received so far",
			route+" ("+string(p)+hintsLabel(withHints)+")", n, r.End.Sub(r.Start).Seconds(), total, r.RootFailed, col.Spans.Load())
		return r, nil
	}

	stormRoute := "/chain/"
	counts := fmt.Sprintf("%d root requests per policy", requests[ChainPolicies[0]])
	if requests[RetryEveryHop] != requests[BudgetPolicy] || requests[BudgetPolicy] != requests[Ownership] {
		counts = fmt.Sprintf("%d, %d and %d root requests (as many as sampling needs for ±%.0f%%, SampledRequests)",
			requests[RetryEveryHop], requests[BudgetPolicy], requests[Ownership], SampledTolerance*100)
	}
	if !custom {
		progress("chain A→B→C→D→E→F→G, D always fails: %s, concurrency %d", counts, o.Concurrency)
	} else {
		stormRoute = "/topology/"
		progress("topology with root %s, %d services: %s, concurrency %d", top.Root, len(top.Services), counts, o.Concurrency)
	}
	for _, p := range ChainPolicies {
		r, err := run(top, p, prefix+stormRoute+string(p), false, requests[p], nil)
		if err != nil {
			return nil, err
		}
		per := make([]float64, len(rep.Services))
		for i, s := range rep.Services {
			per[i] = float64(r.Served[s]) / float64(requests[p])
		}
		rep.ServedServers[p] = per
	}

	progress("checkout scenario: recommendations (fail-open, fails 30%%), payments (fail-close, fails 5%%), checkout fails 10%% on its own")
	checkout := Checkout()
	noHints, err := run(checkout, Ownership, prefix+"/checkout", false, o.CheckoutRequests, nil)
	if err != nil {
		return nil, err
	}
	progress("  waiting for the processor to learn recommendations is fail-open and serve it as a hint…")
	recsAddr := noHints.Addrs["recommendations"]
	if err := waitFailOpen(ctx, col.HintsURL, "checkout", "GET "+prefix+"/checkout", recsAddr, 30*time.Second); err != nil {
		return nil, err
	}
	progress("  hints: checkout → recommendations (%s) is fail_open", recsAddr)
	// The same services again, at the same addresses, now with the hints.
	withHints, err := run(checkout, Ownership, prefix+"/checkout", true, o.CheckoutRequests, noHints.Addrs)
	if err != nil {
		return nil, err
	}

	progress("availability after retries, in process: %d calls per error rate, budget %.0f%%, no min-retries floor", o.AvailabilityRequests, BudgetRatio*100)
	rep.Availability = Availability(AvailabilityRates, BudgetRatio, o.AvailabilityRequests, o.Seed)

	progress("shutting the processor down (analyses what is buffered, writes the last bucket)…")
	collectorUp = false
	if err := col.Shutdown(ctx); err != nil {
		return nil, fmt.Errorf("processor shutdown: %w", err)
	}
	rep.Spans, rep.KeptSpans = col.Spans.Load(), col.Kept.Load()

	st, err := store.OpenDSN(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	from, to := begin.Add(-2*time.Minute), time.Now().Add(2*time.Minute)
	served, err := st.ServedPerRoot(ctx, from, to)
	if err != nil {
		return nil, err
	}
	roots, err := st.Roots(ctx, from, to)
	if err != nil {
		return nil, err
	}
	audit, err := st.Audit(ctx, from, to, "checkout", 1_000_000)
	if err != nil {
		return nil, err
	}
	for _, p := range ChainPolicies {
		op := "GET " + prefix + stormRoute + string(p)
		per := make([]float64, len(rep.Services))
		var depth []float64
		for _, r := range served {
			if r.RootOperation != op {
				continue
			}
			for i, s := range rep.Services {
				if r.Service == s {
					per[i] += r.PerRoot
				}
			}
			for len(depth) <= r.Depth {
				depth = append(depth, 0)
			}
			depth[r.Depth] += r.PerRoot
		}
		rep.ServedStore[p], rep.DepthStore[p] = per, depth
		for _, r := range roots {
			if r.RootOperation == op {
				rep.Radius[p] = r
			}
		}
	}
	audited := map[string]bool{}
	for _, a := range audit {
		audited[a.TraceID] = true
	}
	for _, r := range []*RunResult{noHints, withHints} {
		rep.Coincidental = append(rep.Coincidental, coincidental(r, audited, col.KeptTrace))
	}
	if rep.Traffic, err = st.Traffic(ctx, from, to, dependencyanalysis.DefaultConfig().EdgeModel); err != nil {
		return nil, err
	}
	rep.Where = where(st, cluster, o.Keep)
	rep.Duration = time.Since(begin)
	rep.Print(out)
	return rep, nil
}

func hintsLabel(h bool) string {
	if h {
		return ", hints"
	}
	return ""
}

// coincidental compares the ground truth of the traces kept with what the
// processor audited; checkout's own failures and claims are the servers'
// ground truth, every trace's.
func coincidental(r *RunResult, audited map[string]bool, kept func(pcommon.TraceID) bool) CoincidentalPhase {
	ph := CoincidentalPhase{Hints: r.Config.Hints, Requests: r.Config.Requests}
	for id, t := range r.Truth {
		own := t.OwnFaults["checkout"] > 0
		var tid pcommon.TraceID
		n, err := hex.Decode(tid[:], []byte(id))
		truth := false
		if err == nil && n == len(tid) && kept(tid) {
			ph.Kept++
			truth = t.Coincidental(r.Config.Topology, "checkout")
		}
		if truth {
			ph.TrueCoincidental++
		}
		if audited[id] {
			ph.Detected++
			if truth {
				ph.TruePositives++
			}
		}
		if own {
			ph.OwnFailures++
			if t.Claim == "claimed" {
				ph.OwnClaimed++
			}
		}
	}
	ph.Precision = ratio(ph.TruePositives, ph.Detected)
	ph.Recall = ratio(ph.TruePositives, ph.TrueCoincidental)
	return ph
}

// fraction prints a ratio to three places, "n/a" for NaN.
func fraction(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", f)
}

// ratio is a/b, NaN when b is 0 (printed as "n/a").
func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// where says where the statistics are, when they outlive the demo: in the
// user's database (--dsn) or in the throwaway cluster kept (--keep).
func where(st *store.Store, cluster *pgcluster.Cluster, keep bool) string {
	tables := "Tables: operation_stats, claim_accuracy, edge_stats, address_stats, depth_stats, root_stats, coincidental_audit, flushes\n" +
		"        (edge model: SELECT * FROM edge_model(now() - interval '1 hour', interval '10 minutes'))\n"
	s := "Grafana dashboards: dashboards/json, with their data sources in dashboards/provisioning\n" +
		"        (to see them live: make plugin; docker compose -f dashboards/docker-compose.yaml up)\n"
	switch {
	case cluster == nil:
		s += fmt.Sprintf("The statistics stay in your database (--dsn): %s\n", st) + tables
	case keep:
		s += fmt.Sprintf("PostgreSQL is still running (--keep): psql %q\n", cluster.DSNFor("errorownership")) + tables
		s += fmt.Sprintf("Stop it with: go run ./internal/pgcluster/cmd/pgcluster stop %s   (then rm -rf %s)\n", cluster.Dir(), cluster.Dir())
	default:
		s += "The throwaway PostgreSQL cluster is removed when the demo ends (make demo ARGS=\"--keep\" leaves it running).\n"
	}
	return s
}

// Print writes the report, measured figures beside the theory of docs/design.md §1.
func (rep *DemoReport) Print(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Requests served per node per root request: measured (store / server counters) vs theory")
	fmt.Fprintln(w, "   (1.00 is Ƞ, the root requests; 8.00 is 8Ƞ: eight requests for each one the user made)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "policy\t")
	for _, s := range rep.Services {
		fmt.Fprintf(tw, "%s\t", s)
	}
	fmt.Fprintln(tw)
	for _, p := range ChainPolicies {
		for _, row := range []struct {
			label string
			v     []float64
		}{{string(p) + " store", rep.ServedStore[p]}, {"servers", rep.ServedServers[p]}, {"theory", rep.Theory[p]}} {
			fmt.Fprintf(tw, "%s\t", row.label)
			for _, v := range row.v {
				fmt.Fprintf(tw, "%.2f\t", v)
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "(budget: ratio %.0f%%, min-retries floor 0: the hooks' default floor, %d retries/s over a %v window,\n would allow more retries than 10%% of these few hundred requests earn, and hide the ratio)\n",
		BudgetRatio*100, ownership.DefaultMinRetriesPerSecond, hooks.DefaultBudgetWindow)
	if rep.Sample < 1 {
		fmt.Fprintf(w, "(sampled: the probabilistic_sampler kept %d of %d spans at ot=th:%s, each kept trace weighing %.4f;\n", rep.KeptSpans, rep.Spans, rep.Threshold, rep.Weight)
		fmt.Fprintf(w, " the store's figures are estimates from the kept traces, within")
		for i, p := range ChainPolicies {
			sep := ","
			if i == len(ChainPolicies)-1 {
				sep = ""
			}
			fmt.Fprintf(w, " ±%.3f for %s%s", slices.Max(rep.HalfWidths[p]), p, sep)
		}
		fmt.Fprintf(w, "\n at %.0f standard errors of the sample (SampledHalfWidths), none beyond ±%.0f%% of the theory)\n", SampledZ, SampledTolerance*100)
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Retry-storm radius (store.Roots): longest chain of hops that retried one failure")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\troot requests\tradius max\tradius mean\ttheory\t")
	for _, p := range ChainPolicies {
		r := rep.Radius[p]
		// A budget grants only some retries: the radius may fall short.
		theory := fmt.Sprint(rep.RadiusTheory[p])
		if p == BudgetPolicy {
			theory = "≤" + theory
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\t\n", p, r.Seen.Requests, r.StormRadiusMax, r.StormRadiusMean, theory)
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Failure rate after retries (one retry, 10% budget): measured vs e_after = (e − min(e,B)) + min(e,B)·e")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "base error rate\tretried\tmeasured after\ttheory after\tavailability\tcalls\t")
	for _, a := range rep.Availability {
		fmt.Fprintf(tw, "%.1f%%\t%.2f%%\t%.3f%%\t%.3f%%\t%.3f%%\t%d\t\n", a.Rate*100, a.Retries*100, a.Measured*100, a.Theory*100, (1-a.Measured)*100, a.Requests)
	}
	tw.Flush()
	fmt.Fprintln(w, "(in process: a callee failing independently at rate e, a caller with hooks.Budget and one retry;")
	fmt.Fprintln(w, " below 0.05% after retries the sample holds too few failures for a relative comparison)")

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Claim accuracy and coincidental errors (checkout; ground truth vs the processor's audit)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	sampled := rep.Sample < 1
	kept := ""
	if sampled {
		kept = "traces kept\t"
	}
	fmt.Fprintln(tw, "phase\trequests\t"+kept+"true coincidental\taudited\tprecision\trecall\tcheckout's own failures\tsent claimed\t")
	for _, c := range rep.Coincidental {
		label := "without hints (model learning)"
		if c.Hints {
			label = "with hints (model learned)"
		}
		fmt.Fprintf(tw, "%s\t%d\t", label, c.Requests)
		if sampled {
			fmt.Fprintf(tw, "%d\t", c.Kept)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%.1f%%\t\n", c.TrueCoincidental, c.Detected,
			fraction(c.Precision), fraction(c.Recall), c.OwnFailures, 100*ratio(c.OwnClaimed, c.OwnFailures))
	}
	tw.Flush()
	if sampled {
		fmt.Fprintln(w, "(sampled: the processor sees the kept traces alone, so \"true coincidental\" counts those of them;")
		fmt.Fprintln(w, " checkout's own failures and claims are every request's, as the servers counted them)")
	}
	fmt.Fprintln(w, "(without hints checkout cannot know recommendations is fail-open, so an own failure that coincides")
	fmt.Fprintln(w, " with a failed recommendations call is sent unclaimed: \"sent claimed\" is what checkout claimed at")
	fmt.Fprintln(w, " the time. The processor holds a failure judged while its edge has no mode and judges it again once")
	fmt.Fprintln(w, " the model, merged in PostgreSQL and read back every second here, has learned the edge: the audit")
	fmt.Fprintln(w, " is after that, so it finds the learning phase's coincidental errors too)")

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Where the statistics are")
	fmt.Fprint(w, rep.Where)
	fmt.Fprintf(w, "Demo took %.1fs.\n", rep.Duration.Seconds())
}

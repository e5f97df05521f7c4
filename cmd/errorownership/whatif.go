// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	da "github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// whatifPolicies are the policies whatif predicts by default, in order.
var whatifPolicies = []simulation.Policy{simulation.NoRetries, simulation.RetryEveryHop, simulation.BudgetPolicy, simulation.Ownership}

type whatifOptions struct {
	db          storeFlags
	win         windowFlags
	topology    string
	root        string
	rootOp      string
	retries     int
	budget      float64
	policies    []string
	format      string
	simulate    bool
	requests    int
	concurrency int
}

func newWhatifCommand() *cobra.Command {
	o := whatifOptions{policies: policyNames(whatifPolicies)}
	cmd := &cobra.Command{
		Use:   "whatif",
		Short: "Predict requests served, storm radius and availability under other retry policies",
		Long: `whatif answers: what would another retry policy have cost us? From a call graph, its call
rates and each service's own failure rate it predicts, in closed form, the requests each
service serves per root request, the retry-storm radius and the availability at the root,
under no retries, N retries per hop, N retries within a budget B at every hop, and error
ownership (only claimed errors retried, within B, so only the hop next to the origin
retries). The formulas and their assumptions are docs/design.md §11.

The graph is measured in the store over the window — calls per request and modes per edge,
own failure rates per operation — for the busiest root operation or --root; the NOW column
is what the store measured under the policy in force. Or --topology FILE gives it by hand,
in the simulator's YAML (as demo --topology takes it), without a store; --simulate then runs
the real simulator on it — services on loopback, the processor, PostgreSQL — and prints
what it measured beside each prediction.`,
		Example: `  # What the last hour's traffic would have cost under each policy
  errorownership whatif --dsn postgres://reader@db.internal:5432/errorownership --root frontend

  # Two retries per hop instead of one, with a 20 % budget
  errorownership whatif --root frontend --retries 2 --budget 0.2

  # A topology written by hand, predicted and simulated
  errorownership whatif --topology shop.yaml --simulate

  # The topology format (the simulator's):
  #   root: web
  #   services:
  #     - {name: web, edges: [{callee: api}, {callee: ads, fail_open: true}]}
  #     - {name: api, fault: {rate: 0.05}}
  #     - {name: ads, fault: {rate: 0.2}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	o.db.addWith(f, dsnUsage+"; with --topology --simulate, the database the simulator's collector writes to (default: a throwaway cluster)")
	o.win.add(f, time.Hour)
	f.StringVar(&o.topology, "topology", "", "predict for this topology (the simulator's YAML) instead of the store's graph")
	f.StringVar(&o.root, "root", "", "the root (user-facing) service whose requests the predictions are per (default: the one with the most root requests)")
	f.StringVar(&o.rootOp, "root-operation", "", "the root operation, when the root service has several (default: its busiest)")
	f.IntVar(&o.retries, "retries", 1, "retries per call after the first attempt (N), for every policy but no_retries")
	f.Float64Var(&o.budget, "budget", simulation.BudgetRatio, "retry budget ratio (B) for budget and ownership: retries allowed per call")
	f.StringSliceVar(&o.policies, "policies", o.policies, "policies to predict: no_retries, retry_every_hop, budget, ownership")
	f.StringVar(&o.format, "format", "table", "table or json")
	f.BoolVar(&o.simulate, "simulate", false, "with --topology: run the simulator on it and print what it measured beside each prediction")
	f.IntVar(&o.requests, "requests", 1000, "with --simulate: root requests per policy")
	f.IntVar(&o.concurrency, "concurrency", 4, "with --simulate: root requests in flight at once")
	completeFixed(cmd, "format", "table", "json")
	completeFixed(cmd, "policies", policyNames(whatifPolicies)...)
	_ = cmd.MarkFlagFilename("topology", "yaml", "yml")
	completeNames(cmd, &o.db, &o.win, "root", func(n *store.Names) []string { return n.Services })
	return cmd
}

func policyNames(ps []simulation.Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// retryPolicies turns --policies, --retries and --budget into policies.
func (o *whatifOptions) retryPolicies() ([]simulation.RetryPolicy, error) {
	if o.retries < 1 || o.retries > 10 {
		return nil, fmt.Errorf("--retries %d: use 1 to 10 retries per call (no_retries is a policy of its own)", o.retries)
	}
	if !(o.budget > 0 && o.budget <= 1) {
		return nil, fmt.Errorf("--budget %v: use a ratio in (0, 1], such as 0.1 for one retry per ten calls", o.budget)
	}
	var out []simulation.RetryPolicy
	for _, name := range o.policies {
		p := simulation.Policy(strings.TrimSpace(name))
		if !slices.Contains(whatifPolicies, p) {
			return nil, fmt.Errorf("--policies: %q is not a policy; use %s", name, strings.Join(policyNames(whatifPolicies), ", "))
		}
		rp := simulation.RetryPolicy{Policy: p, Retries: o.retries, Budget: o.budget}
		if p == simulation.NoRetries {
			rp.Retries, rp.Budget = 0, 0
		}
		out = append(out, rp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--policies is empty: name at least one of %s", strings.Join(policyNames(whatifPolicies), ", "))
	}
	return out, nil
}

// whatifReport is what whatif prints, and its JSON.
type whatifReport struct {
	Source  string  `json:"source"`
	Root    string  `json:"root"`
	Retries int     `json:"retries"`
	Budget  float64 `json:"budget"`
	// Services are in order of depth, then name.
	Services []serviceDepth     `json:"services"`
	Policies []policyPrediction `json:"policies"`
	// Now is what the store measured under the policy in force.
	Now   *measuredNow `json:"now,omitempty"`
	Notes []string     `json:"notes,omitempty"`
	// Inputs are what the predictions start from (docs/design.md §11).
	Inputs []modelInput `json:"inputs"`
}

// modelInput is one node of the model as the predictions take it.
type modelInput struct {
	Node    string      `json:"node"`
	Service string      `json:"service"`
	OwnRate float64     `json:"own_failure_rate"`
	Calls   []callInput `json:"calls,omitempty"`
}

type callInput struct {
	Callee     string  `json:"callee"`
	PerRequest float64 `json:"per_request"`
	Tolerated  bool    `json:"tolerated"`
}

type serviceDepth struct {
	Service string `json:"service"`
	Depth   int    `json:"depth"`
}

type policyPrediction struct {
	Policy        string             `json:"policy"`
	Served        map[string]float64 `json:"served_per_root"`
	ServedByDepth []float64          `json:"served_per_root_by_depth"`
	Availability  float64            `json:"availability"`
	StormRadius   int                `json:"storm_radius"`
	Simulated     *simulatedFigures  `json:"simulated,omitempty"`
}

type simulatedFigures struct {
	Requests        int                `json:"root_requests"`
	Served          map[string]float64 `json:"served_per_root"`
	Availability    float64            `json:"availability"`
	StormRadiusMax  int                `json:"storm_radius_max"`
	StormRadiusMean float64            `json:"storm_radius_mean"`
}

type measuredNow struct {
	// RootRequests is the estimate of all traffic's root requests;
	// RootRequestsSeen the root requests the traces seen hold.
	RootRequests     float64            `json:"root_requests"`
	RootRequestsSeen int64              `json:"root_requests_seen"`
	Served           map[string]float64 `json:"served_per_root"`
	Availability     float64            `json:"availability"`
	StormRadiusMax   int                `json:"storm_radius_max"`
	StormRadiusMean  float64            `json:"storm_radius_mean"`
}

func (o *whatifOptions) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if o.format != "table" && o.format != "json" {
		return fmt.Errorf("--format %q: use table or json", o.format)
	}
	policies, err := o.retryPolicies()
	if err != nil {
		return err
	}
	var rep *whatifReport
	var model *simulation.Model
	var top *simulation.Topology
	if o.topology != "" {
		if o.root != "" || o.rootOp != "" {
			return fmt.Errorf("--root: a topology names its root itself (root: in %s)", o.topology)
		}
		b, err := os.ReadFile(o.topology)
		if err != nil {
			return fmt.Errorf("--topology: %w", err)
		}
		if top, err = simulation.ParseTopology(b); err != nil {
			return fmt.Errorf("--topology %s: %w", o.topology, err)
		}
		model = top.Model()
		rep = &whatifReport{Source: "topology " + o.topology, Root: top.Root}
	} else {
		if o.simulate {
			return fmt.Errorf("--simulate runs the simulator on a topology: give --topology FILE (the simulator's YAML)")
		}
		if model, rep, err = o.fromStore(ctx, cmd.Flags()); err != nil {
			return err
		}
	}
	rep.Retries, rep.Budget = o.retries, o.budget
	if err := rep.predict(model, policies); err != nil {
		return err
	}
	if o.simulate {
		sims, err := simulation.Simulate(ctx, simulation.SimulateOptions{Topology: top, Policies: policies,
			Requests: o.requests, Concurrency: o.concurrency, DSN: o.db.dsn, Out: cmd.ErrOrStderr()})
		if err != nil {
			return fmt.Errorf("--simulate: %w", err)
		}
		for i, s := range sims {
			rep.Policies[i].Simulated = &simulatedFigures{Requests: s.Requests, Served: s.Served, Availability: s.Availability,
				StormRadiusMax: s.StormRadiusMax, StormRadiusMean: s.StormRadiusMean}
		}
	}
	if o.format == "json" {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	return rep.writeTable(cmd.OutOrStdout())
}

// predict fills the report's predictions and its services' order.
func (rep *whatifReport) predict(m *simulation.Model, policies []simulation.RetryPolicy) error {
	depths, err := m.Depths()
	if err != nil {
		return err
	}
	svcDepth := map[string]int{}
	for _, n := range m.Nodes {
		if d, ok := depths[n.Name]; ok {
			if old, seen := svcDepth[n.Service]; !seen || d < old {
				svcDepth[n.Service] = d
			}
		}
	}
	rep.Inputs = nil
	for _, n := range m.Nodes {
		if _, reached := depths[n.Name]; !reached {
			continue
		}
		in := modelInput{Node: n.Name, Service: n.Service, OwnRate: n.OwnRate}
		for _, c := range n.Calls {
			in.Calls = append(in.Calls, callInput{Callee: c.Callee, PerRequest: c.PerRequest, Tolerated: c.Tolerated})
		}
		rep.Inputs = append(rep.Inputs, in)
	}
	rep.Services = nil
	for svc, d := range svcDepth {
		rep.Services = append(rep.Services, serviceDepth{svc, d})
	}
	slices.SortFunc(rep.Services, func(a, b serviceDepth) int {
		return cmp.Or(cmp.Compare(a.Depth, b.Depth), cmp.Compare(a.Service, b.Service))
	})
	for _, p := range policies {
		pred, err := m.Predict(p)
		if err != nil {
			return err
		}
		rep.Policies = append(rep.Policies, policyPrediction{Policy: string(p.Policy), Served: pred.ServedByService,
			ServedByDepth: pred.ServedByDepth, Availability: pred.Availability, StormRadius: pred.StormRadius})
	}
	return nil
}

// fromStore measures the graph in the store over the window
// (docs/design.md §11): one node per service and inbound operation.
func (o *whatifOptions) fromStore(ctx context.Context, fs *pflag.FlagSet) (*simulation.Model, *whatifReport, error) {
	from, to, err := o.win.window(fs, time.Now())
	if err != nil {
		return nil, nil, err
	}
	st, err := o.db.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	names, err := windowNames(ctx, st, from, to)
	if err != nil {
		return nil, nil, err
	}
	roots, err := st.Roots(ctx, from, to)
	if err != nil {
		return nil, nil, err
	}
	root, err := o.pickRoot(roots, names, from, to)
	if err != nil {
		return nil, nil, err
	}
	traffic, err := st.Traffic(ctx, from, to, da.DefaultConfig().EdgeModel)
	if err != nil {
		return nil, nil, err
	}
	m, notes := measuredModel(traffic, root.RootService, root.RootOperation)
	rep := &whatifReport{Source: fmt.Sprintf("the store, %s to %s", stamp(from), stamp(to)),
		Root: root.RootService + " " + root.RootOperation, Notes: notes}
	now := &measuredNow{RootRequests: root.Requests, RootRequestsSeen: root.Seen.Requests, Served: map[string]float64{},
		StormRadiusMax: root.StormRadiusMax, StormRadiusMean: root.StormRadiusMean}
	served, err := st.ServedPerRoot(ctx, from, to)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range served {
		if d.RootService == root.RootService && d.RootOperation == root.RootOperation {
			now.Served[d.Service] += d.PerRoot
		}
	}
	for _, op := range traffic.Operations {
		if op.Service == root.RootService && op.Operation == root.RootOperation && op.Served > 0 {
			now.Availability = 1 - op.Failed/op.Served
		}
	}
	rep.Now = now
	return m, rep, nil
}

// pickRoot returns the root operation --root and --root-operation name, or
// the busiest.
func (o *whatifOptions) pickRoot(roots []store.RootSummary, names *store.Names, from, to time.Time) (store.RootSummary, error) {
	where := fmt.Sprintf("from %s to %s", stamp(from), stamp(to))
	var rootServices, ops []string
	var best *store.RootSummary
	for i := range roots {
		r := &roots[i]
		if !slices.Contains(rootServices, r.RootService) {
			rootServices = append(rootServices, r.RootService)
		}
		if o.root != "" && r.RootService != o.root {
			continue
		}
		ops = append(ops, r.RootOperation)
		if o.rootOp != "" && r.RootOperation != o.rootOp {
			continue
		}
		if best == nil || r.Requests > best.Requests {
			best = r
		}
	}
	switch {
	case best != nil:
		return *best, nil
	case len(roots) == 0:
		return store.RootSummary{}, fmt.Errorf("no root requests %s: the store counts root requests where a trace's root span is a service's inbound request; with none, per-root figures cannot be predicted (or give --topology FILE)", where)
	case o.root != "" && len(ops) == 0:
		if slices.Contains(names.Services, o.root) {
			return store.RootSummary{}, fmt.Errorf("--root %s: %s served no root requests %s; the root services are %s", o.root, o.root, where, quoteJoin(rootServices))
		}
		return store.RootSummary{}, unknownName("root service", "--root", o.root, rootServices, where)
	}
	return store.RootSummary{}, unknownName("root operation", "--root-operation", o.rootOp, ops, where)
}

// nodeName names a measured graph's node: a service's inbound operation.
func nodeName(service, operation string) string { return service + " " + operation }

// measuredModel builds the model of the store's graph (docs/design.md
// §11): per node its own failure rate, per edge its calls per request and
// whether it is tolerated (fail_open). A callee with no statistics of its
// own (an uninstrumented peer) fails as often as the attempts to it did.
func measuredModel(t *store.Traffic, rootService, rootOp string) (*simulation.Model, []string) {
	m := &simulation.Model{Root: nodeName(rootService, rootOp)}
	index := map[string]int{}
	served := map[string]float64{} // estimates: rates are ratios of them
	for _, op := range t.Operations {
		name := nodeName(op.Service, op.Operation)
		n := simulation.ModelNode{Name: name, Service: op.Service}
		if reached := op.Served - op.Propagated; reached > 0 {
			n.OwnRate = math.Min(1, (op.Own+op.Coincidental)/reached)
		}
		index[name] = len(m.Nodes)
		served[name] = op.Served
		m.Nodes = append(m.Nodes, n)
	}
	type attempts struct{ failed, all float64 }
	uninstrumented := map[string]*attempts{}
	var notes []string
	for _, e := range t.Edges {
		caller, callee := nodeName(e.Service, e.Operation), nodeName(e.PeerService, e.PeerOperation)
		i, ok := index[caller]
		if !ok || served[caller] == 0 {
			continue // calls of a request the store did not count
		}
		if _, ok := index[callee]; !ok {
			a := uninstrumented[callee]
			if a == nil {
				a = &attempts{}
				uninstrumented[callee] = a
				index[callee] = len(m.Nodes)
				m.Nodes = append(m.Nodes, simulation.ModelNode{Name: callee, Service: e.PeerService})
				notes = append(notes, fmt.Sprintf("%s has no statistics of its own: it fails as often as the attempts to it did", e.PeerService))
			}
			// Every failed attempt either was retried or ended its call.
			a.failed += e.FailedCalls + e.Retries
			a.all += e.Attempts
		}
		m.Nodes[i].Calls = append(m.Nodes[i].Calls, simulation.ModelCall{Callee: callee,
			PerRequest: e.Calls / served[caller], Tolerated: e.Mode == ownership.ModeFailOpen})
	}
	for name, a := range uninstrumented {
		if a.all > 0 {
			m.Nodes[index[name]].OwnRate = math.Min(1, a.failed/a.all)
		}
	}
	slices.Sort(notes)
	return m, slices.Compact(notes)
}

func (rep *whatifReport) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "What if: %s; root %s; %d retr%s per call, budget %g%%\n", rep.Source, rep.Root, rep.Retries, plural(rep.Retries, "y", "ies"), 100*rep.Budget)
	fmt.Fprintln(w, "Assumptions (docs/design.md §11): independent failures, budgets per edge in steady state without a floor,")
	fmt.Fprintln(w, "own failures after the blocking calls succeed, and under ownership every service with the hooks and the hints learned.")
	simulated := len(rep.Policies) > 0 && rep.Policies[0].Simulated != nil
	if simulated {
		fmt.Fprintf(w, "Each cell: predicted (simulated, %d root requests).\n", rep.Policies[0].Simulated.Requests)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Requests served per root request (Ƞ)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "SERVICE\tDEPTH\t")
	if rep.Now != nil {
		fmt.Fprint(tw, "NOW\t")
	}
	for _, p := range rep.Policies {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(p.Policy))
	}
	fmt.Fprintln(tw)
	for _, s := range rep.Services {
		fmt.Fprintf(tw, "%s\t%d\t", s.Service, s.Depth)
		if rep.Now != nil {
			fmt.Fprintf(tw, "%.2f\t", rep.Now.Served[s.Service])
		}
		for _, p := range rep.Policies {
			fmt.Fprintf(tw, "%.2f", p.Served[s.Service])
			if p.Simulated != nil {
				fmt.Fprintf(tw, " (%.2f)", p.Simulated.Served[s.Service])
			}
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "all services\t\t")
	if rep.Now != nil {
		fmt.Fprintf(tw, "%.2f\t", sum(rep.Now.Served))
	}
	for _, p := range rep.Policies {
		fmt.Fprintf(tw, "%.2f", sum(p.Served))
		if p.Simulated != nil {
			fmt.Fprintf(tw, " (%.2f)", sum(p.Simulated.Served))
		}
		fmt.Fprint(tw, "\t")
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "POLICY\tAVAILABILITY\tSTORM RADIUS\t")
	if n := rep.Now; n != nil {
		fmt.Fprintf(tw, "now (measured, %s root requests)\t%.3f%%\t%d (mean %.2f)\t\n", figureSeen(n.RootRequests, n.RootRequestsSeen), 100*n.Availability, n.StormRadiusMax, n.StormRadiusMean)
	}
	for _, p := range rep.Policies {
		fmt.Fprintf(tw, "%s\t%.3f%%", p.Policy, 100*p.Availability)
		if s := p.Simulated; s != nil {
			fmt.Fprintf(tw, " (%.3f%%)", 100*s.Availability)
		}
		fmt.Fprintf(tw, "\t%d", p.StormRadius)
		if s := p.Simulated; s != nil {
			fmt.Fprintf(tw, " (%d, mean %.2f)", s.StormRadiusMax, s.StormRadiusMean)
		}
		fmt.Fprintln(tw, "\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "(%s)\n", n)
	}
	return nil
}

func sum(m map[string]float64) float64 {
	total := 0.0
	for _, k := range sortedKeys(m) { // in one order, for one float sum
		total += m[k]
	}
	return total
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

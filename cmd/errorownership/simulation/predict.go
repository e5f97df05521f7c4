// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// What-if predictions (docs/design.md §11): from a call graph, its call
// rates and its services' own failure rates, the requests each service
// serves per root request, the availability at the root and the retry-storm
// radius under a retry policy, in closed form. The comments cite §11's
// equations as (11.n) and its assumptions as An.

// Model is what a prediction needs to know of a system: who calls whom how
// often, which failed calls the caller tolerates, and how often each
// service fails on its own.
type Model struct {
	// Root is the node the root (user-facing) requests arrive at; they are
	// not retried.
	Root  string
	Nodes []ModelNode
}

// ModelNode is a service (a topology's) or one inbound operation of a
// service (a measured graph's).
type ModelNode struct {
	// Name is unique in the model; Service is the service it belongs to.
	Name, Service string
	// OwnRate is the probability that a request fails for the service's
	// own reason, given that none of its blocking calls failed.
	OwnRate float64
	// Sequential: the calls are made in order and a failed blocking call
	// ends the request, as a topology's services do. Otherwise the calls
	// per request are taken as measured (assumption A6).
	Sequential bool
	Calls      []ModelCall
}

// ModelCall is an outbound call of a node.
type ModelCall struct {
	Callee string
	// PerRequest is the logical calls per request of the caller.
	PerRequest float64
	// Tolerated: the caller carries on when the call fails (a fail-open
	// edge); otherwise the call is blocking (fail-close, or unknown).
	Tolerated bool
}

// Model returns the topology as a model: one node per service, each edge
// one call per request, made in order.
func (t *Topology) Model() *Model {
	m := &Model{Root: t.Root}
	for _, s := range t.Services {
		n := ModelNode{Name: s.Name, Service: s.Name, OwnRate: s.Fault.Rate, Sequential: true}
		for _, e := range s.Edges {
			n.Calls = append(n.Calls, ModelCall{Callee: e.Callee, PerRequest: 1, Tolerated: e.FailOpen})
		}
		m.Nodes = append(m.Nodes, n)
	}
	return m
}

// NoRetries is the policy in which no caller retries.
const NoRetries Policy = "no_retries"

// RetryPolicy is a policy with its parameters.
type RetryPolicy struct {
	Policy Policy
	// Retries is how many retries a call may make after its first attempt
	// (N); NoRetries makes none.
	Retries int
	// Budget is the retry budget's ratio (B), for BudgetPolicy and
	// Ownership: retries allowed per call.
	Budget float64
}

// String names the policy with its parameters.
func (p RetryPolicy) String() string {
	switch p.Policy {
	case NoRetries:
		return string(p.Policy)
	case RetryEveryHop:
		return fmt.Sprintf("%s (%d)", p.Policy, p.Retries)
	}
	return fmt.Sprintf("%s (%d, %g%%)", p.Policy, p.Retries, 100*p.Budget)
}

// Validate reports a policy the model cannot predict.
func (p RetryPolicy) Validate() error {
	switch p.Policy {
	case NoRetries, RetryEveryHop, BudgetPolicy, Ownership:
	default:
		return fmt.Errorf("policy %q: use %s, %s, %s or %s", p.Policy, NoRetries, RetryEveryHop, BudgetPolicy, Ownership)
	}
	if p.Retries < 0 || p.Retries > 10 {
		return fmt.Errorf("retries %d: use 0 to 10 retries per call", p.Retries)
	}
	if !(p.Budget >= 0 && p.Budget <= 1) {
		return fmt.Errorf("budget %v: use a ratio between 0 and 1, such as 0.1", p.Budget)
	}
	return nil
}

// retries returns N and B as the formulas take them: no budget is an
// infinite one.
func (p RetryPolicy) retries() (n int, b float64) {
	switch p.Policy {
	case NoRetries:
		return 0, 0
	case RetryEveryHop:
		return p.Retries, math.Inf(1)
	}
	return p.Retries, p.Budget
}

// Prediction is what a policy does to the model's system.
type Prediction struct {
	Policy RetryPolicy
	// Served is the requests each node serves per root request, retries
	// included (11.5); ServedByService sums them per service;
	// ServedByDepth per depth below the root.
	Served, ServedByService map[string]float64
	ServedByDepth           []float64
	// Failure is each node's probability of failing a request (11.3).
	Failure map[string]float64
	// Availability is the share of root requests that succeed (11.6).
	Availability float64
	// StormRadius is the longest chain of consecutive hops that can retry
	// (11.7).
	StormRadius int
}

// Depths returns every node's depth below the root: the fewest calls from
// the root that reach it.
func (m *Model) Depths() (map[string]int, error) {
	if _, err := m.order(); err != nil {
		return nil, err
	}
	depth := map[string]int{m.Root: 0}
	queue := []string{m.Root}
	byName := m.byName()
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, c := range byName[n].Calls {
			if _, seen := depth[c.Callee]; !seen {
				depth[c.Callee] = depth[n] + 1
				queue = append(queue, c.Callee)
			}
		}
	}
	return depth, nil
}

func (m *Model) byName() map[string]*ModelNode {
	out := make(map[string]*ModelNode, len(m.Nodes))
	for i := range m.Nodes {
		out[m.Nodes[i].Name] = &m.Nodes[i]
	}
	return out
}

// order checks the model and returns the nodes reachable from the root,
// every caller before its callees.
func (m *Model) order() ([]*ModelNode, error) {
	byName := m.byName()
	if len(byName) != len(m.Nodes) {
		return nil, errors.New("model: two nodes with one name")
	}
	if byName[m.Root] == nil {
		return nil, fmt.Errorf("model: the root %q is not a node", m.Root)
	}
	for _, n := range m.Nodes {
		if !(n.OwnRate >= 0 && n.OwnRate <= 1) {
			return nil, fmt.Errorf("model: %s: own failure rate %v is not in [0, 1]", n.Name, n.OwnRate)
		}
		for _, c := range n.Calls {
			if byName[c.Callee] == nil {
				return nil, fmt.Errorf("model: %s calls %q, which is not a node", n.Name, c.Callee)
			}
			if !(c.PerRequest >= 0) || math.IsInf(c.PerRequest, 0) {
				return nil, fmt.Errorf("model: %s → %s: %v calls per request", n.Name, c.Callee, c.PerRequest)
			}
		}
	}
	// Depth-first, then reversed: a reverse postorder lists every caller
	// before its callees.
	state := map[string]int{}
	var post []*ModelNode
	var visit func(n *ModelNode, path []string) error
	visit = func(n *ModelNode, path []string) error {
		switch state[n.Name] {
		case 1:
			return fmt.Errorf("the calls form a cycle: %s → %s; a prediction needs calls without cycles", strings.Join(path, " → "), n.Name)
		case 2:
			return nil
		}
		state[n.Name] = 1
		for _, c := range n.Calls {
			if err := visit(byName[c.Callee], append(path, n.Name)); err != nil {
				return err
			}
		}
		state[n.Name] = 2
		post = append(post, n)
		return nil
	}
	if err := visit(byName[m.Root], nil); err != nil {
		return nil, err
	}
	slices.Reverse(post)
	return post, nil
}

// Predict returns what policy p does to the model's system.
func (m *Model) Predict(p RetryPolicy) (*Prediction, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	order, err := m.order()
	if err != nil {
		return nil, err
	}
	n, b := p.retries()
	// Bottom-up: each node's failure from its callees' (11.1–11.3).
	type edgeState struct{ attempts, fails, ok float64 }
	retried := map[*ModelNode][]bool{} // the call can be retried at all
	fail := map[string]float64{}       // P_n
	claimed := map[string]float64{}    // C_n
	edges := map[*ModelNode][]edgeState{}
	for i := len(order) - 1; i >= 0; i-- {
		node := order[i]
		s := 1.0
		for _, c := range node.Calls {
			pm := fail[c.Callee]
			r := pm
			if p.Policy == Ownership {
				r = claimed[c.Callee] // only claimed errors are retried (A4)
			}
			a, q := callFailure(pm, r, n, b)
			ok := callsSucceed(q, c.PerRequest)
			retried[node] = append(retried[node], a > 1)
			edges[node] = append(edges[node], edgeState{attempts: a, fails: q, ok: ok})
			if !c.Tolerated {
				s *= ok
			}
		}
		fail[node.Name] = 1 - s*(1-node.OwnRate)
		claimed[node.Name] = s * node.OwnRate
	}
	// Top-down: the load (11.4, 11.5).
	depth := map[string]map[int]float64{m.Root: {0: 1}}
	for _, node := range order {
		reach := 1.0
		for j, c := range node.Calls {
			e := edges[node][j]
			for d, load := range depth[node.Name] {
				if depth[c.Callee] == nil {
					depth[c.Callee] = map[int]float64{}
				}
				depth[c.Callee][d+1] += load * c.PerRequest * reach * e.attempts
			}
			if node.Sequential && !c.Tolerated {
				reach *= e.ok
			}
		}
	}
	pred := &Prediction{Policy: p, Served: map[string]float64{}, ServedByService: map[string]float64{},
		Failure: fail, Availability: 1 - fail[m.Root]}
	for _, node := range order {
		for d, load := range depth[node.Name] {
			pred.Served[node.Name] += load
			pred.ServedByService[node.Service] += load
			for len(pred.ServedByDepth) <= d {
				pred.ServedByDepth = append(pred.ServedByDepth, 0)
			}
			pred.ServedByDepth[d] += load
		}
	}
	pred.StormRadius = stormRadius(order, retried, pred.Served)
	return pred, nil
}

// callFailure returns a logical call's attempts and its probability of
// failing after its retries (11.1), for a callee failing an attempt with
// probability p, of which r may be retried, N retries and budget b.
func callFailure(p, r float64, n int, b float64) (attempts, fails float64) {
	x := r
	if want := geometric(r, n) - 1; want > b {
		// The budget refuses retries at random (A3): each further attempt
		// happens at the rate x at which the retries it grants are b.
		lo, hi := 0.0, r
		for range 200 {
			mid := (lo + hi) / 2
			if geometric(mid, n)-1 > b {
				hi = mid
			} else {
				lo = mid
			}
		}
		x = lo
	}
	attempts = geometric(x, n)
	return attempts, max(0, 1-(1-p)*attempts)
}

// geometric returns 1 + x + x² + … + x^n.
func geometric(x float64, n int) float64 {
	sum, term := 1.0, 1.0
	for range n {
		term *= x
		sum += term
	}
	return sum
}

// callsSucceed returns the probability that c calls per request, each
// failing with probability q, all succeed (11.2): ⌊c⌋ calls always, one
// more in a share c − ⌊c⌋ of the requests.
func callsSucceed(q, c float64) float64 {
	whole := math.Floor(c)
	return math.Pow(1-q, whole) * (1 - (c-whole)*q)
}

// stormRadius is the longest chain of consecutive hops that can retry
// (11.7): calls that can be retried, each made by a request of the
// callee of the one before, as the processor counts the radius (§7). On a
// chain with one failing service it is how far above the failure the
// retries reach.
func stormRadius(order []*ModelNode, retried map[*ModelNode][]bool, served map[string]float64) int {
	chain := map[string]int{} // the longest chain of retried calls into a node
	radius := 0
	for _, node := range order { // callers first
		if served[node.Name] <= 0 {
			continue
		}
		for j, c := range node.Calls {
			if retried[node][j] && c.PerRequest > 0 {
				chain[c.Callee] = max(chain[c.Callee], chain[node.Name]+1)
				radius = max(radius, chain[c.Callee])
			}
		}
	}
	return radius
}

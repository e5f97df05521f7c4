// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// Figures are what a deployment's store holds, merged over its collectors:
// what the CLI, the dashboards and the hints read, through the store's own
// queries.
type Figures struct {
	// Services: requests served, retries received, logical calls,
	// attempts, retries and retry decisions per service.
	Services []store.Amplification
	// Operations: failed requests by verdict and the claim-accuracy
	// confusion matrix per inbound operation.
	Operations []store.ClaimAccuracy
	// Edges: the edge model's counts and modes. LastSeen is cleared: it
	// says when a bucket was written, not what was seen.
	Edges []store.EdgeEstimate
	// Depths: requests served per root request by depth.
	Depths []store.RootDepth
	// Roots: root requests and the retry-storm radius.
	Roots []store.RootSummary
	// Audit: the coincidental errors audited, by trace and span ID.
	Audit []store.AuditRecord
}

// ModelConfig is the edge-model rule the collectors judge by: the engine's
// defaults, without decay (see processorSection).
func ModelConfig() dependencyanalysis.ModelConfig {
	cfg := dependencyanalysis.DefaultConfig().EdgeModel
	cfg.HalfLife = 0
	return cfg
}

// ReadFigures reads every figure st holds.
func ReadFigures(ctx context.Context, st *store.Store) (*Figures, error) {
	from, to := time.Unix(0, 0), time.Now().Add(24*time.Hour)
	var f Figures
	var err error
	if f.Services, err = st.Amplification(ctx, from, to); err != nil {
		return nil, err
	}
	if f.Operations, err = st.ClaimAccuracy(ctx, from, to); err != nil {
		return nil, err
	}
	if f.Edges, err = st.EdgeModel(ctx, from, 0, ModelConfig()); err != nil {
		return nil, err
	}
	for i := range f.Edges {
		f.Edges[i].LastSeen = time.Time{}
	}
	if f.Depths, err = st.ServedPerRoot(ctx, from, to); err != nil {
		return nil, err
	}
	if f.Roots, err = st.Roots(ctx, from, to); err != nil {
		return nil, err
	}
	if f.Audit, err = st.Audit(ctx, from, to, "", math.MaxInt32); err != nil {
		return nil, err
	}
	slices.SortFunc(f.Audit, func(a, b store.AuditRecord) int {
		return cmp.Or(strings.Compare(a.TraceID, b.TraceID), strings.Compare(a.SpanID, b.SpanID))
	})
	return &f, nil
}

// Served returns the requests served, summed over services.
func (f *Figures) Served() int64 {
	var n int64
	for _, s := range f.Services {
		n += s.Seen.Served
	}
	return n
}

// ModelFree returns the figures that do not depend on the edge model the
// collectors judged by: everything but the split of failed requests with
// failed calls into propagated and coincidental, the claims the rules
// expected of them, and the audit of the coincidental ones. Two
// deployments fed the same spans must agree on these whatever their
// models were when they judged.
func (f *Figures) ModelFree() *Figures {
	out := *f
	out.Operations = make([]store.ClaimAccuracy, len(f.Operations))
	for i, op := range f.Operations {
		out.Operations[i] = store.ClaimAccuracy{Service: op.Service, Operation: op.Operation,
			ClaimFigures: store.ClaimFigures[float64]{Failed: op.Failed}, Seen: store.ClaimFigures[int64]{Failed: op.Seen.Failed},
			Sampling: op.Sampling}
		out.Operations[i].Verdicts[dependencyanalysis.VerdictOwn] = op.Verdicts[dependencyanalysis.VerdictOwn]
		out.Operations[i].Seen.Verdicts[dependencyanalysis.VerdictOwn] = op.Seen.Verdicts[dependencyanalysis.VerdictOwn]
	}
	out.Audit = nil
	return &out
}

// The figures Counts holds, in the order reports list them.
const (
	FigServed          = "requests served"
	FigRetriesReceived = "retries received"
	FigCalls           = "logical calls"
	FigAttempts        = "attempts"
	FigRetriesSent     = "retries sent"
	FigSuppressed      = "retries suppressed"
	FigFailed          = "failed requests"
	FigOwn             = "verdict own"
	FigPropagated      = "verdict propagated"
	FigCoincidental    = "verdict coincidental"
	FigCorrect         = "claims as the rules expect"
	FigAudited         = "coincidental errors audited"
	FigFailedAlone     = "edge model: calls failed alone"
	FigFailedAloneReq  = "edge model: … and the request failed"
	FigRoots           = "root requests"
	FigDepth           = "requests served below a root, by depth"
	FigRadius          = "storm radius, summed over root requests"
)

// Figs lists the figures of Counts in report order.
var Figs = []string{FigServed, FigRetriesReceived, FigCalls, FigAttempts, FigRetriesSent, FigSuppressed,
	FigFailed, FigOwn, FigPropagated, FigCoincidental, FigCorrect, FigAudited,
	FigFailedAlone, FigFailedAloneReq, FigRoots, FigDepth, FigRadius}

// Counts are figures as sums by figure and then by key (a service, an
// operation, an edge, a root's depth and service…), so that two
// deployments' figures, and two moments', can be compared and subtracted.
type Counts map[string]map[string]float64

func (c Counts) add(fig, key string, v float64) {
	m := c[fig]
	if m == nil {
		m = make(map[string]float64)
		c[fig] = m
	}
	m[key] += v
}

// Counts returns the figures' counts.
func (f *Figures) Counts() Counts {
	c := make(Counts)
	for _, s := range f.Services {
		c.add(FigServed, s.Service, float64(s.Served))
		c.add(FigRetriesReceived, s.Service, float64(s.RetriesReceived))
		c.add(FigCalls, s.Service, float64(s.Calls))
		c.add(FigAttempts, s.Service, float64(s.Attempts))
		c.add(FigRetriesSent, s.Service, float64(s.RetriesSent))
		c.add(FigSuppressed, s.Service, float64(s.Suppressed()))
	}
	for _, op := range f.Operations {
		key := op.Service + " " + op.Operation
		c.add(FigFailed, key, float64(op.Failed))
		c.add(FigOwn, key, float64(op.Verdicts[dependencyanalysis.VerdictOwn]))
		c.add(FigPropagated, key, float64(op.Verdicts[dependencyanalysis.VerdictPropagated]))
		c.add(FigCoincidental, key, float64(op.Verdicts[dependencyanalysis.VerdictCoincidental]))
		c.add(FigCorrect, key, float64(op.Correct))
	}
	for _, a := range f.Audit {
		c.add(FigAudited, a.TraceID+"/"+a.SpanID, 1)
	}
	for _, e := range f.Edges {
		key := edgeName(&e)
		c.add(FigFailedAlone, key, e.Counts.Samples)
		c.add(FigFailedAloneReq, key, e.Counts.FailedRequestFailed)
	}
	for _, r := range f.Roots {
		key := r.RootService + " " + r.RootOperation
		c.add(FigRoots, key, float64(r.Requests))
		c.add(FigRadius, key, math.Round(r.StormRadiusMean*float64(r.Requests)))
	}
	for _, d := range f.Depths {
		c.add(FigDepth, fmt.Sprintf("%s %s, depth %d, %s", d.RootService, d.RootOperation, d.Depth, d.Service), float64(d.Served))
	}
	return c
}

func edgeName(e *store.EdgeEstimate) string {
	return fmt.Sprintf("%s %s → %s %s", e.Service, e.Operation, e.PeerService, e.PeerOperation)
}

// Minus returns c less before, key by key: what was added in between.
// Keys left at zero are dropped, and so are keys only before has: a
// store's counts only grow.
func (c Counts) Minus(before Counts) Counts {
	out := make(Counts)
	for fig, m := range c {
		for key, v := range m {
			if d := v - before[fig][key]; d != 0 {
				out.add(fig, key, d)
			}
		}
	}
	return out
}

// Total returns the sum of a figure over its keys.
func (c Counts) Total(fig string) float64 {
	t := 0.0
	for _, v := range c[fig] {
		t += v
	}
	return t
}

// Drift is how one figure of a deployment differs from the gateway's.
type Drift struct {
	Figure string
	// Gateway and Other are the figure's totals.
	Gateway, Other float64
	// Keys counts the keys either has; Differing those whose values differ.
	Keys, Differing int
}

// Relative returns (Other − Gateway) / Gateway, or 0 if both are 0.
func (d Drift) Relative() float64 {
	if d.Gateway == 0 {
		if d.Other == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return (d.Other - d.Gateway) / d.Gateway
}

// Compare returns, for each figure in Figs order, how other differs from
// gateway.
func Compare(gateway, other Counts) []Drift {
	var out []Drift
	for _, fig := range Figs {
		d := Drift{Figure: fig, Gateway: gateway.Total(fig), Other: other.Total(fig)}
		keys := make(map[string]bool)
		for k := range gateway[fig] {
			keys[k] = true
		}
		for k := range other[fig] {
			keys[k] = true
		}
		for k := range keys {
			d.Keys++
			if gateway[fig][k] != other[fig][k] {
				d.Differing++
			}
		}
		out = append(out, d)
	}
	return out
}

// ModeDrift compares the edge modes of two deployments' models: of the
// edges either judged fail-close or fail-open, how many each judged so and
// how many the other judged differently.
type ModeDrift struct {
	Mode                   ownership.Mode
	Gateway, Other         int
	OnlyGateway, OnlyOther int // judged so by the gateway only, by the other only
}

// CompareModes compares the modes of the edges of gateway and other.
func CompareModes(gateway, other *Figures) []ModeDrift {
	modes := func(f *Figures) map[string]ownership.Mode {
		m := make(map[string]ownership.Mode)
		for i := range f.Edges {
			m[edgeName(&f.Edges[i])] = f.Edges[i].Mode
		}
		return m
	}
	g, o := modes(gateway), modes(other)
	var out []ModeDrift
	for _, mode := range []ownership.Mode{ownership.ModeFailClose, ownership.ModeFailOpen} {
		d := ModeDrift{Mode: mode}
		for k, m := range g {
			if m == mode {
				d.Gateway++
				if o[k] != mode {
					d.OnlyGateway++
				}
			}
		}
		for k, m := range o {
			if m == mode {
				d.Other++
				if g[k] != mode {
					d.OnlyOther++
				}
			}
		}
		out = append(out, d)
	}
	return out
}

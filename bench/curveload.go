// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// Workloads of the growth curves: each point is a warm-up input, fed
// before the measurement so that names, pools and the edge model are as a
// running collector has them, and a measured input of about curveSpans.
var curveSpans = 50_000

// The points of the growth curves.
var (
	traceSizes    = []int{1, 10, 100, 1_000, 10_000, 100_000}
	edgeCounts    = []int{10, 100, 1_000, 10_000, 100_000, 1_000_000}
	lateFractions = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5}
	fleetSizes    = []int{50, 500, 5_000}
)

// curve is one growth curve: its points and the inputs of each.
type curve struct {
	key, title, xLabel string
	logX               bool
	points             []float64
}

var curves = []curve{
	{key: "trace-size", title: "CPU per span as traces grow", xLabel: "spans per trace", logX: true, points: floats(traceSizes)},
	{key: "edges", title: "CPU per span as distinct edges grow", xLabel: "distinct edges", logX: true, points: floats(edgeCounts)},
	{key: "late", title: "CPU per span as spans arrive late", xLabel: "spans arriving after their trace was analysed (%)", points: percents(lateFractions)},
	{key: "fleet", title: "CPU per span as the fleet grows", xLabel: "services (trace sizes power-law from 1 to 10,000 spans, 2 % errors)", logX: true, points: floats(fleetSizes)},
}

func floats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

func percents(fs []float64) []float64 {
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = 100 * f
	}
	return out
}

// curveInput names an input of point i of curve c: part is "warmup",
// "measured" or, for the late curve, "late".
func curveInput(c string, i int, part string) string {
	return fmt.Sprintf("curve-%s-%d-%s.otlp", c, i, part)
}

// treeTraces returns n traces of about size spans: a root request whose
// service calls up to treeFanout services a level down, each doing the
// same, depth first, until the trace has size spans (a call is a CLIENT
// and a SERVER span). Each level is a service of its own, so the edges
// stay few however large the trace; 2 % of the requests fail on their own.
func treeTraces(name string, size, n int) ptrace.Traces {
	const (
		treeFanout = 4
		treeDepth  = 9 // 4+16+…+4^9 calls: room for 100,000-span traces
	)
	rng := rand.New(rand.NewPCG(seedOf(name), 1)) //nolint:gosec // G404: seeded, so that every run loads the same traces
	w := scenario.NewWorld(name)
	budget := 0
	for level := 0; level <= treeDepth; level++ {
		w.Service(levelService(level)).Handle(levelOp(level), func(r *scenario.Request) scenario.Response {
			for range treeFanout {
				if budget == 0 || level == treeDepth {
					break
				}
				budget--
				r.Call(levelService(level+1), levelOp(level+1))
			}
			if rng.Float64() < 0.02 {
				return scenario.Fail()
			}
			return scenario.OK()
		})
	}
	for range n {
		budget = size / 2
		w.Root(levelService(0), levelOp(0))
	}
	return w.Traces()
}

func levelService(level int) string { return "tier-" + strconv.Itoa(level) }
func levelOp(level int) string      { return "GET /level" + strconv.Itoa(level) }

// edgeCallsPerTrace is how many services the root request of an edges
// workload trace calls.
const edgeCallsPerTrace = 10

// edgeServices is how many services the edges workload spreads its
// operations over.
const edgeServices = 50

// edgeTraces returns n traces over edges distinct edges (a multiple of
// edgeCallsPerTrace): edges/edgeCallsPerTrace root operations, spread over
// edgeServices services, each calling edgeCallsPerTrace operations of
// other services. With cover, trace t is root operation t modulo their
// number, so n of at least that many covers every edge; without, each
// trace's root operation is drawn at random, so that a few traces touch
// edges all over the model, as a fleet's do. The first call's failure
// fails the request (a fail-close edge); the others are tolerated.
func edgeTraces(name string, edges, n int, cover bool) ptrace.Traces {
	roots := max(1, edges/edgeCallsPerTrace)
	rng := rand.New(rand.NewPCG(seedOf(name), 2)) //nolint:gosec // G404: seeded, so that every run loads the same traces
	w := scenario.NewWorld(name)
	for s := range edgeServices {
		svc := w.Service(edgeService(s))
		for j := range edgeCallsPerTrace {
			svc.Handle(calleeOp(j), func(*scenario.Request) scenario.Response {
				if rng.Float64() < 0.05 {
					return scenario.Fail()
				}
				return scenario.OK()
			})
		}
	}
	for k := range roots {
		w.Service(edgeService(k)).Handle(rootOp(k), func(r *scenario.Request) scenario.Response {
			failed := false
			for j := range edgeCallsPerTrace {
				res := r.Call(edgeService(k+1+j), calleeOp(j))
				failed = failed || (j == 0 && res.Failed)
			}
			if failed {
				return scenario.Fail()
			}
			return scenario.OK()
		})
	}
	for t := range n {
		k := t % roots
		if !cover {
			k = rng.IntN(roots)
		}
		w.Root(edgeService(k), rootOp(k))
	}
	return w.Traces()
}

// The fleet workload: services with fleetOps operations each, called with
// power-law popularity; trace sizes power-law from 1 to fleetMaxSpans.
const (
	fleetOps      = 8
	fleetMaxSpans = 10_000
	fleetFanout   = 4
	fleetErrors   = 0.02
)

// fleetTraces returns traces of about spans spans in all over a fleet of
// services: a trace's size is drawn from a Pareto distribution (exponent
// 2, so that most traces hold one or a few spans — health checks, cache
// reads — and a quarter of the spans are in traces of a thousand or more),
// its root a random operation of a random service. Each request calls up
// to fleetFanout operations, chosen with Zipf popularity among every
// service's, depth first until the trace has its size. 2 % of the
// requests fail on their own; a failed call fails its caller's request
// when it is the caller's first call (fail-close), and is tolerated
// otherwise.
func fleetTraces(name string, services, spans int) ptrace.Traces {
	rng := rand.New(rand.NewPCG(seedOf(name), 3)) //nolint:gosec // G404: seeded, so that every run loads the same traces
	w := scenario.NewWorld(name)
	callees := rand.NewZipf(rng, 1.1, 1, uint64(services*fleetOps-1))
	budget, depth := 0, 0
	for s := range services {
		svc := w.Service(fleetService(s))
		for o := range fleetOps {
			svc.Handle(fleetOp(o), func(r *scenario.Request) scenario.Response {
				failed := false
				depth++
				for j := range fleetFanout {
					if budget == 0 || depth > 12 {
						break
					}
					budget--
					c := int(callees.Uint64())
					res := r.Call(fleetService(c/fleetOps), fleetOp(c%fleetOps))
					failed = failed || (j == 0 && res.Failed)
				}
				depth--
				if failed || rng.Float64() < fleetErrors {
					return scenario.Fail()
				}
				return scenario.OK()
			})
		}
	}
	for total := 0; total < spans; {
		size := min(int(1/(1-rng.Float64()*(1-1.0/fleetMaxSpans))), fleetMaxSpans)
		budget = (size - 1) / 2
		total += 1 + 2*budget
		w.Root(fleetService(rng.IntN(services)), fleetOp(rng.IntN(fleetOps)))
	}
	return w.Traces()
}

func fleetService(i int) string { return "svc-" + strconv.Itoa(i) }
func fleetOp(j int) string      { return "GET /op/" + strconv.Itoa(j) }

func edgeService(i int) string { return "svc-" + strconv.Itoa(i%edgeServices) }
func rootOp(k int) string      { return "GET /root/" + strconv.Itoa(k) }
func calleeOp(j int) string    { return "GET /callee/" + strconv.Itoa(j) }

// splitLate parts td's spans into those that arrive in time and the
// fraction late that arrive after their trace was analysed, chosen by a
// hash of the span ID so that the same fraction always picks the same
// spans, and a larger one a superset of them.
func splitLate(td ptrace.Traces, late float64) (onTime, delayed ptrace.Traces) {
	onTime, delayed = ptrace.NewTraces(), ptrace.NewTraces()
	traceRuns(td, func(rss []ptrace.ResourceSpans, _ int) {
		// A trace's spans start resources of their own, so that the
		// batches cut from them later hold whole traces.
		split := [2]bool{true, true}
		for _, rs := range rss {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					id := sp.SpanID()
					u := float64(mix64(binary.BigEndian.Uint64(id[:]))>>11) / (1 << 53)
					k, dst := 0, onTime
					if u < late {
						k, dst = 1, delayed
					}
					if split[k] {
						newScope(dst, rs, ss)
						split[k] = false
					}
					sp.CopyTo(lastScope(dst, rs, ss).Spans().AppendEmpty())
				}
			}
		}
	})
	return onTime, delayed
}

func seedOf(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// curveGen makes one input of the growth curves.
type curveGen struct {
	name string
	gen  func() ptrace.Traces
	// batchSpans is the most spans a batch holds.
	batchSpans int
}

// make generates the input's traces and returns them in whole-trace
// batches, with how many traces there are.
func (g curveGen) make() ([]ptrace.Traces, int) {
	td := g.gen()
	randomIDs(td)
	traces := traceCount(td)
	return wholeTraceBatches(td, g.batchSpans), traces
}

// curveInputs lists every input of the growth curves.
func curveInputs() []curveGen {
	var out []curveGen
	batchSpans := wholeBatchSpans
	add := func(name string, gen func() ptrace.Traces) {
		out = append(out, curveGen{name: name, gen: gen, batchSpans: batchSpans})
	}
	for i, size := range traceSizes {
		// A trace larger than a batch comes in a batch of its own, so
		// that only its size changes, not how it arrives.
		batchSpans = max(wholeBatchSpans, size+1)
		add(curveInput("trace-size", i, "measured"), func() ptrace.Traces {
			return treeTraces("size/"+strconv.Itoa(size), size, max(1, curveSpans/size))
		})
		// As many traces as the point's, so that the trace table is the
		// size the point needs, as a running collector's is.
		warm := min(size, 2_000)
		add(curveInput("trace-size", i, "warmup"), func() ptrace.Traces {
			return treeTraces("size-warmup/"+strconv.Itoa(size), warm, max(1, curveSpans/size))
		})
	}
	perTrace := 1 + 2*edgeCallsPerTrace
	for i, edges := range edgeCounts {
		add(curveInput("edges", i, "measured"), func() ptrace.Traces {
			return edgeTraces("edges/"+strconv.Itoa(edges), edges, curveSpans/perTrace, false)
		})
		add(curveInput("edges", i, "warmup"), func() ptrace.Traces {
			return edgeTraces("edges-warmup/"+strconv.Itoa(edges), edges, max(edges/edgeCallsPerTrace, wholeBatchSpans/perTrace), true)
		})
	}
	// A fleet's large traces arrive cut over batches, as from an agent.
	for i, services := range fleetSizes {
		add(curveInput("fleet", i, "measured"), func() ptrace.Traces {
			return fleetTraces("fleet/"+strconv.Itoa(services), services, 2*curveSpans)
		})
		add(curveInput("fleet", i, "warmup"), func() ptrace.Traces {
			return fleetTraces("fleet-warmup/"+strconv.Itoa(services), services, 2*curveSpans)
		})
	}
	batchSpans = wholeBatchSpans
	// Every fraction splits the same traces: generated once, only read
	// (splitLate copies), so the inputs may be made concurrently.
	// (Both parts get their random IDs from the same bijection, so the
	// late spans' parents are still found among the others.)
	lateMix := sync.OnceValue(func() ptrace.Traces { return scenario.Mix(curveSpans/20, 1_000) })
	for i, f := range lateFractions {
		add(curveInput("late", i, "measured"), func() ptrace.Traces { onTime, _ := splitLate(lateMix(), f); return onTime })
		add(curveInput("late", i, "late"), func() ptrace.Traces { _, late := splitLate(lateMix(), f); return late })
		add(curveInput("late", i, "warmup"), func() ptrace.Traces { return scenario.Mix(wholeBatchSpans/20, 1_001) })
	}
	return out
}

// traceCount is the number of distinct trace IDs in td.
func traceCount(td ptrace.Traces) int {
	seen := map[[16]byte]struct{}{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				seen[sp.TraceID()] = struct{}{}
			}
		}
	}
	return len(seen)
}

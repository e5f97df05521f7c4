// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// Colours of the service graph, Grafana's palette names where a field's
// colour config takes one, HTML colours where the Node Graph wants them.
const (
	colorOK         = "green"
	colorOwned      = "red"
	colorPropagated = "orange"
	colorUnseen     = "text"

	edgeFailClose = "#F2495C" // red: the caller fails with it, the retries belong here
	edgeFailOpen  = "#73BF69" // green: tolerated, its failures are not the caller's
	edgeUnknown   = "#8E8E8E" // grey: not enough evidence yet; treated as fail-close
	edgeMixed     = "#FF9830" // orange: the caller's operations disagree
)

// Node sizes in pixels: a node's area grows with the requests it served.
const (
	minNodeRadius = 25
	maxNodeRadius = 50
)

// graphInput is what the service graph is drawn from.
type graphInput struct {
	Amplification []store.Amplification
	Accuracy      []store.ClaimAccuracy
	Edges         []store.ServiceEdge
	Model         []store.EdgeEstimate
	// Seconds is the length of the time range, for rates.
	Seconds float64
	// Service, if not empty, keeps only the service and its direct callers
	// and callees.
	Service string
}

// node is one service of the graph; its figures are estimates of all
// traffic (store's readers), so that rates and ratios are of estimates.
type node struct {
	served, retriesReceived, retriesSent, suppressed float64
	failed, own, propagated, coincidental            float64
	claimsSent, claimsMissing                        float64
	seen                                             bool // served requests in the range
}

// serviceGraphFrames returns the Node Graph's nodes and edges frames:
// services sized by the requests they served, ringed by the share of them
// that succeeded, failed with an error the service owns (own or
// coincidental) or failed with a dependency's error it propagated; calls
// between services coloured by the edge model's mode and drawn thicker the
// more they were retried.
func serviceGraphFrames(in graphInput) (nodes, edges *data.Frame) {
	byName := make(map[string]*node)
	get := func(name string) *node {
		n := byName[name]
		if n == nil {
			n = new(node)
			byName[name] = n
		}
		return n
	}
	for _, a := range in.Amplification {
		n := get(a.Service)
		n.served, n.retriesReceived, n.retriesSent, n.suppressed = a.Served, a.RetriesReceived, a.RetriesSent, a.Suppressed()
		n.seen = a.Served > 0
	}
	for _, c := range in.Accuracy {
		n := get(c.Service)
		n.failed += c.Failed
		n.own += c.Verdicts[dependencyanalysis.VerdictOwn]
		n.propagated += c.Verdicts[dependencyanalysis.VerdictPropagated]
		n.coincidental += c.Verdicts[dependencyanalysis.VerdictCoincidental]
		for claim, byVerdict := range c.Requests {
			for _, r := range byVerdict {
				if ownership.Claim(claim) == ownership.ClaimMissing {
					n.claimsMissing += r
				} else {
					n.claimsSent += r
				}
			}
		}
	}
	keep := func(e store.ServiceEdge) bool {
		return in.Service == "" || e.Service == in.Service || e.PeerService == in.Service
	}
	var kept []store.ServiceEdge
	for _, e := range in.Edges {
		get(e.Service)
		get(e.PeerService)
		if keep(e) {
			kept = append(kept, e)
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		if in.Service == "" || name == in.Service || slices.ContainsFunc(kept, func(e store.ServiceEdge) bool {
			return e.Service == name || e.PeerService == name
		}) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return nodesFrame(names, byName, in.Seconds), edgesFrame(kept, edgeModes(in.Model), in.Seconds)
}

func nodesFrame(names []string, byName map[string]*node, seconds float64) *data.Frame {
	var maxServed float64
	for _, name := range names {
		maxServed = max(maxServed, byName[name].served)
	}
	n := len(names)
	id, title, subtitle := make([]string, n), make([]string, n), make([]string, n)
	mainstat, secondary := make([]float64, n), make([]float64, n)
	arcOK, arcOwned, arcPropagated, arcUnseen := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	radius := make([]float64, n)
	served, failed, own, propagated, coincidental := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	received, sent, suppressed := make([]float64, n), make([]float64, n), make([]float64, n)
	for i, name := range names {
		s := byName[name]
		id[i], title[i] = name, name
		switch {
		case !s.seen:
			subtitle[i] = "no requests served in view"
		case s.claimsSent == 0 && s.claimsMissing > 0:
			subtitle[i] = "sends no claims (no hooks)"
		}
		mainstat[i] = rate(s.served, seconds)
		secondary[i] = ratio(s.failed, s.served)
		if s.served > 0 {
			owned := s.own + s.coincidental
			arcOwned[i] = ratio(owned, s.served)
			arcPropagated[i] = ratio(s.propagated, s.served)
			arcOK[i] = max(0, 1-arcOwned[i]-arcPropagated[i])
		} else {
			arcUnseen[i] = 1
		}
		radius[i] = minNodeRadius
		if maxServed > 0 {
			radius[i] += (maxNodeRadius - minNodeRadius) * math.Sqrt(float64(s.served)/float64(maxServed))
		}
		served[i], failed[i], own[i], propagated[i], coincidental[i] = s.served, s.failed, s.own, s.propagated, s.coincidental
		received[i], sent[i], suppressed[i] = s.retriesReceived, s.retriesSent, s.suppressed
	}
	f := data.NewFrame("nodes",
		data.NewField("id", nil, id),
		data.NewField("title", nil, title),
		data.NewField("subtitle", nil, subtitle),
		data.NewField("mainstat", nil, mainstat).SetConfig(&data.FieldConfig{DisplayName: "Requests served", Unit: "reqps"}),
		data.NewField("secondarystat", nil, secondary).SetConfig(&data.FieldConfig{DisplayName: "Failed", Unit: "percentunit"}),
		data.NewField("arc__ok", nil, arcOK).SetConfig(arcConfig("Succeeded", colorOK)),
		data.NewField("arc__owned", nil, arcOwned).SetConfig(arcConfig("Failed, error owned (own or coincidental)", colorOwned)),
		data.NewField("arc__propagated", nil, arcPropagated).SetConfig(arcConfig("Failed, a dependency's error propagated", colorPropagated)),
		data.NewField("arc__unseen", nil, arcUnseen).SetConfig(arcConfig("Not seen serving", colorUnseen)),
		data.NewField("nodeRadius", nil, radius),
		data.NewField("detail__served", nil, served).SetConfig(&data.FieldConfig{DisplayName: "Requests served"}),
		data.NewField("detail__failed", nil, failed).SetConfig(&data.FieldConfig{DisplayName: "Failed requests"}),
		data.NewField("detail__own", nil, own).SetConfig(&data.FieldConfig{DisplayName: "Own errors"}),
		data.NewField("detail__coincidental", nil, coincidental).SetConfig(&data.FieldConfig{DisplayName: "Coincidental errors (owned)"}),
		data.NewField("detail__propagated", nil, propagated).SetConfig(&data.FieldConfig{DisplayName: "Propagated errors"}),
		data.NewField("detail__retries_received", nil, received).SetConfig(&data.FieldConfig{DisplayName: "Retries received"}),
		data.NewField("detail__retries_sent", nil, sent).SetConfig(&data.FieldConfig{DisplayName: "Retries sent"}),
		data.NewField("detail__suppressed", nil, suppressed).SetConfig(&data.FieldConfig{DisplayName: "Retries suppressed"}),
	)
	f.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeNodeGraph}
	return f
}

func arcConfig(name, color string) *data.FieldConfig {
	return &data.FieldConfig{DisplayName: name, Color: map[string]any{"mode": "fixed", "fixedColor": color}}
}

// pair is a caller and a callee service.
type pair struct{ service, peer string }

// modeCount counts a pair's operation-level edges by mode.
type modeCount map[ownership.Mode]int

// edgeModes counts each service pair's edges in the model by mode.
func edgeModes(model []store.EdgeEstimate) map[pair]modeCount {
	out := make(map[pair]modeCount)
	for _, e := range model {
		k := pair{e.Service, e.PeerService}
		if out[k] == nil {
			out[k] = make(modeCount)
		}
		out[k][e.Mode]++
	}
	return out
}

// mode names a pair's mode: the mode of all its edges, "mixed" when they
// differ, unknown without any in the model.
func (c modeCount) mode() string {
	switch len(c) {
	case 0:
		return ownership.ModeUnknown.String()
	case 1:
		for m := range c {
			return m.String()
		}
	}
	return "mixed"
}

// String lists the counts, fail_close first: "2 fail_close, 1 unknown".
func (c modeCount) String() string {
	var parts []string
	for _, m := range []ownership.Mode{ownership.ModeFailClose, ownership.ModeFailOpen, ownership.ModeUnknown} {
		if c[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[m], m))
		}
	}
	if len(parts) == 0 {
		return "not in the edge model"
	}
	return strings.Join(parts, ", ")
}

func edgeColor(mode string) string {
	switch mode {
	case ownership.ModeFailClose.String():
		return edgeFailClose
	case ownership.ModeFailOpen.String():
		return edgeFailOpen
	case "mixed":
		return edgeMixed
	}
	return edgeUnknown
}

func edgesFrame(edges []store.ServiceEdge, modes map[pair]modeCount, seconds float64) *data.Frame {
	n := len(edges)
	id, source, target := make([]string, n), make([]string, n), make([]string, n)
	mainstat, secondary, thickness := make([]float64, n), make([]float64, n), make([]float64, n)
	color, dash, mode, operations := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	calls, failed, attempts, retries := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	supUnclaimed, supBudget := make([]float64, n), make([]float64, n)
	for i, e := range edges {
		// %q keeps ids distinct whatever the names hold.
		id[i] = fmt.Sprintf("%q>%q", e.Service, e.PeerService)
		source[i], target[i] = e.Service, e.PeerService
		mainstat[i] = rate(e.Retries, seconds)
		secondary[i] = rate(e.Calls, seconds)
		// One retry per call, the storm of docs/design.md §1, draws the
		// thickest edge.
		thickness[i] = 1 + 4*min(1, ratio(e.Retries, e.Calls))
		c := modes[pair{e.Service, e.PeerService}]
		mode[i], operations[i] = c.mode(), c.String()
		color[i] = edgeColor(mode[i])
		if mode[i] == ownership.ModeUnknown.String() {
			dash[i] = "5 5"
		}
		calls[i], failed[i], attempts[i], retries[i] = e.Calls, e.FailedCalls, e.Attempts, e.Retries
		supUnclaimed[i], supBudget[i] = e.SuppressedUnclaimed, e.SuppressedBudget
	}
	f := data.NewFrame("edges",
		data.NewField("id", nil, id),
		data.NewField("source", nil, source),
		data.NewField("target", nil, target),
		data.NewField("mainstat", nil, mainstat).SetConfig(&data.FieldConfig{DisplayName: "Retries", Unit: "reqps"}),
		data.NewField("secondarystat", nil, secondary).SetConfig(&data.FieldConfig{DisplayName: "Calls", Unit: "reqps"}),
		data.NewField("thickness", nil, thickness),
		data.NewField("color", nil, color),
		data.NewField("strokeDasharray", nil, dash),
		data.NewField("detail__mode", nil, mode).SetConfig(&data.FieldConfig{DisplayName: "Mode"}),
		data.NewField("detail__edges", nil, operations).SetConfig(&data.FieldConfig{DisplayName: "Edges by mode (per operation)"}),
		data.NewField("detail__calls", nil, calls).SetConfig(&data.FieldConfig{DisplayName: "Calls"}),
		data.NewField("detail__failed_calls", nil, failed).SetConfig(&data.FieldConfig{DisplayName: "Failed calls"}),
		data.NewField("detail__attempts", nil, attempts).SetConfig(&data.FieldConfig{DisplayName: "Attempts"}),
		data.NewField("detail__retries", nil, retries).SetConfig(&data.FieldConfig{DisplayName: "Retries"}),
		data.NewField("detail__suppressed_unclaimed", nil, supUnclaimed).SetConfig(&data.FieldConfig{DisplayName: "Retries suppressed: unclaimed"}),
		data.NewField("detail__suppressed_budget", nil, supBudget).SetConfig(&data.FieldConfig{DisplayName: "Retries suppressed: budget"}),
	)
	f.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeNodeGraph}
	return f
}

// edgeModelFrame lists every edge of the model with its mode, the
// confidence the mode rests on (as the hints give it), the Wilson bounds of
// P(request fails | the call failed alone) and the evidence.
func edgeModelFrame(model []store.EdgeEstimate) *data.Frame {
	n := len(model)
	service, operation, peer, peerOp := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	addresses, mode := make([]string, n), make([]string, n)
	confidence, lower, upper := make([]float64, n), make([]float64, n), make([]float64, n)
	samples := make([]int64, n)
	failed, failedReqFailed, ok, okReqFailed := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	lastSeen := make([]time.Time, n)
	for i, e := range model {
		h := e.HintEdge(e.Operation, e.PeerService, e.PeerOperation, e.PeerAddresses)
		service[i], operation[i], peer[i], peerOp[i] = e.Service, e.Operation, e.PeerService, e.PeerOperation
		addresses[i], mode[i] = strings.Join(e.PeerAddresses, ", "), h.Mode.String()
		confidence[i], lower[i], upper[i], samples[i] = h.Confidence, e.Lower, e.Upper, h.Samples
		failed[i], failedReqFailed[i] = e.Counts.Failed, e.Counts.FailedRequestFailed
		ok[i], okReqFailed[i] = e.Counts.OK, e.Counts.OKRequestFailed
		lastSeen[i] = e.LastSeen
	}
	pct := func(name string) *data.FieldConfig {
		return &data.FieldConfig{DisplayName: name, Unit: "percentunit"}
	}
	named := func(name string) *data.FieldConfig { return &data.FieldConfig{DisplayName: name} }
	f := data.NewFrame("edge model",
		data.NewField("service", nil, service).SetConfig(named("Service")),
		data.NewField("operation", nil, operation).SetConfig(named("Operation")),
		data.NewField("peer_service", nil, peer).SetConfig(named("Peer service")),
		data.NewField("peer_operation", nil, peerOp).SetConfig(named("Peer operation")),
		data.NewField("mode", nil, mode).SetConfig(named("Mode")),
		data.NewField("confidence", nil, confidence).SetConfig(pct("Confidence")),
		data.NewField("p_lower", nil, lower).SetConfig(pct("P(request fails | call failed alone), lower bound")),
		data.NewField("p_upper", nil, upper).SetConfig(pct("P(request fails | call failed alone), upper bound")),
		data.NewField("samples", nil, samples).SetConfig(named("Samples (failed alone, counted)")),
		data.NewField("failed_alone", nil, failed).SetConfig(named("Failed alone (weighted)")),
		data.NewField("failed_alone_request_failed", nil, failedReqFailed).SetConfig(named("…and the request failed (weighted)")),
		data.NewField("call_ok", nil, ok).SetConfig(named("Call succeeded (weighted)")),
		data.NewField("call_ok_request_failed", nil, okReqFailed).SetConfig(named("…and the request failed anyway (weighted)")),
		data.NewField("peer_addresses", nil, addresses).SetConfig(named("Peer addresses")),
		data.NewField("last_seen", nil, lastSeen).SetConfig(named("Last seen")),
	)
	f.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeTable}
	return f
}

// hintsDocument builds the hints a service would get from the collector,
// as the processor builds them: every edge of the service in the model,
// in the hints' form, ordered by operation, peer service and peer
// operation.
func hintsDocument(service string, edges []store.EdgeEstimate, at time.Time, s *Settings) (ownership.Hints, error) {
	out := make([]ownership.HintEdge, 0, len(edges))
	for _, e := range edges {
		out = append(out, e.HintEdge(e.Operation, e.PeerService, e.PeerOperation, e.PeerAddresses))
	}
	// The database's collation may order names otherwise than the
	// processor, which compares bytes.
	slices.SortFunc(out, func(a, b ownership.HintEdge) int {
		return cmp.Or(strings.Compare(a.Operation, b.Operation), strings.Compare(a.PeerService, b.PeerService),
			strings.Compare(a.PeerOperation, b.PeerOperation))
	})
	budget := s.RetryBudget
	doc := ownership.Hints{
		Version:     ownership.HintsVersion,
		Service:     service,
		GeneratedAt: at.UTC(),
		TTLSeconds:  int(s.HintsTTL / time.Second),
		RetryBudget: &budget,
		Edges:       out,
	}
	return doc, doc.Validate(service)
}

// hintsFrames shows a hints document as its edges, and as the JSON the
// collector's hints endpoint would serve.
func hintsFrames(doc ownership.Hints) (data.Frames, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	n := len(doc.Edges)
	operation, peer, peerOp, addresses, mode := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	confidence := make([]float64, n)
	samples := make([]int64, n)
	for i, e := range doc.Edges {
		operation[i], peer[i], peerOp[i] = e.Operation, e.PeerService, e.PeerOperation
		addresses[i], mode[i] = strings.Join(e.PeerAddresses, ", "), e.Mode.String()
		confidence[i], samples[i] = e.Confidence, e.Samples
	}
	named := func(name string) *data.FieldConfig { return &data.FieldConfig{DisplayName: name} }
	edges := data.NewFrame("hints",
		data.NewField("operation", nil, operation).SetConfig(named("Operation")),
		data.NewField("peer_service", nil, peer).SetConfig(named("Peer service")),
		data.NewField("peer_operation", nil, peerOp).SetConfig(named("Peer operation")),
		data.NewField("peer_addresses", nil, addresses).SetConfig(named("Peer addresses")),
		data.NewField("mode", nil, mode).SetConfig(named("Mode")),
		data.NewField("confidence", nil, confidence).SetConfig(&data.FieldConfig{DisplayName: "Confidence", Unit: "percentunit"}),
		data.NewField("samples", nil, samples).SetConfig(named("Samples")),
	)
	document := data.NewFrame("document",
		data.NewField("json", nil, []string{string(body)}).SetConfig(named(ownership.HintsPath+"?service="+doc.Service)),
	)
	return data.Frames{edges, document}, nil
}

// rate is n per second over seconds (0 without a range).
func rate(n, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return n / seconds
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

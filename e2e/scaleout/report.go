// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
)

// Print writes the report: each phase with the analysis collectors side by
// side, merged, and beside one gateway (and the load balancer); how the
// load balancer's figures drift; the chain's requests per root request by
// depth; the hints; and what the rebalance cost.
func (rep *Report) Print(w io.Writer) {
	m := &rep.Measured
	fmt.Fprintf(w, "\n== Measured phase (%d traces, %d spans): two analysis collectors, merged, one gateway, the load balancer\n",
		m.Sent.Traces, m.Sent.Spans)
	rep.printReplicas(w, m, &rep.Warmup, true)

	fmt.Fprintf(w, "\n== Store figures gained in the measured phase: Kafka (merged) and the load balancer against one gateway\n")
	kafka, lb := Compare(m.Gained[Gateway], m.Gained[Kafka]), Compare(m.Gained[Gateway], m.Gained[LoadBalancer])
	tw := table(w, "figure", "one gateway", "Kafka", "rows differing", "load balancer", "drift", "rows differing")
	for i := range kafka {
		k, l := kafka[i], lb[i]
		row(tw, k.Figure, num(k.Gateway), num(k.Other), fmt.Sprintf("%d/%d", k.Differing, k.Keys),
			num(l.Other), pct(l.Relative()), fmt.Sprintf("%d/%d", l.Differing, l.Keys))
	}
	tw.Flush()
	for _, d := range []string{Kafka, LoadBalancer} {
		var parts []string
		for _, md := range CompareModes(m.Figures[Gateway], m.Figures[d]) {
			parts = append(parts, fmt.Sprintf("%d %s (gateway %d; %d only the gateway's, %d new)", md.Other, md.Mode, md.Gateway, md.OnlyGateway, md.OnlyOther))
		}
		fmt.Fprintf(w, "edges judged, %s: %s\n", d, strings.Join(parts, ", "))
	}

	fmt.Fprintf(w, "\n== Requests served per root request by depth: the chain under retry_every_hop, warm-up and measured phases\n")
	tw = table(w, append(append([]string{"deployment"}, simulation.ChainServices...), "radius max", "radius mean")...)
	op := "GET /chain/" + string(simulation.RetryEveryHop)
	for _, d := range []string{Gateway, Kafka, LoadBalancer} {
		f := m.Figures[d]
		cells := []string{d}
		for _, svc := range simulation.ChainServices {
			per := 0.0
			for _, r := range f.Depths {
				if r.RootOperation == op && r.Service == svc {
					per += r.PerRoot
				}
			}
			cells = append(cells, fmt.Sprintf("%.2f", per))
		}
		for _, r := range f.Roots {
			if r.RootOperation == op {
				cells = append(cells, fmt.Sprint(r.StormRadiusMax), fmt.Sprintf("%.2f", r.StormRadiusMean))
			}
		}
		row(tw, cells...)
	}
	tw.Flush()
	rep.printHints(w, m)

	h := &rep.Handover
	r := &rep.Rebalanced
	fmt.Fprintf(w, "\n== Rebalance while traffic flowed (%d traces, %d spans in %v)\n", r.Sent.Traces, r.Sent.Spans, rep.Options.Rebalance)
	fmt.Fprintf(w, "SIGTERM to %s (%.0f partitions): it exited after %v; the others consumed all %d partitions %v after the signal\n",
		h.Stopped, h.Moved, ms(h.StopTook), rep.Options.Partitions, ms(h.TakenOver))
	fmt.Fprintf(w, "%s joined: started in %v, consumed its share %v after it was started\n", h.Joined, ms(h.StartTook), ms(h.JoinTook))
	fmt.Fprintf(w, "spans the front tier was sent, over the whole run, passed on by the analysis collectors %s: %d duplicates, %d missing\n",
		fmtCounts(h.Delivered), h.Duplicates, h.Missing)
	var lost Telemetry
	for name := range r.Telemetry {
		lost = lost.Plus(r.TelemetrySince(name, &rep.Measured))
	}
	fmt.Fprintf(w, "traces analysed in parts, split between collectors at a handover: %d of %d (%.1f%%); late spans %.0f, dropped %.0f, evicted %.0f\n",
		h.Split, h.Traces, 100*float64(h.Split)/math.Max(1, float64(h.Traces)), lost.Late, lost.Dropped, lost.Evicted)
	fmt.Fprintf(w, "store figures gained in the rebalance phase, Kafka against one gateway:\n")
	tw = table(w, "figure", "one gateway", "Kafka", "drift", "rows differing")
	for _, d := range Compare(r.Gained[Gateway], r.Gained[Kafka]) {
		row(tw, d.Figure, num(d.Gateway), num(d.Other), pct(d.Relative()), fmt.Sprintf("%d/%d", d.Differing, d.Keys))
	}
	tw.Flush()

	s := &rep.Scaled
	fmt.Fprintf(w, "\n== Scaled phase, the measured traffic again (%d traces, %d spans): %s joined, three analysis collectors\n",
		s.Sent.Traces, s.Sent.Spans, h.Added)
	rep.printReplicas(w, s, r, false)
	differing := 0
	for _, d := range Compare(s.Gained[Gateway], s.Gained[Kafka]) {
		if d.Differing > 0 {
			fmt.Fprintf(w, "store figure %q: %d of %d rows differ from the gateway's\n", d.Figure, d.Differing, d.Keys)
			differing++
		}
	}
	if differing == 0 {
		fmt.Fprintf(w, "every store figure gained in the phase, merged over the three, equals the gateway's (%d figures)\n", len(Figs))
	}
	rep.printHints(w, s)
	fmt.Fprintf(w, "\nRun took %.1fs.\n", rep.Took.Seconds())
}

// printReplicas prints phase p's telemetry per analysis collector, their
// sum and, for comparison, the gateway's (and the load balancer's).
func (rep *Report) printReplicas(w io.Writer, p, prev *Phase, withLB bool) {
	analysers := rep.analysers(p)
	header := append([]string{""}, analysers...)
	header = append(header, "Kafka merged", "one gateway")
	if withLB {
		header = append(header, "load balancer")
	}
	tw := table(w, header...)
	sum := func(names []string) Telemetry {
		var t Telemetry
		for _, n := range names {
			t = t.Plus(p.TelemetrySince(n, prev))
		}
		return t
	}
	for _, f := range []struct {
		name string
		v    func(Telemetry) float64
	}{
		{"partitions consumed", func(t Telemetry) float64 { return t.Partitions }},
		{"spans seen", func(t Telemetry) float64 { return t.Spans }},
		{"traces analysed", func(t Telemetry) float64 { return t.Traces }},
		{"verdicts own", func(t Telemetry) float64 { return t.Own }},
		{"verdicts propagated", func(t Telemetry) float64 { return t.Propagated }},
		{"verdicts coincidental", func(t Telemetry) float64 { return t.Coincidental }},
		{"orphan spans", func(t Telemetry) float64 { return t.Orphans }},
		{"late, evicted, dropped", func(t Telemetry) float64 { return t.Late + t.Evicted + t.Dropped }},
	} {
		cells := []string{f.name}
		for _, a := range analysers {
			cells = append(cells, num(f.v(p.TelemetrySince(a, prev))))
		}
		cells = append(cells, num(f.v(sum(analysers))))
		gw, lb := num(f.v(p.TelemetrySince(Gateway, prev))), num(f.v(sum(rep.Collectors[LoadBalancer])))
		if f.name == "partitions consumed" {
			gw, lb = "", "" // they consume none
		}
		cells = append(cells, gw)
		if withLB {
			cells = append(cells, lb)
		}
		row(tw, cells...)
	}
	tw.Flush()
	fmt.Fprintln(w, "(the collectors' own telemetry for the phase: each replica's share, and their sum, of what one gateway sees)")
}

// printHints says whether the analysing collectors served the same hints.
func (rep *Report) printHints(w io.Writer, p *Phase) {
	names := slices.Sorted(maps.Keys(p.Hints))
	var kafka []string
	for _, n := range names {
		if strings.HasPrefix(n, analysisPrefix) {
			kafka = append(kafka, n)
		}
	}
	if len(kafka) == 0 {
		return
	}
	first := p.Hints[kafka[0]]
	edges := 0
	for _, doc := range first {
		edges += len(doc.Edges)
	}
	same := "identical"
	for _, n := range kafka[1:] {
		if !reflect.DeepEqual(p.Hints[n], first) {
			same = "NOT identical"
		}
	}
	fmt.Fprintf(w, "hints served by %s: %s (%d services, %d edges; generated_at aside)", strings.Join(kafka, ", "), same, len(first), edges)
	if gw, ok := p.Hints[Gateway]; ok {
		if reflect.DeepEqual(gw, first) {
			fmt.Fprint(w, ", and the gateway's")
		} else {
			fmt.Fprint(w, ", NOT the gateway's")
		}
	}
	for _, n := range names {
		if strings.HasPrefix(n, "lb-") && !reflect.DeepEqual(p.Hints[n], p.Hints[Gateway]) {
			fmt.Fprintf(w, "; %s's differ from the gateway's", n)
		}
	}
	fmt.Fprintln(w)
}

// TelemetrySince returns what a collector's telemetry counted in phase p,
// after phase prev (all of it if there is none, or it did not report
// then). Partitions are p's.
func (p *Phase) TelemetrySince(name string, prev *Phase) Telemetry {
	t := p.Telemetry[name]
	if prev == nil {
		return t
	}
	if before, ok := prev.Telemetry[name]; ok {
		t = t.Minus(before)
	}
	return t
}

// analysers returns the analysis collectors that reported in phase p.
func (rep *Report) analysers(p *Phase) []string {
	var out []string
	for _, name := range rep.Collectors[Kafka] {
		if _, ok := p.Telemetry[name]; ok && strings.HasPrefix(name, analysisPrefix) {
			out = append(out, name)
		}
	}
	return out
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func table(w io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row(tw, header...)
	return tw
}

func row(w io.Writer, cells ...string) { fmt.Fprintln(w, strings.Join(cells, "\t")+"\t") }

func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func pct(r float64) string {
	switch {
	case math.IsInf(r, 0):
		return "new"
	case r == 0:
		return "0"
	}
	return fmt.Sprintf("%+.1f%%", 100*r)
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-graphviz"
	"github.com/spf13/cobra"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	da "github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

type graphOptions struct {
	db       storeFlags
	win      windowFlags
	topology string
	service  string
	format   string
	output   string
}

func newGraphCommand() *cobra.Command {
	var o graphOptions
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "Draw the service graph with ownership: edges by mode, services by errors owned or passed on",
		Long: `graph draws the service graph the store measured over the window, for people who would
rather look than read: each edge is drawn by its mode, judged on the window's evidence
(docs/design.md §5) — fail_close solid red, fail_open dashed green, unknown dotted grey, and
purple where the operations between two services differ — and labelled with its calls and
how many failed; each service is filled by the errors it failed with — red when it mostly
owns them (own and coincidental verdicts), orange when it mostly passes its dependencies'
on (propagated), green without failures.

The formats are DOT (for Graphviz and the tools that read it), Mermaid (for Markdown that
renders it), and SVG or PNG, rendered in process (Graphviz compiled to WebAssembly: nothing
to install). --topology FILE draws a hand-written topology (the simulator's YAML) instead,
its edges by the modes it declares and its services by their fault rates.`,
		Example: `  # The last hour's graph as SVG, to open in a browser
  errorownership graph --format svg -o graph.svg

  # checkout with its callers and dependencies, as Mermaid for a wiki page
  errorownership graph --service checkout --format mermaid

  # A topology, as DOT for Graphviz
  errorownership graph --topology shop.yaml | dot -Tpng > shop.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	o.db.add(f)
	o.win.add(f, time.Hour)
	f.StringVar(&o.topology, "topology", "", "draw this topology (the simulator's YAML) instead of the store's graph")
	f.StringVar(&o.service, "service", "", "only this service, its callers and its dependencies")
	f.StringVar(&o.format, "format", "dot", "dot, mermaid, svg or png")
	f.StringVarP(&o.output, "output", "o", "-", "write to this file (-: standard output)")
	completeFixed(cmd, "format", "dot", "mermaid", "svg", "png")
	_ = cmd.MarkFlagFilename("topology", "yaml", "yml")
	completeNames(cmd, &o.db, &o.win, "service", func(n *store.Names) []string { return n.Services })
	return cmd
}

func (o *graphOptions) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if !slices.Contains([]string{"dot", "mermaid", "svg", "png"}, o.format) {
		return fmt.Errorf("--format %q: use dot, mermaid, svg or png", o.format)
	}
	var g *serviceGraph
	if o.topology != "" {
		b, err := os.ReadFile(o.topology)
		if err != nil {
			return fmt.Errorf("--topology: %w", err)
		}
		top, err := simulation.ParseTopology(b)
		if err != nil {
			return fmt.Errorf("--topology %s: %w", o.topology, err)
		}
		g = topologyGraph(top, "topology "+o.topology)
	} else {
		from, to, err := o.win.window(cmd.Flags(), time.Now())
		if err != nil {
			return err
		}
		st, err := o.db.open(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if _, err := windowNames(ctx, st, from, to); err != nil {
			return err
		}
		traffic, err := st.Traffic(ctx, from, to, da.DefaultConfig().EdgeModel)
		if err != nil {
			return err
		}
		g = trafficGraph(traffic, fmt.Sprintf("%s to %s", stamp(from), stamp(to)))
	}
	if o.service != "" {
		var err error
		if g, err = g.around(o.service); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	if err := g.write(ctx, &buf, o.format); err != nil {
		return err
	}
	if o.output == "-" {
		_, err := cmd.OutOrStdout().Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(o.output, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}

// serviceGraph is the service graph with ownership, ready to draw.
type serviceGraph struct {
	Title string
	Nodes []graphNode // sorted by service
	Edges []graphEdge // sorted by caller, then callee
}

type graphNode struct {
	Service string
	// Measured: requests served and failed, the failed ones by whether the
	// service owned them (own, coincidental) or passed them on; estimates
	// of all traffic (store.OperationTraffic).
	Served, Failed, Owned, Propagated float64
	// Declared (a topology): the fault rate.
	FaultRate float64
	Declared  bool
}

type graphEdge struct {
	From, To string
	// Mode is the edge's mode, or "mixed" when the operations between the
	// two services have different ones.
	Mode string
	// Calls and FailedCalls are estimates of all traffic.
	Calls, FailedCalls float64
	Declared           bool
}

// modeMixed marks an edge whose operations have different modes.
const modeMixed = "mixed"

// trafficGraph aggregates the store's operations and edges per service.
func trafficGraph(t *store.Traffic, title string) *serviceGraph {
	nodes := map[string]*graphNode{}
	node := func(s string) *graphNode {
		if nodes[s] == nil {
			nodes[s] = &graphNode{Service: s}
		}
		return nodes[s]
	}
	for _, op := range t.Operations {
		n := node(op.Service)
		n.Served += op.Served
		n.Failed += op.Failed
		n.Owned += op.Own + op.Coincidental
		n.Propagated += op.Propagated
	}
	type pair struct{ from, to string }
	edges := map[pair]*graphEdge{}
	for _, e := range t.Edges {
		node(e.Service)
		node(e.PeerService)
		k := pair{e.Service, e.PeerService}
		ge := edges[k]
		if ge == nil {
			ge = &graphEdge{From: e.Service, To: e.PeerService, Mode: e.Mode.String()}
			edges[k] = ge
		} else if ge.Mode != e.Mode.String() {
			ge.Mode = modeMixed
		}
		ge.Calls += e.Calls
		ge.FailedCalls += e.FailedCalls
	}
	g := &serviceGraph{Title: title}
	for _, s := range sortedKeys(nodes) {
		g.Nodes = append(g.Nodes, *nodes[s])
	}
	for _, e := range edges {
		g.Edges = append(g.Edges, *e)
	}
	g.sortEdges()
	return g
}

// topologyGraph draws a topology as declared.
func topologyGraph(top *simulation.Topology, title string) *serviceGraph {
	g := &serviceGraph{Title: title}
	seen := map[[2]string]bool{}
	for _, s := range top.Services {
		g.Nodes = append(g.Nodes, graphNode{Service: s.Name, FaultRate: s.Fault.Rate, Declared: true})
		for _, e := range s.Edges {
			mode := ownership.ModeFailClose.String()
			if e.FailOpen {
				mode = ownership.ModeFailOpen.String()
			}
			k := [2]string{s.Name, e.Callee}
			if seen[k] {
				continue // a second call to one callee: one edge
			}
			seen[k] = true
			g.Edges = append(g.Edges, graphEdge{From: s.Name, To: e.Callee, Mode: mode, Declared: true})
		}
	}
	slices.SortFunc(g.Nodes, func(a, b graphNode) int { return cmp.Compare(a.Service, b.Service) })
	g.sortEdges()
	return g
}

func (g *serviceGraph) sortEdges() {
	slices.SortFunc(g.Edges, func(a, b graphEdge) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
}

// around returns the part of the graph that touches service.
func (g *serviceGraph) around(service string) (*serviceGraph, error) {
	var names []string
	for _, n := range g.Nodes {
		names = append(names, n.Service)
	}
	if !slices.Contains(names, service) {
		return nil, unknownName("service", "--service", service, names, "in the graph ("+g.Title+")")
	}
	keep := map[string]bool{service: true}
	out := &serviceGraph{Title: g.Title + ", around " + service}
	for _, e := range g.Edges {
		if e.From == service || e.To == service {
			out.Edges = append(out.Edges, e)
			keep[e.From], keep[e.To] = true, true
		}
	}
	for _, n := range g.Nodes {
		if keep[n.Service] {
			out.Nodes = append(out.Nodes, n)
		}
	}
	return out, nil
}

// The look of the graph: one place, so that DOT and Mermaid agree.
type look struct{ color, fill, dotStyle string }

var edgeLooks = map[string]look{
	ownership.ModeFailClose.String(): {color: "#c0392b", dotStyle: "solid"},
	ownership.ModeFailOpen.String():  {color: "#27ae60", dotStyle: "dashed"},
	ownership.ModeUnknown.String():   {color: "#7f8c8d", dotStyle: "dotted"},
	modeMixed:                        {color: "#8e44ad", dotStyle: "solid"},
}

// Node classes: by the errors a service failed with.
const (
	classOwns       = "owns"
	classPropagates = "propagates"
	classHealthy    = "healthy"
)

var nodeLooks = map[string]look{
	classOwns:       {color: "#c0392b", fill: "#f9d6d2"},
	classPropagates: {color: "#d68910", fill: "#fdebd0"},
	classHealthy:    {color: "#1e8449", fill: "#d5f5e3"},
}

func (n *graphNode) class() string {
	switch {
	case n.Declared && n.FaultRate > 0, !n.Declared && n.Owned > 0 && n.Owned >= n.Propagated:
		return classOwns
	case !n.Declared && n.Propagated > 0:
		return classPropagates
	}
	return classHealthy
}

func (n *graphNode) lines() []string {
	if n.Declared {
		if n.FaultRate > 0 {
			return []string{n.Service, fmt.Sprintf("fails %g%% on its own", 100*n.FaultRate)}
		}
		return []string{n.Service}
	}
	if n.Served == 0 {
		return []string{n.Service, "no statistics of its own"}
	}
	return []string{n.Service, fmt.Sprintf("served %s, failed %s", figure(n.Served), figure(n.Failed)),
		fmt.Sprintf("owned %s, propagated %s", figure(n.Owned), figure(n.Propagated))}
}

func (e *graphEdge) label() string {
	if e.Declared {
		return e.Mode
	}
	failed := 0.0
	if e.Calls > 0 {
		failed = 100 * e.FailedCalls / e.Calls
	}
	return fmt.Sprintf("%s\n%s calls, %.1f%% failed", e.Mode, figure(e.Calls), failed)
}

// legend says what the colours mean, under the drawing.
const legend = "edges: red solid fail_close, green dashed fail_open, grey dotted unknown, purple mixed. " +
	"services: red owns its errors, orange passes its dependencies' on, green no failures"

func (g *serviceGraph) write(ctx context.Context, w io.Writer, format string) error {
	switch format {
	case "mermaid":
		return g.writeMermaid(w)
	case "dot":
		return g.writeDOT(w)
	}
	var dot bytes.Buffer
	if err := g.writeDOT(&dot); err != nil {
		return err
	}
	return render(ctx, dot.Bytes(), graphviz.Format(format), w)
}

// dotQuote quotes s as a DOT string; lines break at \n.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}

func (g *serviceGraph) writeDOT(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "// The service graph with ownership, by errorownership graph: %s.\n", g.Title)
	b.WriteString("digraph errorownership {\n")
	fmt.Fprintf(&b, "  graph [rankdir=LR, fontname=\"Helvetica\", fontsize=10, labelloc=b, label=%s];\n", dotQuote(g.Title+"\n"+legend))
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11, penwidth=1.2];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=9, penwidth=1.2];\n")
	for i := range g.Nodes {
		n := &g.Nodes[i]
		l := nodeLooks[n.class()]
		fmt.Fprintf(&b, "  %s [label=%s, color=%s, fillcolor=%s, class=%s];\n", dotQuote(n.Service),
			dotQuote(strings.Join(n.lines(), "\n")), dotQuote(l.color), dotQuote(l.fill), dotQuote(n.class()))
	}
	for i := range g.Edges {
		e := &g.Edges[i]
		l := edgeLooks[e.Mode]
		fmt.Fprintf(&b, "  %s -> %s [label=%s, color=%s, fontcolor=%s, style=%s, class=%s];\n", dotQuote(e.From), dotQuote(e.To),
			dotQuote(e.label()), dotQuote(l.color), dotQuote(l.color), l.dotStyle, dotQuote(e.Mode))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// mermaidText escapes s for a quoted Mermaid label; lines break at <br/>.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "\n", "<br/>")
	return r.Replace(s)
}

func (g *serviceGraph) writeMermaid(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%%%% The service graph with ownership, by errorownership graph: %s.\n", mermaidText(g.Title))
	fmt.Fprintf(&b, "%%%% %s\n", legend)
	b.WriteString("flowchart LR\n")
	id := map[string]string{}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		id[n.Service] = fmt.Sprintf("s%d", i)
		fmt.Fprintf(&b, "  %s[\"%s\"]:::%s\n", id[n.Service], mermaidText(strings.Join(n.lines(), "\n")), n.class())
	}
	arrows := map[string]string{"fail_close": "==>", "fail_open": "-.->", "unknown": "-.->", modeMixed: "-->"}
	for i := range g.Edges {
		e := &g.Edges[i]
		fmt.Fprintf(&b, "  %s %s|\"%s\"| %s\n", id[e.From], arrows[e.Mode], mermaidText(e.label()), id[e.To])
	}
	for _, c := range []string{classOwns, classPropagates, classHealthy} {
		l := nodeLooks[c]
		fmt.Fprintf(&b, "  classDef %s fill:%s,stroke:%s\n", c, l.fill, l.color)
	}
	for i := range g.Edges {
		fmt.Fprintf(&b, "  linkStyle %d stroke:%s\n", i, edgeLooks[g.Edges[i].Mode].color)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// render lays DOT out and draws it as SVG or PNG with Graphviz compiled to
// WebAssembly, in process.
func render(ctx context.Context, dot []byte, format graphviz.Format, w io.Writer) (err error) {
	gv, err := newGraphviz(ctx)
	if err != nil {
		return err
	}
	defer func() { err = joinClose(err, gv.Close()) }()
	graph, err := graphviz.ParseBytes(dot)
	if err != nil {
		return fmt.Errorf("graphviz: the DOT does not parse: %w", err)
	}
	defer func() { err = joinClose(err, graph.Close()) }()
	if err := gv.Render(ctx, graph, format, w); err != nil {
		return fmt.Errorf("graphviz: rendering %s: %w", format, err)
	}
	return nil
}

func joinClose(err, cerr error) error {
	if err != nil {
		return err
	}
	return cerr
}

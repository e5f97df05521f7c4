// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
)

// The demo's report: its figures as SVG charts and the graph, on a page a
// browser opens from the directory.

// Report files, in the order the page shows them.
const (
	reportAmplification = "amplification.svg"
	reportAvailability  = "availability.svg"
	reportGraph         = "graph.svg"
	reportPage          = "index.html"
)

// policyColors tell the policies apart in every chart.
var policyColors = map[simulation.Policy]color.RGBA{
	simulation.RetryEveryHop: {0xc0, 0x39, 0x2b, 0xff},
	simulation.BudgetPolicy:  {0xd6, 0x89, 0x10, 0xff},
	simulation.Ownership:     {0x27, 0xae, 0x60, 0xff},
}

// writeReport writes the charts, the graph and the page into dir, and the
// demo's printed report (text) onto the page.
func writeReport(ctx context.Context, dir string, rep *simulation.DemoReport, text string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	charts := []struct {
		name string
		plot func(*simulation.DemoReport) (*plot.Plot, error)
	}{{reportAmplification, amplificationChart}, {reportAvailability, availabilityChart}}
	for _, c := range charts {
		p, err := c.plot(rep)
		if err != nil {
			return fmt.Errorf("--report: %s: %w", c.name, err)
		}
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, c.name)); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	var svg bytes.Buffer
	if err := trafficGraph(rep.Traffic, "the demo's services, as the store saw them").write(ctx, &svg, "svg"); err != nil {
		return fmt.Errorf("--report: %s: %w", reportGraph, err)
	}
	if err := os.WriteFile(filepath.Join(dir, reportGraph), svg.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	var page bytes.Buffer
	if err := reportTemplate.Execute(&page, map[string]any{
		"Amplification": reportAmplification, "Availability": reportAvailability, "Graph": reportGraph,
		"Budget": 100 * simulation.BudgetRatio, "Text": text,
	}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, reportPage), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}

// amplificationChart plots requests served per root request by depth, per
// policy: the store's measurement as points on a line, the prediction
// dashed (docs/design.md §1, §11).
func amplificationChart(rep *simulation.DemoReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Requests served per root request, by depth below the root"
	p.X.Label.Text = "depth (hops below the root)"
	p.Y.Label.Text = "requests served per root request (Ƞ)"
	p.Legend.Top, p.Legend.Left = true, true
	top := 0.0
	for _, pol := range simulation.ChainPolicies {
		c := policyColors[pol]
		measured, err := plotter.NewLine(depthPoints(rep.DepthStore[pol]))
		if err != nil {
			return nil, err
		}
		measured.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.5)}
		points, err := plotter.NewScatter(depthPoints(rep.DepthStore[pol]))
		if err != nil {
			return nil, err
		}
		points.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
		theory, err := plotter.NewLine(depthPoints(rep.DepthTheory[pol]))
		if err != nil {
			return nil, err
		}
		theory.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
		p.Add(theory, measured, points)
		p.Legend.Add(string(pol)+" (measured)", measured, points)
		p.Legend.Add(string(pol)+" (predicted)", theory)
		for _, v := range append(rep.DepthStore[pol], rep.DepthTheory[pol]...) {
			top = max(top, v)
		}
	}
	p.Add(plotter.NewGrid())
	// Room above the lines for the legend.
	p.Y.Min, p.Y.Max = 0, 1.6*top
	return p, nil
}

func depthPoints(v []float64) plotter.XYs {
	xy := make(plotter.XYs, len(v))
	for d, y := range v {
		xy[d] = plotter.XY{X: float64(d), Y: y}
	}
	return xy
}

// availabilityChart plots availability after one retry within the budget
// against the callee's error rate: the measurement as points, §1's
// e_after as a line, and no retries for comparison.
func availabilityChart(rep *simulation.DemoReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Availability after one retry within a %g%% budget", 100*simulation.BudgetRatio)
	p.X.Label.Text = "callee's error rate e (%)"
	p.Y.Label.Text = "calls that succeed (%)"
	p.Legend.Top, p.Legend.Left = false, true
	maxRate, lowest := 0.0, 100.0
	var measured plotter.XYs
	for _, a := range rep.Availability {
		measured = append(measured, plotter.XY{X: 100 * a.Rate, Y: 100 * (1 - a.Measured)})
		maxRate = max(maxRate, a.Rate)
		lowest = min(lowest, 100*(1-a.Measured), 100*(1-a.Rate))
	}
	theory := plotter.NewFunction(func(x float64) float64 {
		return 100 * (1 - simulation.TheoryAfter(x/100, simulation.BudgetRatio))
	})
	theory.XMin, theory.XMax, theory.Samples = 0, 100*maxRate, 200
	theory.LineStyle = draw.LineStyle{Color: policyColors[simulation.Ownership], Width: vg.Points(1.5)}
	none := plotter.NewFunction(func(x float64) float64 { return 100 - x })
	none.XMin, none.XMax = 0, 100*maxRate
	none.LineStyle = draw.LineStyle{Color: color.Gray{0x80}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	points, err := plotter.NewScatter(measured)
	if err != nil {
		return nil, err
	}
	points.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
	p.Add(plotter.NewGrid(), none, theory, points)
	p.Legend.Add("e_after = (e − min(e,B)) + min(e,B)·e", theory)
	p.Legend.Add("measured (hooks.Budget, in process)", points)
	p.Legend.Add("no retries: 1 − e", none)
	// Room below the lines for the legend.
	p.X.Min, p.X.Max = 0, 100*maxRate
	p.Y.Min, p.Y.Max = max(0, lowest-0.6*(100-lowest)), 100
	return p, nil
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>errorownership demo</title>
<style>
body { font-family: Helvetica, Arial, sans-serif; max-width: 72em; margin: 2em auto; color: #222; }
figure { margin: 2em 0; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { font-size: 0.8em; overflow-x: auto; background: #f7f7f7; padding: 1em; }
</style>
</head>
<body>
<h1>errorownership demo</h1>
<figure id="amplification">
<img src="{{.Amplification}}" alt="Requests served per root request by depth, per retry policy">
<figcaption>Retry storm: requests each depth serves per root request under one retry at every hop, a {{.Budget}}% retry budget, and error ownership. Solid: measured by the store; dashed: predicted (docs/design.md §1, §11).</figcaption>
</figure>
<figure id="availability">
<img src="{{.Availability}}" alt="Availability after one budgeted retry against the error rate">
<figcaption>A budget recovers errors up to its ratio and lets the rest through rather than multiply load.</figcaption>
</figure>
<figure id="graph">
<img src="{{.Graph}}" alt="The service graph with ownership">
<figcaption>The services the demo ran, as the store saw them: edges by mode, services by the errors they owned or passed on.</figcaption>
</figure>
<h2>The figures</h2>
<pre>{{.Text}}</pre>
</body>
</html>
`))

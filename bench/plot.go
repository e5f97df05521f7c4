// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotCurve draws a growth curve's medians, with their range as error
// bars, to an SVG file in dir.
func plotCurve(dir string, c curve, reps [][]float64) error {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = c.xLabel
	p.Y.Label.Text = "ns of CPU per span"
	if c.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	pts := errPoints{XYs: make(plotter.XYs, 0, len(c.points))}
	for i, x := range c.points {
		if i >= len(reps) {
			break
		}
		s := summarize(reps[i])
		if s.N == 0 {
			continue
		}
		pts.XYs = append(pts.XYs, plotter.XY{X: x, Y: s.Median})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{s.Median - s.Min, s.Max - s.Median})
	}
	if len(pts.XYs) == 0 {
		return fmt.Errorf("curve %s: no points", c.key)
	}
	line, points, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return err
	}
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return err
	}
	p.Add(plotter.NewGrid(), line, points, bars)
	// Start the axis at zero, so that a flat curve looks flat.
	p.Y.Min = 0
	return p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, svgName(c.key)))
}

// errPoints are points with their errors, as YErrorBars reads them.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

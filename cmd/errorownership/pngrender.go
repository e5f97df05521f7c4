// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"github.com/goccy/go-graphviz"
	"github.com/goccy/go-graphviz/gvc"
)

// go-graphviz v0.2.10 draws PNG with a renderer of its own (Graphviz
// compiled to WebAssembly has no Cairo), which is handed every shape as
// filled and then only fills it: outlines and edges are never stroked. The
// renderer below wraps it and decides from the shape's own state what to
// fill and what to stroke, as Graphviz's Cairo renderer does: fill what is
// filled, with its fill colour, then stroke its outline with its pen.

// strokingRenderer fixes go-graphviz's PNG renderer; see above.
type strokingRenderer struct{ *gvc.ImageRenderer }

// paint draws a shape: filled, then outlined, as its state says.
func paint(job *gvc.Job, draw func(filled bool) error, closed bool) error {
	o := job.Object()
	pen, fill := o.PenColor().RGBAUint(), o.FillColor().RGBAUint()
	penVisible := o.Pen() != gvc.PenNone && pen[3] > 0
	filled := o.Fill() != gvc.FillNone ||
		// A closed shape drawn in one colour (an arrowhead) or without
		// an outline (the page) is a filled one.
		(closed && fill[3] > 0 && (fill == pen || !penVisible))
	if filled {
		if err := draw(true); err != nil {
			return err
		}
	}
	if penVisible {
		return draw(false)
	}
	return nil
}

func (r strokingRenderer) Polygon(ctx context.Context, job *gvc.Job, a []*gvc.PointFloat, _ bool) error {
	return paint(job, func(filled bool) error { return r.ImageRenderer.Polygon(ctx, job, a, filled) }, true)
}

func (r strokingRenderer) Ellipse(ctx context.Context, job *gvc.Job, a []*gvc.PointFloat, _ bool) error {
	return paint(job, func(filled bool) error { return r.ImageRenderer.Ellipse(ctx, job, a, filled) }, true)
}

// BezierCurve: an edge's curve is open, never filled; a rounded box's is
// filled when its style says so.
func (r strokingRenderer) BezierCurve(ctx context.Context, job *gvc.Job, a []*gvc.PointFloat, _ bool) error {
	return paint(job, func(filled bool) error { return r.ImageRenderer.BezierCurve(ctx, job, a, filled) }, false)
}

// newGraphviz returns Graphviz with strokingRenderer drawing PNG.
func newGraphviz(ctx context.Context) (*graphviz.Graphviz, error) {
	plugins, err := gvc.DefaultPlugins(ctx)
	if err != nil {
		return nil, fmt.Errorf("graphviz: %w", err)
	}
	png, err := gvc.NewRenderPlugin(ctx, "png", strokingRenderer{&gvc.ImageRenderer{DefaultRenderEngine: new(gvc.DefaultRenderEngine)}})
	if err != nil {
		return nil, fmt.Errorf("graphviz: %w", err)
	}
	// Later plugins of one type take precedence.
	return graphviz.NewWithPlugins(ctx, append(plugins, png)...)
}

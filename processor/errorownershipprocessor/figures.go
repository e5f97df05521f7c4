// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/figures"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/sink"
)

// The processor hands its figures to the errorownership connectors that
// name it (internal/figures): every verdict as it is counted, for their
// exemplars, and every bucket it flushes. Nobody listens most of the time,
// and then each costs an atomic load.

// listen makes the processor hand its figures to the listener the connector
// that created it put in ctx, or else publishes it under its ID for
// connectors that name it in `processor:`.
func (p *ownershipProcessor) listen(ctx context.Context) {
	if l := figures.ListenerFrom(ctx); l != nil {
		p.hub.Subscribe(l)
		return
	}
	p.withdraw = figures.Publish(p.id, &p.hub)
}

// countedRequest hands on a verdict of a request of tr counted now.
func (p *ownershipProcessor) countedRequest(tr *dependencyanalysis.Trace, v *dependencyanalysis.Verdict) {
	if !p.hub.Active() {
		return
	}
	req := tr.RequestSpan(&tr.Requests[v.Request])
	p.counted(&figures.Verdict{Symbols: p.symbols, Service: req.Service, Operation: req.Operation, Kind: v.Kind, Sent: v.Sent,
		TraceID: tr.ID, SpanID: req.SpanID, Time: req.End(), Weight: tr.Weight, Method: tr.Sampling.Method()})
}

// countedHeld hands on the final verdict of a held request.
func (p *ownershipProcessor) countedHeld(h *dependencyanalysis.Held, v *dependencyanalysis.Verdict) {
	if !p.hub.Active() {
		return
	}
	p.counted(&figures.Verdict{Symbols: p.symbols, Service: h.Service, Operation: h.Operation, Kind: v.Kind, Sent: h.Sent,
		TraceID: h.TraceID, SpanID: h.SpanID, Time: h.Time, Weight: h.Weight, Method: h.Method})
}

func (p *ownershipProcessor) counted(v *figures.Verdict) {
	defer p.recoverListener("handing a verdict to a connector")
	p.hub.Counted(v)
}

// flushed hands on a bucket the processor flushes.
func (p *ownershipProcessor) flushed(snap *sink.Snapshot) {
	if !p.hub.Active() || snap.Stats.Empty() {
		return
	}
	defer p.recoverListener("handing a bucket to a connector")
	p.hub.Flushed(&figures.Bucket{Stats: snap.Stats, Symbols: snap.Symbols, Start: snap.Start, End: snap.End})
}

// recoverListener counts and logs a listener's panic: a connector's bug
// must not stop the analysis, nor the spans.
func (p *ownershipProcessor) recoverListener(doing string) {
	if r := recover(); r != nil {
		p.telemetry.ProcessorErrorownershipPanicsRecovered.Add(context.Background(), 1)
		p.logger.Error("Recovered from a panic in an errorownership connector; the processor went on",
			zap.String("while", doing), zap.String("panic", fmt.Sprint(r)), zap.Stack("stack"))
	}
}

// SPDX-License-Identifier: Apache-2.0

package chaintest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Tracing is a test's tracer provider: the SDK's, sampling every span into
// Spans, behind spans that count how many times each of the hooks'
// attributes is set on them. The vectors require each to be set once; the
// Go SDK keeps the last of two sets and reports nothing dropped, so only
// counting the calls shows a second one.
type Tracing struct {
	embedded.TracerProvider
	// Spans records the ended spans.
	Spans *tracetest.SpanRecorder
	sdk   *sdktrace.TracerProvider

	mu   sync.Mutex
	sets map[trace.SpanID]map[attribute.Key]int
}

// NewTracing returns a Tracing that shuts down with the test.
func NewTracing(t testing.TB) *Tracing {
	tr := &Tracing{Spans: tracetest.NewSpanRecorder(), sets: map[trace.SpanID]map[attribute.Key]int{}}
	tr.sdk = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(tr.Spans))
	t.Cleanup(func() { _ = tr.sdk.Shutdown(context.Background()) })
	return tr
}

// Tracer returns the SDK's tracer, whose spans count their sets.
func (tr *Tracing) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &countingTracer{Tracer: tr.sdk.Tracer(name, opts...), tr: tr}
}

func (tr *Tracing) count(id trace.SpanID, kvs []attribute.KeyValue) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, kv := range kvs {
		if !slices.Contains(hookAttrs, kv.Key) {
			continue
		}
		if tr.sets[id] == nil {
			tr.sets[id] = map[attribute.Key]int{}
		}
		tr.sets[id][kv.Key]++
	}
}

// HookAttributes returns the attributes the hooks set on each of the ended
// spans of kind, as HookAttributes does, and fails the test for any of
// them set more than once on one of those spans or for a span that
// dropped attributes.
func (tr *Tracing) HookAttributes(t testing.TB, kind trace.SpanKind, n int) []map[string]any {
	t.Helper()
	spans := endedSpans(tr.Spans, kind, n)
	tr.mu.Lock()
	for _, sp := range spans {
		for k, c := range tr.sets[sp.SpanContext().SpanID()] {
			if c > 1 {
				t.Errorf("span %q: %s set %d times, want once", sp.Name(), k, c)
			}
		}
		if d := sp.DroppedAttributes(); d > 0 {
			t.Errorf("span %q dropped %d attributes", sp.Name(), d)
		}
	}
	tr.mu.Unlock()
	return hookAttributes(spans)
}

type countingTracer struct {
	trace.Tracer
	tr *Tracing
}

func (c *countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, sp := c.Tracer.Start(ctx, name, opts...)
	if !sp.IsRecording() {
		return ctx, sp
	}
	cs := &countingSpan{Span: sp, tr: c.tr}
	cfg := trace.NewSpanStartConfig(opts...)
	c.tr.count(sp.SpanContext().SpanID(), cfg.Attributes())
	return trace.ContextWithSpan(ctx, cs), cs
}

// countingSpan is the SDK's span, counting the attributes set on it.
type countingSpan struct {
	trace.Span
	tr *Tracing
}

func (s *countingSpan) SetAttributes(kvs ...attribute.KeyValue) {
	s.tr.count(s.SpanContext().SpanID(), kvs)
	s.Span.SetAttributes(kvs...)
}

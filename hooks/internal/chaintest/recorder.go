// SPDX-License-Identifier: Apache-2.0

package chaintest

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Recorder is what a test service records of what it did: the requests it
// served and the attempt number each carried, the claim on each answer
// from its callee, and its spans. The HTTP and gRPC tests' services embed
// it.
type Recorder struct {
	Name string
	// Requests counts the requests the service served.
	Requests atomic.Int32
	// Spans records the spans of TP, the service's tracer provider.
	Spans *tracetest.SpanRecorder
	TP    *Tracing

	mu       sync.Mutex
	attempts []string // the attempt number on each request it served
	observed []string // the claim on each answer from its callee
}

// NewRecorder returns a Recorder for service name, whose tracer provider
// samples every span and shuts down with the test.
func NewRecorder(t testing.TB, name string) *Recorder {
	r := &Recorder{Name: name, TP: NewTracing(t)}
	r.Spans = r.TP.Spans
	return r
}

// Served counts a request the service served, with the attempt number it
// carried ("" when absent: the first attempt).
func (r *Recorder) Served(attempt string) {
	r.Requests.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, attempt)
}

// Observed notes the claim on an answer from the callee ("" for none).
func (r *Recorder) Observed(claim string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observed = append(r.observed, claim)
}

// Seen returns copies of the attempt numbers served and the claims
// observed.
func (r *Recorder) Seen() (attempts, observed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts), slices.Clone(r.observed)
}

// SpanAttrs returns attribute key of the service's ended spans of kind, in
// the order they started, waiting briefly for n of them.
func (r *Recorder) SpanAttrs(t *testing.T, kind trace.SpanKind, key string, n int) []string {
	t.Helper()
	return SpanAttrs(r.Spans, kind, key, n)
}

// Observation is what the service recorded, for Check.
func (r *Recorder) Observation() Observed {
	attempts, claims := r.Seen()
	return Observed{Name: r.Name, Served: int(r.Requests.Load()), Attempts: attempts, Claims: claims, Spans: r.Spans}
}

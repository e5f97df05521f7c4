// SPDX-License-Identifier: Apache-2.0

// Package figures hands an errorownership analysis's results to whoever
// renders them besides the store: the errorownership connector, which turns
// them into metrics. The processor publishes its analysis here under its
// component ID; a connector configured with `processor:` subscribes to it,
// so that a collector running both analyses its spans once. A connector
// without `processor:` runs an analysis of its own and listens to it
// directly (WithListener).
package figures

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
)

// Bucket is one flush of an analysis: what it analysed between Start and
// End, merged. A bucket of held requests judged after their own bucket was
// flushed carries that earlier bucket's Start and End.
type Bucket struct {
	// Stats are the figures; their names are symbols of Symbols. They are
	// reused once Flushed returns: a listener copies what it keeps.
	Stats *dependencyanalysis.Stats
	// Symbols resolves the names of Stats and of the Verdicts counted
	// since the previous bucket; safe for concurrent use.
	Symbols *dependencyanalysis.Symbols
	// Start and End bound the bucket.
	Start, End time.Time
}

// Verdict is one failed request as its verdict is counted.
type Verdict struct {
	// Symbols resolves Service and Operation.
	Symbols            *dependencyanalysis.Symbols
	Service, Operation dependencyanalysis.Symbol
	Kind               dependencyanalysis.VerdictKind
	// Sent is the claim the service sent (error_ownership.claim.sent).
	Sent    ownership.Claim
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
	// Time is when the request ended.
	Time pcommon.Timestamp
	// Weight is the adjusted count of the request's trace, and Method
	// whether it is counted or extrapolated: the series of that
	// sampling.method takes the exemplar (docs/design.md §8.1).
	Weight float64
	Method dependencyanalysis.SamplingMethod
}

// Listener receives an analysis's figures.
type Listener interface {
	// Counted is called for every failed request as its verdict is
	// counted, from the analysis's workers, concurrently. The symbols stay
	// valid until the next Flushed returns: names are swept only after the
	// buckets of a flush are handed on.
	Counted(v *Verdict)
	// Flushed is called with every non-empty bucket, from one goroutine at
	// a time.
	Flushed(b *Bucket)
}

// Hub is what an analysis hands its figures to: the listeners subscribed
// to it, none most of the time. It is safe for concurrent use; handing on
// costs an atomic load when nobody listens.
type Hub struct {
	mu        sync.Mutex // serialises Subscribe and unsubscribing
	listeners atomic.Pointer[[]Listener]
	started   atomic.Bool
}

// MarkStarted records that the analysis has started. The collector starts
// the components downstream of a processor before it, so a connector that
// finds its processor started is not downstream of it, and nothing keeps
// the collector from shutting it down first.
func (h *Hub) MarkStarted() { h.started.Store(true) }

// Started reports whether MarkStarted was called.
func (h *Hub) Started() bool { return h.started.Load() }

func (h *Hub) load() []Listener {
	if l := h.listeners.Load(); l != nil {
		return *l
	}
	return nil
}

// Active reports whether anyone listens, so that an analysis can skip
// building what nobody reads.
func (h *Hub) Active() bool { return len(h.load()) > 0 }

// Counted hands v to every listener.
func (h *Hub) Counted(v *Verdict) {
	for _, l := range h.load() {
		l.Counted(v)
	}
}

// Flushed hands b to every listener.
func (h *Hub) Flushed(b *Bucket) {
	for _, l := range h.load() {
		l.Flushed(b)
	}
}

// Subscribe adds l until the returned function is called.
func (h *Hub) Subscribe(l Listener) (unsubscribe func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := append(append([]Listener(nil), h.load()...), l)
	h.listeners.Store(&next)
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			var kept []Listener
			for _, x := range h.load() {
				if x != l {
					kept = append(kept, x)
				}
			}
			h.listeners.Store(&kept)
		})
	}
}

// The analyses published in this process, by component ID. A processor ID
// used in several pipelines has an instance in each; a subscriber gets the
// figures of all of them, as the processor's own telemetry sums them.
var (
	registryMu sync.Mutex
	registry   = map[component.ID][]*Hub{}
)

// Publish makes an analysis's hub findable under id from when the
// collector creates the component until withdraw is called at its
// shutdown. The collector creates every component before it starts any, so
// a subscriber finds it at its own start whatever the order of starting.
func Publish(id component.ID, h *Hub) (withdraw func()) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[id] = append(registry[id], h)
	var once sync.Once
	return func() {
		once.Do(func() {
			registryMu.Lock()
			defer registryMu.Unlock()
			hubs := registry[id]
			for i, x := range hubs {
				if x == h {
					hubs = append(hubs[:i], hubs[i+1:]...)
					break
				}
			}
			if len(hubs) == 0 {
				delete(registry, id)
			} else {
				registry[id] = hubs
			}
		})
	}
}

// Published returns the hubs published under id, none when no such
// analysis was created in this process.
func Published(id component.ID) []*Hub {
	registryMu.Lock()
	defer registryMu.Unlock()
	return append([]*Hub(nil), registry[id]...)
}

type listenerKey struct{}

// WithListener returns a context that makes the analysis created with it
// hand its figures to l, and not publish itself: a connector's own
// analysis is nobody else's to subscribe to.
func WithListener(ctx context.Context, l Listener) context.Context {
	return context.WithValue(ctx, listenerKey{}, l)
}

// ListenerFrom returns the listener WithListener put in ctx, or nil.
func ListenerFrom(ctx context.Context) Listener {
	l, _ := ctx.Value(listenerKey{}).(Listener)
	return l
}

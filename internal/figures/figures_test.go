// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/component"
)

type countingListener struct{ counted, flushed atomic.Int64 }

func (l *countingListener) Counted(*Verdict) { l.counted.Add(1) }
func (l *countingListener) Flushed(*Bucket)  { l.flushed.Add(1) }

// TestPublishAndSubscribe: a hub is found under its ID from Publish until
// withdrawn, every instance of an ID is found, and a listener hears a hub
// from Subscribe until it unsubscribes.
func TestPublishAndSubscribe(t *testing.T) {
	id := component.MustNewIDWithName("errorownership", t.Name())
	if got := Published(id); len(got) != 0 {
		t.Fatalf("before Publish: %d hubs", len(got))
	}
	var a, b Hub
	withdrawA := Publish(id, &a)
	withdrawB := Publish(id, &b)
	if got := Published(id); len(got) != 2 || got[0] != &a || got[1] != &b {
		t.Fatalf("two instances published, found %v", got)
	}
	l := &countingListener{}
	if a.Active() {
		t.Fatal("a hub nobody subscribed to is active")
	}
	unsubscribe := a.Subscribe(l)
	a.Counted(&Verdict{})
	a.Flushed(&Bucket{})
	b.Counted(&Verdict{})
	if !a.Active() || l.counted.Load() != 1 || l.flushed.Load() != 1 {
		t.Fatalf("active %v, counted %d, flushed %d; want the one hub's one of each", a.Active(), l.counted.Load(), l.flushed.Load())
	}
	unsubscribe()
	unsubscribe() // a second call changes nothing
	a.Counted(&Verdict{})
	if a.Active() || l.counted.Load() != 1 {
		t.Fatalf("after unsubscribing: active %v, counted %d", a.Active(), l.counted.Load())
	}
	withdrawA()
	withdrawA()
	if got := Published(id); len(got) != 1 || got[0] != &b {
		t.Fatalf("a withdrawn, found %v", got)
	}
	withdrawB()
	if got := Published(id); len(got) != 0 {
		t.Fatalf("both withdrawn, found %v", got)
	}
}

// TestListenerThroughTheContext: the listener WithListener puts in a
// context is what ListenerFrom finds, and nothing in a plain one.
func TestListenerThroughTheContext(t *testing.T) {
	l := &countingListener{}
	if got := ListenerFrom(WithListener(context.Background(), l)); got != l {
		t.Fatalf("found %v", got)
	}
	if got := ListenerFrom(context.Background()); got != nil {
		t.Fatalf("found %v in a plain context", got)
	}
}

// SPDX-License-Identifier: Apache-2.0

package store

import (
	"reflect"
	"testing"
	"time"
)

func TestServiceEdges(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	// Two flushes of one bucket and one of the next: the edges sum over
	// buckets and over the operations on both sides.
	for i, f := range []Flush{
		knownFlush("a", 1, t0),
		knownFlush("b", 1, t0),
		knownFlush("a", 2, t0.Add(time.Minute)),
	} {
		if _, err := s.Write(ctx, f); err != nil {
			t.Fatalf("flush %d: %v", i, err)
		}
	}
	got, err := s.ServiceEdges(ctx, t0.Add(-time.Hour), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	type f = ServiceEdgeFigures[float64]
	want := counted(
		ServiceEdge{Service: "backend", PeerService: "unknown", ServiceEdgeFigures: f{Calls: 30, Attempts: 30}},
		ServiceEdge{Service: "frontend", PeerService: "backend", ServiceEdgeFigures: f{Calls: 3000, FailedCalls: 600, Attempts: 3900, Retries: 900,
			Retried: 750, SuppressedUnclaimed: 90, SuppressedBudget: 60, NoPolicy: 21, Exhausted: 27}},
		ServiceEdge{Service: "frontend", PeerService: "cache", ServiceEdgeFigures: f{Calls: 3000, FailedCalls: 900, Attempts: 3000}},
	)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if n := got[1].Suppressed(); n != 150 {
		t.Fatalf("Suppressed() = %v, want 150", n)
	}
	// The window is half-open over bucket starts.
	if got, err := s.ServiceEdges(ctx, t0.Add(time.Minute), t0.Add(time.Hour)); err != nil || len(got) != 3 || got[1].Calls != 1000 {
		t.Fatalf("ServiceEdges from the second bucket: %+v, %v", got, err)
	}
}

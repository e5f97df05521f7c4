// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestLinkCountsWhatCannotBeLinked(t *testing.T) {
	tests := []struct {
		name  string
		spans []Span
		want  LinkStats
		reqs  int
	}{
		{
			name:  "empty trace",
			spans: nil,
		},
		{
			name: "a clean chain",
			spans: records(
				sp{id: 1, kind: KindServer, svc: "a", op: "GET /a"},
				sp{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b"},
				sp{id: 3, parent: 2, kind: KindServer, svc: "b", op: "GET /b"},
			),
			want: LinkStats{Spans: 3},
			reqs: 2,
		},
		{
			name: "absent parent",
			spans: records(
				sp{id: 3, parent: 9, kind: KindServer, svc: "b", op: "GET /b"},
			),
			want: LinkStats{Spans: 1, Orphans: 1},
			reqs: 1,
		},
		{
			name: "self parent",
			spans: records(
				sp{id: 3, parent: 3, kind: KindServer, svc: "b", op: "GET /b"},
			),
			want: LinkStats{Spans: 1, SelfParents: 1},
			reqs: 1,
		},
		{
			name: "duplicate span IDs keep the first",
			spans: records(
				sp{id: 1, kind: KindServer, svc: "a", op: "GET /a"},
				sp{id: 1, kind: KindServer, svc: "a", op: "GET /a"},
			),
			want: LinkStats{Spans: 2, Duplicates: 1},
			reqs: 1,
		},
		{
			name: "a loop of internal spans is cut once",
			spans: records(
				sp{id: 1, parent: 3, kind: KindInternal, svc: "a", op: "x"},
				sp{id: 2, parent: 1, kind: KindInternal, svc: "a", op: "y"},
				sp{id: 3, parent: 2, kind: KindInternal, svc: "a", op: "z"},
			),
			want: LinkStats{Spans: 3, Cycles: 1},
		},
		{
			name: "a loop through a server span is counted too",
			spans: records(
				sp{id: 1, parent: 2, kind: KindServer, svc: "a", op: "GET /a"},
				sp{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "a"},
			),
			want: LinkStats{Spans: 2, Cycles: 1},
			reqs: 1,
		},
		{
			name: "a lone orphan client span is an orphan, not broken context too",
			spans: records(
				sp{id: 1, parent: 9, kind: KindClient, svc: "c", op: "GET", peer: "d"},
			),
			want: LinkStats{Spans: 1, Orphans: 1},
		},
		{
			name: "outbound span without a request: broken context or an edge client",
			spans: records(
				sp{id: 1, kind: KindClient, svc: "c", op: "GET", peer: "d"},
				sp{id: 2, parent: 1, kind: KindServer, svc: "d", op: "GET /d"},
			),
			want: LinkStats{Spans: 2, RootOutbound: 1},
			reqs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewAnalyzer().Link(testTrace, tt.spans)
			assert.Equal(t, tt.want, tr.Link)
			assert.Len(t, tr.Requests, tt.reqs)
		})
	}
}

func TestLinkFollowsIDsNotResources(t *testing.T) {
	// Service a's inbound span, an INTERNAL span, a database client span
	// that reports the database's service.name, and a client span to b
	// exported in another batch after b's own span.
	spans := records(
		sp{id: 3, parent: 4, kind: KindServer, svc: "b", op: "GET /b", start: 2, end: 8},
		sp{id: 1, kind: KindServer, svc: "a", op: "GET /a", start: 0, end: 10},
		sp{id: 2, parent: 1, kind: KindInternal, svc: "a", op: "handle", start: 1, end: 9},
		sp{id: 5, parent: 2, kind: KindClient, svc: "postgres", op: "SELECT", start: 1, end: 2},
		sp{id: 4, parent: 2, kind: KindClient, svc: "a", op: "GET", start: 2, end: 8},
	)
	a := NewAnalyzer()
	tr := a.Link(testTrace, spans)
	require.Len(t, tr.Requests, 2)
	root := tr.Requests[1]
	assert.Equal(t, "a", testSymbols.Name(tr.Spans[root.Span].Service))
	assert.EqualValues(t, 0, root.Depth)
	calls := tr.RequestCalls(&root)
	require.Len(t, calls, 2)
	assert.Equal(t, "postgres", testSymbols.Name(calls[0].PeerService), "an in-process client named after the callee")
	assert.Equal(t, "b", testSymbols.Name(calls[1].PeerService), "the callee's own span names the peer")
	assert.Equal(t, "GET /b", testSymbols.Name(calls[1].PeerOperation))
	callee := tr.Requests[0]
	assert.EqualValues(t, 1, callee.Depth)
	assert.EqualValues(t, 1, callee.Parent)
	assert.EqualValues(t, 4, callee.CalledBy)
}

func TestPeerIdentity(t *testing.T) {
	server := sp{id: 1, kind: KindServer, svc: "shop", op: "GET /shop", start: 0, end: 100}
	tests := []struct {
		name                  string
		spans                 []sp
		peer, peerOp, address string
	}{
		{
			name: "the callee's own service.name wins over attributes and address",
			spans: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "shop", op: "GET", peer: "catalog-alias", addr: "10.0.0.7:8080", start: 1, end: 9},
				{id: 3, parent: 2, kind: KindServer, svc: "catalog", op: "GET /items/{id}", start: 2, end: 8},
			},
			peer: "catalog", peerOp: "GET /items/{id}", address: "10.0.0.7:8080",
		},
		{
			name: "the callee's span named the peer even if only a retry reached it",
			spans: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "shop", op: "GET", addr: "10.0.0.7:8080", url: "GET /items/1", start: 1, end: 2, failed: true},
				{id: 4, parent: 1, kind: KindClient, svc: "shop", op: "GET", addr: "10.0.0.7:8080", url: "GET /items/1", start: 3, end: 9, try: 2},
				{id: 5, parent: 4, kind: KindServer, svc: "catalog", op: "GET /items/{id}", start: 4, end: 8},
			},
			peer: "catalog", peerOp: "GET /items/{id}", address: "10.0.0.7:8080",
		},
		{
			name: "without the callee's span, a peer attribute",
			spans: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "shop", op: "GET", peer: "catalog", addr: "10.0.0.7:8080", start: 1, end: 9},
			},
			peer: "catalog", peerOp: "GET", address: "10.0.0.7:8080",
		},
		{
			name: "with neither, the address",
			spans: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "shop", op: "GET", addr: "catalog.shop.svc", start: 1, end: 9},
			},
			peer: "catalog.shop.svc", peerOp: "GET", address: "catalog.shop.svc",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewAnalyzer().Link(testTrace, records(append([]sp{server}, tt.spans...)...))
			calls := tr.RequestCalls(&tr.Requests[0])
			require.Len(t, calls, 1)
			assert.Equal(t, tt.peer, testSymbols.Name(calls[0].PeerService), "peer")
			assert.Equal(t, tt.peerOp, testSymbols.Name(calls[0].PeerOperation), "peer operation")
			assert.Equal(t, tt.address, testSymbols.Name(calls[0].PeerAddress), "address")
		})
	}
}

func TestLogicalCalls(t *testing.T) {
	server := sp{id: 1, kind: KindServer, svc: "a", op: "GET /a", start: 0, end: 100}
	tests := []struct {
		name     string
		attempts []sp
		// want lists the attempts of each logical call, by span ID.
		want    [][]byte
		failed  []bool
		retried []byte // callee requests marked as retries, by span ID
	}{
		{
			name: "retry inferred after a failure",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 1, end: 2, failed: true},
				{id: 3, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 3, end: 4},
			},
			want:   [][]byte{{2, 3}},
			failed: []bool{false},
		},
		{
			name: "a second call after a success is a new call",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 1, end: 2},
				{id: 3, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 3, end: 4, failed: true},
			},
			want:   [][]byte{{2}, {3}},
			failed: []bool{false, true},
		},
		{
			name: "overlapping calls are not retries",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 1, end: 5, failed: true},
				{id: 3, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 2, end: 4, failed: true},
			},
			want:   [][]byte{{2}, {3}},
			failed: []bool{true, true},
		},
		{
			name: "attempt numbers decide when present",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 1, end: 2, try: 1},
				{id: 3, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 3, end: 4, try: 1, failed: true},
				{id: 4, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 5, end: 6, try: 2, failed: true},
			},
			want:   [][]byte{{2}, {3, 4}},
			failed: []bool{false, true},
		},
		{
			name: "different destinations are different calls",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 1, end: 2, failed: true},
				{id: 3, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "c", start: 3, end: 4},
			},
			want:   [][]byte{{2}, {3}},
			failed: []bool{true, false},
		},
		{
			name: "fan-out to one peer: a marked retry joins its own call, whatever ran in between",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /x", start: 1, end: 5, failed: true},
				{id: 3, parent: 2, kind: KindServer, svc: "catalog", op: "GET /x", start: 2, end: 4, failed: true},
				{id: 4, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /y", start: 2, end: 6},
				{id: 5, parent: 4, kind: KindServer, svc: "catalog", op: "GET /y", start: 3, end: 5},
				{id: 6, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /x", start: 7, end: 9, try: 2},
				{id: 7, parent: 6, kind: KindServer, svc: "catalog", op: "GET /x", start: 7, end: 8},
			},
			want:    [][]byte{{2, 6}, {4}},
			failed:  []bool{false, false},
			retried: []byte{7},
		},
		{
			name: "fan-out to one peer: an unmarked retry after its call failed joins it",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /x", start: 1, end: 5, failed: true},
				{id: 4, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /y", start: 2, end: 6},
				{id: 6, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /x", start: 7, end: 9},
			},
			want:   [][]byte{{2, 6}, {4}},
			failed: []bool{false, false},
		},
		{
			name: "two paths under one route are two calls",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /items/1", start: 1, end: 2, failed: true},
				{id: 3, parent: 1, kind: KindClient, svc: "a", op: "GET", addr: "catalog:80", url: "GET /items/2", start: 3, end: 4},
			},
			want:   [][]byte{{2}, {3}},
			failed: []bool{true, false},
		},
		{
			name: "a wrapper client span around its attempts is not an attempt",
			attempts: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 1, end: 9},
				{id: 3, parent: 2, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 1, end: 2, failed: true},
				{id: 4, parent: 2, kind: KindClient, svc: "a", op: "GET", peer: "b", start: 3, end: 4},
				{id: 5, parent: 4, kind: KindServer, svc: "b", op: "GET /b", start: 3, end: 4},
			},
			want:    [][]byte{{3, 4}},
			failed:  []bool{false},
			retried: []byte{5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewAnalyzer().Link(testTrace, records(append([]sp{server}, tt.attempts...)...))
			var got [][]byte
			var failed []bool
			for ci := range tr.Calls {
				c := &tr.Calls[ci]
				var ids []byte
				for _, ai := range tr.CallAttempts(c) {
					ids = append(ids, tr.Spans[ai].SpanID[7])
				}
				got = append(got, ids)
				failed = append(failed, c.Failed)
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.failed, failed)
			var retried []byte
			for _, r := range tr.Requests {
				if r.Retry {
					retried = append(retried, tr.Spans[r.Span].SpanID[7])
				}
			}
			assert.Equal(t, tt.retried, retried)
		})
	}
}

// TestLinkLargeTraces covers a trace larger than the index's first size.
func TestLinkLargeTraces(t *testing.T) {
	specs := []sp{{id: 1, kind: KindServer, svc: "a", op: "GET /a"}}
	for i := 2; i < 100; i += 2 {
		specs = append(specs,
			sp{id: byte(i), parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b"},
			sp{id: byte(i + 1), parent: byte(i), kind: KindServer, svc: "b", op: "GET /b"})
	}
	specs = append(specs,
		sp{id: 5, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b"}, // duplicate
		sp{id: 200, parent: 201, kind: KindServer, svc: "c", op: "GET /c"},     // orphan
	)
	tr := NewAnalyzer().Link(testTrace, records(specs...))
	assert.Equal(t, LinkStats{Spans: uint64(len(specs)), Duplicates: 1, Orphans: 1}, tr.Link)
	assert.Len(t, tr.Requests, 1+49+1)
	assert.Len(t, tr.Calls, 49)
}

// TestSlotOfSpreadsCountingIDs: span IDs that count, in either byte order
// and in either half, spread over the span table as random ones do.
func TestSlotOfSpreadsCountingIDs(t *testing.T) {
	const n, slots = 4096, 8192 // as the table sizes itself: twice the spans
	tests := []struct {
		name string
		id   func(i uint64) pcommon.SpanID
	}{
		{"random", func(i uint64) pcommon.SpanID {
			var id pcommon.SpanID
			binary.LittleEndian.PutUint64(id[:], (i+1)*0x9E3779B97F4A7C15)
			return id
		}},
		{"big-endian counter", func(i uint64) pcommon.SpanID {
			var id pcommon.SpanID
			binary.BigEndian.PutUint64(id[:], i+1)
			return id
		}},
		{"little-endian counter", func(i uint64) pcommon.SpanID {
			var id pcommon.SpanID
			binary.LittleEndian.PutUint64(id[:], i+1)
			return id
		}},
		{"counter in the first bytes, a constant after", func(i uint64) pcommon.SpanID {
			id := pcommon.SpanID{4: 0xAB, 5: 0xCD, 6: 0xEF, 7: 0x01}
			binary.BigEndian.PutUint32(id[:4], uint32(i+1))
			return id
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[uint64]bool{}
			for i := range uint64(n) {
				used[slotOf(tt.id(i))&(slots-1)] = true
			}
			// Random IDs fill about 1 − e^(−1/2) ≈ 39 % of the slots.
			if len(used) < n*3/4 {
				t.Errorf("%d IDs took %d of %d slots: they cluster", n, len(used), slots)
			}
		})
	}
}

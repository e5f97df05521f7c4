// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

// fuzzSpanBytes is how many input bytes describe one span.
const fuzzSpanBytes = 10

// spansFromBytes turns fuzz input into one trace's records. Span and parent
// IDs are 16-bit (zero included), so that duplicates, self-parents, cycles
// and absent parents stay within the fuzzer's reach while a seed can still
// spell a chain tens of thousands of spans deep.
func spansFromBytes(data []byte) []Span {
	services := []Symbol{sym("a"), sym("b"), sym("c"), sym("d")}
	out := make([]Span, 0, len(data)/fuzzSpanBytes)
	for len(data) >= fuzzSpanBytes {
		b := data[:fuzzSpanBytes]
		data = data[fuzzSpanBytes:]
		start := pcommon.Timestamp(binary.LittleEndian.Uint16(b[6:8]))
		s := Span{
			SpanID:        pcommon.SpanID{6: b[1], 7: b[0]},
			ParentID:      pcommon.SpanID{6: b[3], 7: b[2]},
			Kind:          Kind(b[4] % 5),
			Service:       services[b[5]%4],
			Operation:     services[(b[5]>>2)%4],
			PeerService:   services[(b[5]>>4)%4],
			PeerOperation: services[(b[5]>>6)%4],
			Start:         start,
			Flags:         b[9] & (FlagFailed | FlagTimeout | FlagCompleted),
			Attempt:       int8(b[9]>>3&3) - 1,
		}
		s.SetEnd(start + pcommon.Timestamp(b[8])*pcommon.Timestamp(time.Microsecond))
		s.SetClaim(ownership.Claim(b[9] >> 5 % 3))
		s.SetClaimReceived(ownership.Claim(b[9] >> 6 % 3))
		s.SetDecision(ownership.RetryDecision(b[4] / 5 % 6))
		out = append(out, s)
	}
	return out
}

// spanBytes encodes one span for the seed corpus.
func spanBytes(id, parent uint16, kind Kind, failed bool) []byte {
	b := []byte{byte(id), byte(id >> 8), byte(parent), byte(parent >> 8), byte(kind), 0, 0, 0, 1, 0}
	if failed {
		b[9] = FlagFailed
	}
	return b
}

func FuzzAnalyze(f *testing.F) {
	join := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	f.Add([]byte{})
	f.Add(join( // a chain whose leaf fails
		spanBytes(1, 0, KindServer, true), spanBytes(2, 1, KindClient, true), spanBytes(3, 2, KindServer, true)))
	f.Add(join( // a cycle of internal spans under nothing
		spanBytes(1, 3, KindInternal, false), spanBytes(2, 1, KindInternal, false), spanBytes(3, 2, KindInternal, false)))
	f.Add(join( // a cycle through a server span
		spanBytes(1, 2, KindServer, true), spanBytes(2, 1, KindClient, true)))
	f.Add(spanBytes(5, 5, KindServer, true))                                          // self-parent
	f.Add(join(spanBytes(1, 0, KindServer, true), spanBytes(1, 0, KindClient, true))) // duplicate IDs
	f.Add(spanBytes(1, 9, KindServer, true))                                          // absent parent
	f.Add(spanBytes(0, 0, KindClient, false))                                         // zero IDs
	f.Add(deepChainBytes(20_000))                                                     // a chain 20,000 spans deep, every ID distinct

	an := NewAnalyzer()
	f.Fuzz(func(t *testing.T, data []byte) {
		spans := spansFromBytes(data)
		model := NewEdgeModel(DefaultConfig().EdgeModel)
		tr := an.Link(traceID(1), spans)
		model.Observe(tr)
		vs := an.Judge(tr, model)
		stats := NewStats()
		stats.Add(tr, vs)

		inbound, failed, outbound := 0, 0, 0
		for i := range spans {
			switch {
			case spans[i].Kind.Inbound():
				inbound++
				if spans[i].Failed() {
					failed++
				}
			case spans[i].Kind.Outbound():
				outbound++
			}
		}
		if len(tr.Requests) > inbound {
			t.Fatalf("%d requests from %d inbound spans", len(tr.Requests), inbound)
		}
		if len(vs) > failed {
			t.Fatalf("%d verdicts for %d failed inbound spans", len(vs), failed)
		}
		if len(tr.Attempts) > outbound {
			t.Fatalf("%d attempts from %d outbound spans", len(tr.Attempts), outbound)
		}
		seen := make(map[int32]bool, len(tr.Attempts))
		for ci := range tr.Calls {
			c := &tr.Calls[ci]
			if c.Attempts() < 1 {
				t.Fatalf("call %d has no attempts", ci)
			}
			for _, ai := range tr.CallAttempts(c) {
				if seen[ai] {
					t.Fatalf("span %d is an attempt of two calls", ai)
				}
				seen[ai] = true
			}
		}
		for ri := range tr.Requests {
			r := &tr.Requests[ri]
			if r.Depth < -1 || int(r.Depth) >= len(tr.Requests) {
				t.Fatalf("request %d has depth %d of %d requests", ri, r.Depth, len(tr.Requests))
			}
		}
		for _, root := range stats.Roots {
			if root.RadiusMax < 0 || root.RadiusMax > len(tr.Calls) {
				t.Fatalf("storm radius %d with %d calls", root.RadiusMax, len(tr.Calls))
			}
		}
		for _, v := range vs {
			if v.Kind == VerdictOwn && len(v.FailedCalls) != 0 {
				t.Fatalf("own verdict with failed calls %v", v.FailedCalls)
			}
		}
	})
}

// deepChainBytes spells a chain n spans deep, server and client spans in
// turn (span i+1's parent is span i), every seventh failed: deep enough to
// find recursion where a loop belongs.
func deepChainBytes(n int) []byte {
	out := make([]byte, 0, n*fuzzSpanBytes)
	for i := range n {
		kind := KindServer
		if i%2 == 1 {
			kind = KindClient
		}
		out = append(out, spanBytes(uint16(i+1), uint16(i), kind, i%7 == 0)...)
	}
	return out
}

// TestDeepChain links the fuzz corpus's 20,000-deep chain and checks what
// it found: every server span a request a level deeper than the last.
func TestDeepChain(t *testing.T) {
	const n = 20_000
	spans := spansFromBytes(deepChainBytes(n))
	require.Equal(t, n, len(spans))
	tr := NewAnalyzer().Link(traceID(1), spans)
	assert.Equal(t, LinkStats{Spans: n}, tr.Link)
	require.Equal(t, n/2, len(tr.Requests), "requests")
	require.Equal(t, n/2, len(tr.Calls), "calls, the last one's callee not in the trace")
	for ri := range tr.Requests {
		require.EqualValues(t, ri, tr.Requests[ri].Depth, "request %d", ri)
	}
}

// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

// sp describes a span record for tests: IDs are small numbers, times are
// milliseconds, names are interned into testSymbols.
type sp struct {
	id, parent     byte
	kind           Kind
	svc, op        string
	peer, peerOp   string
	start, end     int
	failed, tmo    bool
	try            int8 // attempt number plus one; 0: no attribute
	claim, claimRx ownership.Claim
	decision       ownership.RetryDecision
	addr           string // server.address:port
	url            string // "METHOD /path", hashed into Target
	cut            bool   // ended without an answer (not Completed)
	answered       bool   // a server's answer (FlagAnswered)
}

var testSymbols = NewSymbols(0)

func sym(s string) Symbol { return testSymbols.Intern(s) }

func traceID(n byte) pcommon.TraceID { return pcommon.TraceID{15: n} }

// testTrace is the ID of the trace the tests link.
var testTrace = traceID(1)

func records(specs ...sp) []Span {
	out := make([]Span, len(specs))
	for i, s := range specs {
		r := Span{
			SpanID:        pcommon.SpanID{7: s.id},
			Start:         pcommon.Timestamp(time.Duration(s.start) * time.Millisecond),
			Service:       sym(s.svc),
			Operation:     sym(s.op),
			PeerService:   sym(s.peer),
			PeerOperation: sym(s.peerOp),
			Attempt:       AttemptUnknown,
			Kind:          s.kind,
		}
		r.SetEnd(pcommon.Timestamp(time.Duration(s.end) * time.Millisecond))
		r.SetClaim(s.claim)
		r.SetClaimReceived(s.claimRx)
		r.SetDecision(s.decision)
		if s.parent != 0 {
			r.ParentID = pcommon.SpanID{7: s.parent}
		}
		if s.kind.Outbound() && s.peerOp == "" {
			r.PeerOperation = r.Operation
		}
		r.PeerAddress = sym(s.addr)
		if s.url != "" {
			method, path, _ := strings.Cut(s.url, " ")
			r.Target = target(&spanAttrs{method: method, path: path})
		}
		if !s.failed && !s.cut {
			r.Flags |= FlagCompleted
		}
		if s.try != 0 {
			r.Attempt = s.try - 1
		}
		if s.failed {
			r.Flags |= FlagFailed
		}
		if s.tmo {
			r.Flags |= FlagTimeout
		}
		if s.answered {
			r.Flags |= FlagAnswered
		}
		out[i] = r
	}
	return out
}

// modes is a fixed Modes for verdict tests; absent edges are unknown.
type modes map[[2]string]ownership.Mode

func (m modes) Mode(k EdgeKey) ownership.Mode {
	return m[[2]string{testSymbols.Name(k.Service), testSymbols.Name(k.PeerService)}]
}

// TestSpanRecordSize keeps the record at the size the buffer's memory
// bound is stated in (docs and README: 56 bytes a span).
func TestSpanRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(Span{}); got != 56 {
		t.Fatalf("Span is %d bytes, want 56: the buffer's memory bound assumes it", got)
	}
}

func TestSpanPackedFields(t *testing.T) {
	for c := ownership.ClaimMissing; c <= ownership.ClaimUnclaimed; c++ {
		for rx := ownership.ClaimMissing; rx <= ownership.ClaimUnclaimed; rx++ {
			for d := ownership.DecisionNone; d <= ownership.DecisionExhausted; d++ {
				var s Span
				s.SetDecision(d)
				s.SetClaimReceived(rx)
				s.SetClaim(c)
				if s.Claim() != c || s.ClaimReceived() != rx || s.Decision() != d {
					t.Fatalf("set %v %v %v, got %v %v %v", c, rx, d, s.Claim(), s.ClaimReceived(), s.Decision())
				}
			}
		}
	}
}

func TestSpanEnd(t *testing.T) {
	const start = pcommon.Timestamp(1_700_000_000_000_000_000)
	tests := []struct {
		name     string
		end, got pcommon.Timestamp
	}{
		{"to the microsecond below", start + 1_500_999, start + 1_500_000},
		{"before the start", start - 1, start},
		{"past the longest duration", start + pcommon.Timestamp(2*time.Hour), start + maxDuration*1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Span{Start: start}
			s.SetEnd(tt.end)
			if s.End() != tt.got {
				t.Errorf("End() = %d, want %d", s.End(), tt.got)
			}
		})
	}
}

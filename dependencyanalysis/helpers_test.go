package dependencyanalysis

import (
	"strings"
	"time"

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
	try            int16 // attempt number plus one; 0: no attribute
	claim, claimRx ownership.Claim
	decision       ownership.RetryDecision
	addr           string // server.address:port
	url            string // "METHOD /path", hashed into Target
	cut            bool   // ended without an answer (not Completed)
}

var testSymbols = NewSymbols(0)

func sym(s string) Symbol { return testSymbols.Intern(s) }

func traceID(n byte) pcommon.TraceID { return pcommon.TraceID{15: n} }

func records(trace byte, specs ...sp) []Span {
	out := make([]Span, len(specs))
	for i, s := range specs {
		r := Span{
			TraceID:       traceID(trace),
			SpanID:        pcommon.SpanID{7: s.id},
			Start:         pcommon.Timestamp(time.Duration(s.start) * time.Millisecond),
			End:           pcommon.Timestamp(time.Duration(s.end) * time.Millisecond),
			Service:       sym(s.svc),
			Operation:     sym(s.op),
			PeerService:   sym(s.peer),
			PeerOperation: sym(s.peerOp),
			Attempt:       AttemptUnknown,
			Kind:          s.kind,
			Claim:         s.claim,
			ClaimReceived: s.claimRx,
			Decision:      s.decision,
		}
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
		out[i] = r
	}
	return out
}

// modes is a fixed Modes for verdict tests; absent edges are unknown.
type modes map[[2]string]ownership.Mode

func (m modes) Mode(k EdgeKey) ownership.Mode {
	return m[[2]string{testSymbols.Name(k.Service), testSymbols.Name(k.PeerService)}]
}

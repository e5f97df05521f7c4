// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

// Kind is a span's role in a request.
type Kind uint8

// The kinds, after OpenTelemetry's span kinds. Unspecified spans are Internal.
const (
	KindInternal Kind = iota
	KindServer
	KindClient
	KindProducer
	KindConsumer
)

var kindNames = [...]string{"internal", "server", "client", "producer", "consumer"}

// String returns the lower-case kind name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "internal"
}

// Inbound reports whether spans of this kind receive a request: SERVER or CONSUMER.
func (k Kind) Inbound() bool { return k == KindServer || k == KindConsumer }

// Outbound reports whether spans of this kind make a call: CLIENT or PRODUCER.
func (k Kind) Outbound() bool { return k == KindClient || k == KindProducer }

// Span flags.
const (
	// FlagFailed: the span is an error per the Classification.
	FlagFailed uint8 = 1 << iota
	// FlagTimeout: the error is a timeout or an exceeded deadline.
	FlagTimeout
	// FlagCompleted: the span is not an error and ended with an answer:
	// an HTTP status, a gRPC code other than CANCELLED, or at least no
	// ERROR status. A call cut short when its caller gave up lacks it.
	FlagCompleted
	// FlagAnswered: an outbound attempt got an answer from a server, an
	// HTTP status or a gRPC code a server sends (not CANCELLED,
	// UNAVAILABLE or DEADLINE_EXCEEDED, which a client also makes up), so
	// that an instrumented callee has an inbound span for it.
	FlagAnswered
)

// AttemptUnknown is Span.Attempt when no attribute tells the attempt number.
const AttemptUnknown = -1

// MaxAttempt is the largest attempt number a Span records; higher ones
// are recorded as MaxAttempt, which tells a retry from a first attempt
// all the same.
const MaxAttempt = 127

// maxDuration is the longest duration a Span records, in its unit of a
// microsecond: about 71 minutes. A longer span ends there.
const maxDuration = 1<<32 - 1

// Span is the compact record the engine keeps of one span: 56 bytes, no
// pointers into pdata, so that the decision-wait buffer of a collector
// holds a million spans in 56 MB. Names are Symbols of the extractor's
// table. The trace a span belongs to is not in the record: the buffer and
// Record keep it beside the spans of a trace.
//
// The end is kept as a duration in microseconds: comparing the ends of
// spans from different hosts is good to a clock's skew, far coarser.
type Span struct {
	SpanID   pcommon.SpanID
	ParentID pcommon.SpanID
	Start    pcommon.Timestamp

	// Service is the resource's service.name.
	Service Symbol
	// Operation is an inbound or internal span's name (low-cardinality by
	// convention, such as "GET /users/{id}" or "pkg.Service/Method").
	// Outbound spans leave it empty: what matters of them is PeerOperation,
	// and interning a name nobody reads costs time on the span hot path.
	Operation Symbol
	// PeerService is the callee as the span's attributes name it
	// (service.peer.name, peer.service, messaging.destination.name);
	// outbound spans only. The callee's own service.name, when its inbound
	// span is in the trace, takes precedence (Analyzer.Link).
	PeerService Symbol
	// PeerOperation is the callee's operation as the caller names it
	// (method and url.template or http.route, rpc service and method, or the
	// span name); outbound spans only.
	PeerOperation Symbol
	// PeerAddress is where the call went, server.address with
	// server.port when there is one ("10.0.0.7:8080"); outbound spans only.
	// It names the callee when nothing else does, and it is what the SDK
	// hooks know of a callee at call time.
	PeerAddress Symbol
	// Target tells apart the requests a caller makes to one callee, so
	// that a retry joins its own logical call: a hash of the method and the
	// URL path for HTTP (url.full or url.path), else 0, and then the peer
	// operation tells them apart. Outbound spans only.
	Target uint32

	duration uint32 // microseconds, at most maxDuration

	// Attempt is the attempt number of an outbound span, 0 first, from
	// http.request.resend_count or error_ownership.retry.attempt, at most MaxAttempt;
	// AttemptUnknown if absent.
	Attempt int8
	Kind    Kind
	Flags   uint8
	// claims packs Claim (bits 0–1), ClaimReceived (bits 2–3) and
	// Decision (bits 4–6).
	claims uint8
}

// End returns when the span ended: Start plus its duration, to the
// microsecond below.
func (s *Span) End() pcommon.Timestamp {
	return s.Start + pcommon.Timestamp(s.duration)*pcommon.Timestamp(time.Microsecond)
}

// SetEnd records when the span ended; an end before the start is taken as
// the start.
func (s *Span) SetEnd(end pcommon.Timestamp) {
	if end <= s.Start {
		s.duration = 0
		return
	}
	s.duration = uint32(min(uint64(end-s.Start)/uint64(time.Microsecond), maxDuration))
}

// Claim is error_ownership.claim.sent on an inbound span: what the service sent.
func (s *Span) Claim() ownership.Claim { return ownership.Claim(s.claims & 3) }

// ClaimReceived is error_ownership.claim.received on an outbound span: what the
// callee sent.
func (s *Span) ClaimReceived() ownership.Claim { return ownership.Claim(s.claims >> 2 & 3) }

// Decision is error_ownership.retry.decision on an outbound span.
func (s *Span) Decision() ownership.RetryDecision { return ownership.RetryDecision(s.claims >> 4 & 7) }

// SetClaim records the claim an inbound span's service sent.
func (s *Span) SetClaim(c ownership.Claim) { s.claims = s.claims&^3 | uint8(c)&3 }

// SetClaimReceived records the claim an outbound span's callee sent.
func (s *Span) SetClaimReceived(c ownership.Claim) { s.claims = s.claims&^(3<<2) | (uint8(c)&3)<<2 }

// SetDecision records an outbound span's retry decision.
func (s *Span) SetDecision(d ownership.RetryDecision) { s.claims = s.claims&^(7<<4) | (uint8(d)&7)<<4 }

// Failed reports whether the span is an error.
func (s *Span) Failed() bool { return s.Flags&FlagFailed != 0 }

// TimedOut reports whether the span's error is a timeout.
func (s *Span) TimedOut() bool { return s.Flags&FlagTimeout != 0 }

// Answered reports whether the span got an answer from a server
// (FlagAnswered).
func (s *Span) Answered() bool { return s.Flags&FlagAnswered != 0 }

// Completed reports whether the span ended with an answer that is not an
// error (FlagCompleted).
func (s *Span) Completed() bool { return s.Flags&FlagCompleted != 0 }

// Batch is a batch's spans as the Extractor reads them (Extract), in the
// batch's order, with runs of consecutive spans of one trace and one
// sampling class in place of a trace ID beside each span: the spans of a
// trace in a batch mostly come together, so that a buffer can keep them
// as they are, copying a run at a time.
type Batch struct {
	Spans []Span
	Runs  []Run
}

// Run is a run of consecutive spans of a Batch of one trace and one
// sampling class: Spans from the previous run's End up to End.
type Run struct {
	TraceID  pcommon.TraceID
	End      int32
	Sampling SamplingClass
}

// Reset empties b, keeping its room.
func (b *Batch) Reset() { b.Spans, b.Runs = b.Spans[:0], b.Runs[:0] }

// Append adds r's span to b.
func (b *Batch) Append(r Record) {
	b.Spans = append(b.Spans, r.Span)
	b.ended(r.TraceID, r.Sampling)
}

// ended puts the span just appended to Spans, of trace id and sampling
// class c, in its run.
func (b *Batch) ended(id pcommon.TraceID, c SamplingClass) {
	if n := len(b.Runs); n == 0 || b.Runs[n-1].TraceID != id || b.Runs[n-1].Sampling != c {
		b.Runs = append(b.Runs, Run{TraceID: id, Sampling: c})
	}
	b.Runs[len(b.Runs)-1].End = int32(len(b.Spans))
}

// AppendRecords appends b's spans to dst as records.
func (b *Batch) AppendRecords(dst []Record) []Record {
	lo := int32(0)
	for _, r := range b.Runs {
		for _, s := range b.Spans[lo:r.End] {
			dst = append(dst, Record{TraceID: r.TraceID, Span: s, Sampling: r.Sampling})
		}
		lo = r.End
	}
	return dst
}

// Record is a Span with the trace it belongs to, as the Extractor
// produces them from a batch in which many traces mix.
type Record struct {
	TraceID pcommon.TraceID
	Span
	// Sampling is how the span was sampled; a trace's is the strictest of
	// its spans' (CombineSampling).
	Sampling SamplingClass
}

package dependencyanalysis

import (
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
)

// AttemptUnknown is Span.Attempt when no attribute tells the attempt number.
const AttemptUnknown = -1

// Span is the compact record the engine keeps of one span: 80 bytes, no
// pointers into pdata. Names are Symbols of the extractor's table.
type Span struct {
	TraceID  pcommon.TraceID
	SpanID   pcommon.SpanID
	ParentID pcommon.SpanID
	Start    pcommon.Timestamp
	End      pcommon.Timestamp

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

	// Attempt is the attempt number of an outbound span, 0 first, from
	// http.request.resend_count or retry.attempt; AttemptUnknown if absent.
	Attempt int16
	Kind    Kind
	Flags   uint8
	// Claim is error.claim on an inbound span: what the service sent.
	Claim ownership.Claim
	// ClaimReceived is error.claim.received on an outbound span.
	ClaimReceived ownership.Claim
	// Decision is retry.decision on an outbound span.
	Decision ownership.RetryDecision
}

// Failed reports whether the span is an error.
func (s *Span) Failed() bool { return s.Flags&FlagFailed != 0 }

// TimedOut reports whether the span's error is a timeout.
func (s *Span) TimedOut() bool { return s.Flags&FlagTimeout != 0 }

// Completed reports whether the span ended with an answer that is not an
// error (FlagCompleted).
func (s *Span) Completed() bool { return s.Flags&FlagCompleted != 0 }

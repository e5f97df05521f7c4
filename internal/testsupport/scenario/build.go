// SPDX-License-Identifier: Apache-2.0

// Package scenario builds deterministic OpenTelemetry traces that tell the
// stories of error ownership: retry storms along a call chain, retry
// budgets, ownership hooks, coincidental errors, broken trace context and
// the messy instrumentation a real pipeline sees. Each Scenario carries the
// figures the dependency analysis must find in it, worked out by hand.
//
// The traces come from a small request-tree simulator. A World holds
// services; a service's Handler answers an operation and makes outbound
// calls through its Request; the World records a SERVER (or CONSUMER) span
// per inbound request and a CLIENT span per outbound attempt, with retries,
// retry budgets and, for services with hooks, the claims and retry decisions
// of the ownership vocabulary. Everything is deterministic: span and trace
// IDs come from counters, timestamps from a virtual clock.
package scenario

import (
	"encoding/binary"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/ownership"
)

// baseTime is when the first root request of every World starts; root
// request i starts at baseTime + i*RootSpacing.
var baseTime = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// RootSpacing is the time between the starts of two root requests. The
// first starts at 2026-11-01T00:00:00Z.
const RootSpacing = 100 * time.Millisecond

// The virtual clock: how long the pieces of a request take.
const (
	callGap    = 50 * time.Microsecond  // before an outbound span starts
	netDelay   = 100 * time.Microsecond // client start → server start, server end → client end
	leadWork   = 500 * time.Microsecond // a server's work before its first call
	trailWork  = 2 * time.Millisecond   // a server's work after its last call
	minSpan    = time.Millisecond       // the shortest span
	fanStagger = 20 * time.Microsecond  // between the starts of parallel calls
	queueDelay = 5 * time.Millisecond   // a message waits this long in its queue
)

// scopeName is the instrumentation scope of every span.
const scopeName = "github.com/errorownership/errorownership/internal/testsupport/scenario"

// Attribute names of the OpenTelemetry semantic conventions used here (the
// ownership vocabulary lives in package ownership).
const (
	// AttrServicePeerName names the callee service on a client span.
	AttrServicePeerName = "service.peer.name"
	// AttrPeerService is the older spelling of AttrServicePeerName.
	AttrPeerService = "peer.service"
	// AttrURLTemplate carries the callee's route on an HTTP client span.
	AttrURLTemplate = "url.template"
	// AttrHTTPRoute carries the route on an HTTP server span; some
	// instrumentation also puts it on client spans.
	AttrHTTPRoute = "http.route"
	// AttrGRPCStatusCode is the gRPC status code as an int.
	AttrGRPCStatusCode = "rpc.grpc.status_code"
	// AttrRPCResponseStatusCode is the gRPC status code by name ("UNAVAILABLE").
	AttrRPCResponseStatusCode = "rpc.response.status_code"
	// AttrRPCStatusCode is the gRPC status code as an int, another spelling.
	AttrRPCStatusCode = "rpc.status_code"

	attrServiceName     = "service.name"
	attrServerAddress   = "server.address"
	attrHTTPMethod      = "http.request.method"
	attrHTTPStatus      = "http.response.status_code"
	attrErrorType       = "error.type"
	attrRPCSystem       = "rpc.system"
	attrRPCService      = "rpc.service"
	attrRPCMethod       = "rpc.method"
	attrMsgSystem       = "messaging.system"
	attrMsgDestination  = "messaging.destination.name"
	attrMsgOperation    = "messaging.operation.type"
	attrDBSystem        = "db.system.name"
	attrDBOperation     = "db.operation.name"
	attrDBCollection    = "db.collection.name"
	errorTypeTimeout    = "timeout"
	errorTypeOther      = "_OTHER"
	messagingSystemName = "kafka"
)

// grpcCodeNames are the gRPC status code names, indexed by code.
var grpcCodeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

// gRPC status codes the scenarios use.
const (
	GRPCOK              = 0
	GRPCUnknown         = 2
	GRPCInvalidArgument = 3
	GRPCDeadline        = 4
	GRPCNotFound        = 5
	GRPCInternal        = 13
	GRPCUnavailable     = 14
)

// grpcServerFault reports whether a gRPC code is a server fault, after
// OpenTelemetry's rule for server spans.
func grpcServerFault(code int) bool {
	switch code {
	case 2, 4, 12, 13, 14, 15: // UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS
		return true
	}
	return false
}

func grpcCodeName(code int) string {
	if code >= 0 && code < len(grpcCodeNames) {
		return grpcCodeNames[code]
	}
	return strconv.Itoa(code)
}

// Policy is a caller's retry policy for its outbound calls.
type Policy struct {
	// Attempts is the most attempts one logical call may make. 0 or 1
	// means the caller has no retry policy.
	Attempts int
	// BudgetPercent, when positive, is a Finagle-style retry budget per
	// caller service and destination: a retry is allowed while
	// 100*(retries+1) <= BudgetPercent*calls, where calls counts the
	// logical calls made so far, the current one included, and retries
	// the retries made so far. There is no minimum (floor 0).
	BudgetPercent int
}

// The common policies.
var (
	// NoRetry makes one attempt per call.
	NoRetry = Policy{}
	// RetryOnce retries every failed call once.
	RetryOnce = Policy{Attempts: 2}
)

// Budget retries a failed call once, within a retry budget of percent.
func Budget(percent int) Policy { return Policy{Attempts: 2, BudgetPercent: percent} }

// newBudget is the hooks' own retry budget for BudgetPercent: the ratio
// percent/100, no floor, and a clock that stands still, so that no deposit
// expires and a story's budget does not depend on its simulated times.
func newBudget(percent int) *hooks.Budget {
	if percent <= 0 {
		return nil // a nil budget allows every retry
	}
	still := time.Unix(0, 0)
	return hooks.NewBudget(hooks.Limits{Ratio: float64(percent) / 100}, hooks.BudgetClock(func() time.Time { return still }))
}

// World is a set of services and the spans their requests produced.
type World struct {
	// PeerAttr names the callee on client spans besides server.address,
	// which is always set: AttrServicePeerName (the default),
	// AttrPeerService, or "" for server.address alone.
	PeerAttr string
	// RouteAttr carries the callee's route on HTTP client spans:
	// AttrURLTemplate (the default), AttrHTTPRoute, or "" so that only the
	// span name tells the callee's operation.
	RouteAttr string
	// MarkResends makes services without hooks mark their retries with
	// http.request.resend_count (the default). Off, their retries are
	// marked by nothing. Services with hooks always set error_ownership.retry.attempt.
	MarkResends bool

	name     string
	idPrefix uint64
	traces   uint64
	spans    uint64
	roots    int
	services map[string]*Service
	budgets  map[budgetKey]*hooks.Budget
	out      ptrace.Traces
	truth    truth
	groups   []group     // reused by flush
	scratch  []attr      // where a span's attributes are gathered
	free     []*traceRec // flushed traces, for reuse
}

type budgetKey struct{ caller, service, operation string }

// NewWorld returns an empty World. Its name seeds the span and trace IDs.
func NewWorld(name string) *World {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &World{
		PeerAttr:    AttrServicePeerName,
		RouteAttr:   AttrURLTemplate,
		MarkResends: true,
		name:        name,
		idPrefix:    h.Sum64() | 1<<63,
		services:    make(map[string]*Service),
		budgets:     make(map[budgetKey]*hooks.Budget),
		out:         ptrace.NewTraces(),
		truth:       newTruth(),
	}
}

// Handler answers one operation of a service. It makes its outbound calls
// through r and returns the response the service sends.
type Handler func(r *Request) Response

type operation struct {
	handle   Handler
	consumer bool
}

// Service is one service of a World. Its methods configure it and return
// it, so a declaration reads as one sentence.
type Service struct {
	name     string
	hooks    bool
	policy   Policy
	failOpen map[string]bool
	grpcAttr string
	split    bool
	ops      map[string]operation
}

// Service returns the service called name, declaring it on first use. A
// new service speaks HTTP, has no hooks and no retry policy.
func (w *World) Service(name string) *Service {
	if s, ok := w.services[name]; ok {
		return s
	}
	s := &Service{name: name, failOpen: map[string]bool{}, ops: map[string]operation{}}
	w.services[name] = s
	return s
}

// Hooks installs the ownership hooks: the service claims or unclaims its
// errors (error_ownership.claim.sent, error_ownership.claim.reason), and its client records what it
// received and decided (error_ownership.claim.received, error_ownership.retry.attempt,
// error_ownership.retry.decision) and retries only claimed or missing errors.
func (s *Service) Hooks() *Service { s.hooks = true; return s }

// Retry sets the service's retry policy for all its outbound calls.
func (s *Service) Retry(p Policy) *Service { s.policy = p; return s }

// FailOpen tells the service's hooks that failures of these callees do not
// fail its requests (the hints of the learned model), so an error with only
// such failed calls is coincidental and claimed.
func (s *Service) FailOpen(peers ...string) *Service {
	for _, p := range peers {
		s.failOpen[p] = true
	}
	return s
}

// GRPC makes the service speak gRPC. Operations are named "pkg.Svc/Method"
// and statusAttr (AttrGRPCStatusCode, AttrRPCResponseStatusCode or
// AttrRPCStatusCode) carries the status code on its server spans and on
// the client spans of its callers.
func (s *Service) GRPC(statusAttr string) *Service { s.grpcAttr = statusAttr; return s }

// SplitBatches makes the service export its outbound and internal spans in
// a ResourceSpans of their own, apart from its inbound spans, as an SDK
// flushing two batches does.
func (s *Service) SplitBatches() *Service { s.split = true; return s }

// Handle sets the handler of an operation answered with SERVER spans.
func (s *Service) Handle(op string, h Handler) *Service {
	s.ops[op] = operation{handle: h}
	return s
}

// Consume sets the handler of an operation answered with CONSUMER spans:
// messages published with Request.Publish.
func (s *Service) Consume(op string, h Handler) *Service {
	s.ops[op] = operation{handle: h, consumer: true}
	return s
}

// Response is what a handler returns.
type Response struct {
	kind      responseKind
	code      int
	spanError bool
}

type responseKind uint8

const (
	respOK responseKind = iota
	respFail
	respCode
	respGiveUp
)

// OK is a success: HTTP 200, gRPC OK.
func OK() Response { return Response{} }

// Fail is a server error: HTTP 500, gRPC INTERNAL, a failed message.
func Fail() Response { return Response{kind: respFail} }

// Status responds with an HTTP status or a gRPC status code, according to
// the service's protocol. Whether it is an error follows docs/design.md §4.1: HTTP
// 5xx and the gRPC server-fault codes are; 4xx and the other codes are not.
func Status(code int) Response { return Response{kind: respCode, code: code} }

// GiveUp is the response of a service that stopped waiting: HTTP 504 or
// gRPC DEADLINE_EXCEEDED with error.type "timeout". Its span ends at once,
// with the call it gave up on.
func GiveUp() Response { return Response{kind: respGiveUp} }

// WithSpanError sets span status ERROR whatever the code says, as some
// instrumentation does; the code still decides whether it is an error.
func (r Response) WithSpanError() Response { r.spanError = true; return r }

// Target is one outbound call and how it is made.
type Target struct {
	Service, Operation string
	// Timeout, when positive, is how long the caller waits for each
	// attempt. A late attempt's client span ends at the timeout, failed
	// with error.type "timeout", while the callee carries on.
	Timeout time.Duration
	// LoseContext makes the call without the trace context: its client
	// span starts a trace of its own, with no parent, and the caller's
	// hooks cannot see how it went (broken context).
	LoseContext bool
}

// Result is how a logical call went: its last attempt decides.
type Result struct {
	// Failed reports whether the last attempt failed (a server error or
	// a timeout).
	Failed bool
	// TimedOut reports whether the last attempt timed out.
	TimedOut bool
	// Code is the last attempt's HTTP status or gRPC code; 0 when it
	// timed out.
	Code int
	// Attempts is how many attempts the call made.
	Attempts int
}

// Request is the inbound request a handler answers.
type Request struct {
	// Root is the index of the root request this one serves, from 0.
	Root int
	// Attempt is which attempt of its caller's logical call this request
	// is: 0 for the first, and for root requests and messages.
	Attempt int

	w      *World
	svc    *Service
	op     string
	tr     *traceRec
	parent pcommon.SpanID // parent of the next outbound or internal span
	now    time.Duration  // the virtual clock, from baseTime
	calls  []callRecord   // the logical calls the hooks can see
}

// callRecord is a logical call as the caller's hooks saw it; decision is
// the error_ownership.retry.decision its last attempt records, none without hooks.
type callRecord struct {
	edge     edgeKey
	failed   bool
	timedOut bool
	claim    ownership.Claim
	decision ownership.RetryDecision
}

// Work spends d of the request's time.
func (r *Request) Work(d time.Duration) { r.now += d }

// Call makes a logical call to service's operation with the service's
// retry policy and waits for it.
func (r *Request) Call(service, op string) Result {
	return r.CallWith(Target{Service: service, Operation: op})
}

// CallWith makes the logical call t describes and waits for it.
func (r *Request) CallWith(t Target) Result {
	res, end := r.call(t, r.now)
	r.now = end
	return res
}

// Parallel makes the calls at the same time and waits for all of them.
func (r *Request) Parallel(ts ...Target) []Result {
	results := make([]Result, len(ts))
	start, end := r.now, r.now
	for i, t := range ts {
		var e time.Duration
		results[i], e = r.call(t, start+time.Duration(i)*fanStagger)
		end = max(end, e)
	}
	r.now = end
	return results
}

// Internal records an INTERNAL span called name around fn: the calls fn
// makes are its children.
func (r *Request) Internal(name string, fn func()) {
	slot, id := r.tr.reserve(r.w)
	start := r.now + callGap
	parent := r.parent
	r.parent, r.now = id, start+callGap
	fn()
	end := max(r.now+callGap, start+minSpan)
	r.parent, r.now = parent, end
	r.tr.spans[slot] = spanRecord{
		resource: r.svc.name, batch: r.svc.batchOut(), id: id, parent: parent,
		kind: ptrace.SpanKindInternal, name: name, start: start, end: end,
	}
}

// Publish sends a message to queue: a PRODUCER span "<queue> publish" that
// never fails, and later the consumer service's CONSUMER span for op, the
// PRODUCER span's child. The request does not wait for the consumer.
func (r *Request) Publish(queue, consumer, op string) {
	slot, id := r.tr.reserve(r.w)
	start := r.now + callGap
	end := start + minSpan
	r.now = end
	r.tr.spans[slot] = spanRecord{
		resource: r.svc.name, batch: r.svc.batchOut(), id: id, parent: r.parent,
		kind: ptrace.SpanKindProducer, name: queue + " publish", start: start, end: end,
		attrs: r.tr.keep([]attr{
			str(attrMsgSystem, messagingSystemName),
			str(attrMsgDestination, queue),
			str(attrMsgOperation, "send"),
		}),
	}
	r.w.serve(r.tr, r.w.Service(consumer), op, id, end+queueDelay, r.Root, 0)
}

// DB is a database a service queries in-process.
type DB struct {
	// System is db.system.name, such as "postgresql".
	System string
	// Name is the server.address, and the service.name of the client
	// spans' resource when AsService is set.
	Name string
	// AsService reports the client spans under a resource of their own
	// named Name, as some instrumentation does, instead of the caller's.
	AsService bool
}

// Query records a CLIENT span for a database statement such as
// "SELECT users"; it never fails.
func (r *Request) Query(db DB, statement string) {
	slot, id := r.tr.reserve(r.w)
	start := r.now + callGap
	end := start + minSpan
	r.now = end
	resource, batch := r.svc.name, r.svc.batchOut()
	if db.AsService {
		resource, batch = db.Name, 0
	}
	op, collection, _ := strings.Cut(statement, " ")
	r.tr.spans[slot] = spanRecord{
		resource: resource, batch: batch, id: id, parent: r.parent,
		kind: ptrace.SpanKindClient, name: statement, start: start, end: end,
		attrs: r.tr.keep([]attr{
			str(attrDBSystem, db.System),
			str(attrDBOperation, op),
			str(attrDBCollection, collection),
			str(attrServerAddress, db.Name),
		}),
	}
}

// call makes one logical call starting at start and returns how it went
// and when it ended.
func (r *Request) call(t Target, start time.Duration) (Result, time.Duration) {
	w, caller := r.w, r.svc
	callee := w.Service(t.Service)
	key := budgetKey{caller.name, t.Service, t.Operation}
	b, ok := w.budgets[key]
	if !ok {
		b = newBudget(caller.policy.BudgetPercent)
		w.budgets[key] = b
	}
	b.Deposit()
	edge := edgeKey{caller.name, r.op, t.Service, t.Operation}

	var res Result
	var rec callRecord
	now := start
	for attempt := 0; ; attempt++ {
		tr, parent := r.tr, r.parent
		if t.LoseContext {
			tr, parent = w.newTrace(), pcommon.SpanID{}
		}
		slot, id := tr.reserve(w)
		clientStart := now + callGap
		out := w.serve(tr, callee, t.Operation, id, clientStart+netDelay, r.Root, attempt)
		clientEnd := out.end + netDelay
		timedOut := t.Timeout > 0 && clientEnd-clientStart > t.Timeout
		if timedOut {
			clientEnd = clientStart + t.Timeout
		}
		now = clientEnd
		failed := timedOut || out.failed
		claim := out.claim
		if timedOut {
			claim = ownership.ClaimMissing
		}
		decision := ownership.DecisionNone
		if failed {
			decision = r.decide(attempt, claim, b)
		}
		res = Result{Failed: failed, TimedOut: timedOut, Code: out.code, Attempts: attempt + 1}
		if timedOut {
			res.Code = 0
		}
		rec = callRecord{edge: edge, failed: failed, timedOut: timedOut, claim: claim}
		if caller.hooks {
			rec.decision = decision // what error_ownership.retry.decision records
		}

		sp := spanRecord{
			resource: caller.name, batch: caller.batchOut(), id: id, parent: parent,
			kind: ptrace.SpanKindClient, name: t.Operation, start: clientStart, end: clientEnd,
			statusError: clientError(callee, res),
		}
		a := w.clientAttrs(w.scratch[:0], caller, callee, t.Operation, attempt, res)
		if caller.hooks && failed {
			a = append(a,
				str(ownership.AttrClaimReceived, claim.String()),
				str(ownership.AttrRetryDecision, decision.String()))
		}
		sp.attrs, w.scratch = tr.keep(a), a
		tr.spans[slot] = sp
		if t.LoseContext {
			w.flush(tr)
		}
		if decision != ownership.DecisionRetried {
			break
		}
	}
	if !t.LoseContext {
		r.calls = append(r.calls, rec)
	}
	return res, now
}

// decide is the caller's retry decision after a failed attempt: the
// hooks' own (hooks.Retry), so that the stories and the hooks cannot drift
// apart. A caller without hooks reads no claim.
func (r *Request) decide(attempt int, claim ownership.Claim, b *hooks.Budget) ownership.RetryDecision {
	if !r.svc.hooks {
		claim = ownership.ClaimMissing
	}
	p := r.svc.policy
	return hooks.Retry(claim, p.Attempts > 1, attempt+1 < p.Attempts, b)
}

// claim is the claim the hooks send for a failed request: their own
// decision (hooks.Claim) over the request's calls. A call the caller gave up
// waiting on (its timeout) was cut short, so the request answered while
// waiting on it: the callee owns the error, whatever the edge's mode.
func (r *Request) claim() (ownership.Claim, ownership.Reason) {
	outcomes := make([]hooks.Outcome, len(r.calls))
	timedOut := false
	for i, c := range r.calls {
		outcomes[i] = hooks.Outcome{
			PeerService: c.edge.peer, PeerOperation: c.edge.peerOperation,
			Failed: c.failed, Received: c.claim, Decision: c.decision, InFlight: c.timedOut,
		}
		timedOut = timedOut || c.timedOut
	}
	return hooks.Claim(outcomes, r.modes, timedOut)
}

// modes is what the service's hints say of its edges: fail-open where the
// story says so, unknown elsewhere.
func (r *Request) modes(peerService, _ string) ownership.Mode {
	if r.svc.failOpen[peerService] {
		return ownership.ModeFailOpen
	}
	return ownership.ModeUnknown
}

// served is what serve tells the caller.
type served struct {
	end       time.Duration
	failed    bool
	code      int
	spanError bool
	claim     ownership.Claim
}

// serve runs svc's handler for op as a request that starts at start, the
// child of parent, and records its inbound span.
func (w *World) serve(tr *traceRec, svc *Service, op string, parent pcommon.SpanID, start time.Duration, root, attempt int) served {
	o, ok := svc.ops[op]
	if !ok {
		panic("scenario: service " + svc.name + " has no operation " + strconv.Quote(op))
	}
	slot, id := tr.reserve(w)
	r := &Request{Root: root, Attempt: attempt, w: w, svc: svc, op: op, tr: tr, parent: id, now: start + leadWork}
	resp := o.handle(r)

	out := w.resolve(svc, o.consumer, resp)
	end := r.now + trailWork
	if resp.kind == respGiveUp {
		end = r.now
	}
	end = max(end, start+minSpan)
	out.end = end

	sp := spanRecord{
		resource: svc.name, id: id, parent: parent, kind: ptrace.SpanKindServer,
		name: op, start: start, end: end, statusError: out.spanError,
	}
	a := w.scratch[:0]
	if o.consumer {
		sp.kind = ptrace.SpanKindConsumer
		queue, _, _ := strings.Cut(op, " ")
		a = append(a,
			str(attrMsgSystem, messagingSystemName),
			str(attrMsgDestination, queue),
			str(attrMsgOperation, "process"))
	} else {
		a = svc.inboundAttrs(a, op)
	}
	a = svc.statusAttrs(a, o.consumer, out, resp.kind == respGiveUp)
	if out.failed && svc.hooks {
		var reason ownership.Reason
		out.claim, reason = r.claim()
		a = append(a,
			str(ownership.AttrClaim, out.claim.String()),
			str(ownership.AttrClaimReason, reason.String()))
	}
	sp.attrs, w.scratch = tr.keep(a), a
	tr.spans[slot] = sp
	w.truth.record(svc.name, attempt > 0, out.failed, out.claim, r.calls)
	return out
}

// resolve turns a handler's Response into the code and error of the span.
func (w *World) resolve(svc *Service, consumer bool, resp Response) served {
	var out served
	switch {
	case consumer:
		out.failed = resp.kind != respOK
	case svc.grpcAttr != "":
		switch resp.kind {
		case respFail:
			out.code = GRPCInternal
		case respCode:
			out.code = resp.code
		case respGiveUp:
			out.code = GRPCDeadline
		}
		out.failed = grpcServerFault(out.code)
	default:
		out.code = 200
		switch resp.kind {
		case respFail:
			out.code = 500
		case respCode:
			out.code = resp.code
		case respGiveUp:
			out.code = 504
		}
		out.failed = out.code >= 500
	}
	out.spanError = out.failed || resp.spanError
	return out
}

// inboundAttrs are a server span's request attributes.
func (s *Service) inboundAttrs(a []attr, op string) []attr {
	if s.grpcAttr != "" {
		svc, method := splitRPC(op)
		return append(a, str(attrRPCSystem, "grpc"), str(attrRPCService, svc), str(attrRPCMethod, method))
	}
	method, route := splitHTTP(op)
	return append(a, str(attrHTTPMethod, method), str(AttrHTTPRoute, route))
}

// statusAttrs are a server span's response attributes.
func (s *Service) statusAttrs(a []attr, consumer bool, out served, gaveUp bool) []attr {
	switch {
	case consumer:
		if out.failed {
			a = append(a, str(attrErrorType, errorTypeOther))
		}
		return a
	case s.grpcAttr != "":
		a = append(a, s.grpcCode(out.code))
	default:
		a = append(a, num(attrHTTPStatus, int64(out.code)))
	}
	switch {
	case gaveUp:
		a = append(a, str(attrErrorType, errorTypeTimeout))
	case out.failed && s.grpcAttr != "":
		a = append(a, str(attrErrorType, grpcCodeName(out.code)))
	case out.failed:
		a = append(a, str(attrErrorType, strconv.Itoa(out.code)))
	}
	return a
}

// grpcCode spells a gRPC status code the service's way.
func (s *Service) grpcCode(code int) attr {
	if s.grpcAttr == AttrRPCResponseStatusCode {
		return str(s.grpcAttr, grpcCodeName(code))
	}
	return num(s.grpcAttr, int64(code))
}

// clientAttrs are the attributes of a client span of caller to callee.
func (w *World) clientAttrs(a []attr, caller, callee *Service, op string, attempt int, res Result) []attr {
	if w.PeerAttr != "" {
		a = append(a, str(w.PeerAttr, callee.name))
	}
	a = append(a, str(attrServerAddress, callee.name))
	if callee.grpcAttr != "" {
		svc, method := splitRPC(op)
		a = append(a, str(attrRPCSystem, "grpc"), str(attrRPCService, svc), str(attrRPCMethod, method))
	} else {
		method, route := splitHTTP(op)
		a = append(a, str(attrHTTPMethod, method))
		if w.RouteAttr != "" {
			a = append(a, str(w.RouteAttr, route))
		}
	}
	switch {
	case caller.hooks:
		a = append(a, num(ownership.AttrRetryAttempt, int64(attempt)))
	case w.MarkResends && attempt > 0:
		a = append(a, num(ownership.AttrHTTPResendCount, int64(attempt)))
	}
	switch {
	case res.TimedOut:
		a = append(a, str(attrErrorType, errorTypeTimeout))
	case callee.grpcAttr != "":
		a = append(a, callee.grpcCode(res.Code))
		if res.Code != GRPCOK {
			a = append(a, str(attrErrorType, grpcCodeName(res.Code)))
		}
	default:
		a = append(a, num(attrHTTPStatus, int64(res.Code)))
		if res.Code >= 400 {
			a = append(a, str(attrErrorType, strconv.Itoa(res.Code)))
		}
	}
	return a
}

// clientError is the span status of a client span, after the semantic
// conventions for the client side: every timeout, HTTP status >= 400 and
// gRPC code other than OK is an error there, whether or not docs/design.md §4.1
// counts it as one.
func clientError(callee *Service, res Result) bool {
	switch {
	case res.TimedOut:
		return true
	case callee.grpcAttr != "":
		return res.Code != GRPCOK
	}
	return res.Code >= 400
}

// batchOut is the batch a service's outbound and internal spans go in.
func (s *Service) batchOut() uint8 {
	if s.split {
		return 1
	}
	return 0
}

func splitHTTP(op string) (method, route string) {
	method, route, ok := strings.Cut(op, " ")
	if !ok {
		return "GET", op
	}
	return method, route
}

func splitRPC(op string) (service, method string) {
	i := strings.LastIndexByte(op, '/')
	if i < 0 {
		return op, op
	}
	return op[:i], op[i+1:]
}

// Roots sends n root requests for service's op, one after the other.
func (w *World) Roots(n int, service, op string) {
	for range n {
		w.Root(service, op)
	}
}

// Root sends the next root request for service's op, in a trace of its
// own that starts at 2026-11-01T00:00:00Z + i*RootSpacing for the i-th
// root request (i from 0).
func (w *World) Root(service, op string) {
	i := w.roots
	w.roots++
	tr := w.newTrace()
	w.serve(tr, w.Service(service), op, pcommon.SpanID{}, time.Duration(i)*RootSpacing, i, 0)
	w.flush(tr)
}

// Traces returns the spans recorded so far: per trace, one ResourceSpans
// per service and batch, in the order the traces finished.
func (w *World) Traces() ptrace.Traces { return w.out }

// Scenario packs the World's traces with a story and its expected figures.
func (w *World) Scenario(story string, e Expected) Scenario {
	return Scenario{Name: w.name, Story: story, Traces: w.out, Expected: e, truth: w.truth}
}

// attr is one span attribute, a string or an int.
type attr struct {
	key   string
	str   string
	num   int64
	isNum bool
}

func str(k, v string) attr { return attr{key: k, str: v} }
func num(k string, v int64) attr {
	return attr{key: k, num: v, isNum: true}
}

// spanRecord is a span until its trace is flushed.
type spanRecord struct {
	resource    string
	batch       uint8
	id, parent  pcommon.SpanID
	kind        ptrace.SpanKind
	name        string
	start, end  time.Duration
	statusError bool
	attrs       []attr
}

// traceRec collects one trace's spans in the order they started.
type traceRec struct {
	id    pcommon.TraceID
	spans []spanRecord
	arena []attr // the spans' attributes
}

// keep copies a span's attributes into the trace's arena.
func (tr *traceRec) keep(a []attr) []attr {
	if cap(tr.arena)-len(tr.arena) < len(a) {
		// A new block: the spans kept so far hold on to the old one.
		tr.arena = make([]attr, 0, max(256, 2*cap(tr.arena), len(a)))
	}
	lo := len(tr.arena)
	tr.arena = append(tr.arena, a...)
	return tr.arena[lo:len(tr.arena):len(tr.arena)]
}

func (w *World) newTrace() *traceRec {
	w.traces++
	var tr *traceRec
	if n := len(w.free); n > 0 {
		tr, w.free = w.free[n-1], w.free[:n-1]
	} else {
		tr = &traceRec{}
	}
	binary.BigEndian.PutUint64(tr.id[:8], w.idPrefix)
	binary.BigEndian.PutUint64(tr.id[8:], w.traces)
	return tr
}

// reserve takes the next span ID and a place for the span, so a parent is
// listed before its children though it is recorded after them.
func (tr *traceRec) reserve(w *World) (slot int, id pcommon.SpanID) {
	w.spans++
	binary.BigEndian.PutUint64(id[:], w.idPrefix&^(1<<32-1)|w.spans&(1<<32-1))
	tr.spans = append(tr.spans, spanRecord{})
	return len(tr.spans) - 1, id
}

// group is one ResourceSpans of a trace being flushed.
type group struct {
	resource string
	batch    uint8
	spans    ptrace.SpanSlice
}

// flush writes a finished trace to the World's output.
func (w *World) flush(tr *traceRec) {
	base := pcommon.Timestamp(baseTime.UnixNano())
	groups := w.groups[:0]
	for i := range tr.spans {
		s := &tr.spans[i]
		var g *group
		for j := range groups {
			if groups[j].resource == s.resource && groups[j].batch == s.batch {
				g = &groups[j]
				break
			}
		}
		if g == nil {
			rs := w.out.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr(attrServiceName, s.resource)
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(scopeName)
			groups = append(groups, group{resource: s.resource, batch: s.batch, spans: ss.Spans()})
			g = &groups[len(groups)-1]
		}
		sp := g.spans.AppendEmpty()
		sp.SetTraceID(tr.id)
		sp.SetSpanID(s.id)
		sp.SetParentSpanID(s.parent)
		sp.SetName(s.name)
		sp.SetKind(s.kind)
		sp.SetStartTimestamp(base + pcommon.Timestamp(s.start))
		sp.SetEndTimestamp(base + pcommon.Timestamp(s.end))
		if s.statusError {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
		attrs := sp.Attributes()
		attrs.EnsureCapacity(len(s.attrs))
		for _, a := range s.attrs {
			if a.isNum {
				attrs.PutInt(a.key, a.num)
			} else {
				attrs.PutStr(a.key, a.str)
			}
		}
	}
	w.groups = groups[:0]
	clear(tr.spans)
	tr.spans, tr.arena = tr.spans[:0], tr.arena[:0]
	w.free = append(w.free, tr)
}

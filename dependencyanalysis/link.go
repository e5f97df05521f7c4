// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"cmp"
	"encoding/binary"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

// inFlightSlack is how close to a request's end an outbound attempt may end
// and still count as in flight when the request gave up: instrumentation
// ends the cancelled client span a moment after the server span.
const inFlightSlack = pcommon.Timestamp(time.Millisecond)

// Request is one inbound span (SERVER or CONSUMER) and the logical calls it made.
type Request struct {
	// Span is the inbound span's index in Trace.Spans.
	Span int32
	// Parent is the index in Trace.Requests of the request that made this
	// one, or -1.
	Parent int32
	// CalledBy is the index in Trace.Spans of the outbound attempt that
	// made this request, or -1 when it is a root or its caller is not in view.
	CalledBy int32
	// Depth is 0 for the trace's root request, 1 for its callees, and so on;
	// -1 when the chain up to the root is not in view.
	Depth int16
	// Retry reports whether CalledBy was a retry.
	Retry bool
	// Calls is the range of Trace.Calls this request made.
	CallsStart, CallsEnd int32
}

// Call is one logical call: the attempts a request made to one destination,
// the first and its retries.
type Call struct {
	// Request is the index in Trace.Requests of the caller.
	Request int32
	// PeerService and PeerOperation name the callee as a service graph
	// pairs client and server spans: the callee's own service.name and
	// operation when an attempt's inbound span is in the trace; else the
	// peer attributes (service.peer.name, peer.service …) and the
	// operation the caller names; else the address.
	PeerService, PeerOperation Symbol
	// PeerAddress is where the last attempt went (server.address:port).
	PeerAddress Symbol
	// AttemptsStart and AttemptsEnd give the range of Trace.Attempts.
	AttemptsStart, AttemptsEnd int32
	// Failed: the last attempt failed.
	Failed bool
	// InFlight: an attempt that had not completed successfully was still
	// running when the request ended.
	InFlight bool
	// Claim is the claim received with the last attempt.
	Claim ownership.Claim
	// Decision is the last retry decision recorded in the call.
	Decision ownership.RetryDecision
	// RetriedUnclaimed counts the call's retries that followed an attempt
	// whose callee unclaimed its error: retries error ownership exists to
	// prevent, made by a caller without the hooks or one ignoring the claim.
	RetriedUnclaimed uint8

	// dest is where the caller's attempts say they went; a retry joins the
	// call with the same dest, since only some attempts may reach the
	// callee and show its name.
	dest callDest
	// last is the span index of the call's latest attempt, and attempts
	// their count, while calls are being grouped.
	last, attempts int32
}

// callDest is a destination as the caller's own span names it.
type callDest struct {
	peer   Symbol // PeerService, else the span's own service, else PeerAddress
	op     Symbol // the caller's PeerOperation, when target is 0
	target uint32 // Span.Target
}

// Attempts reports how many attempts the call made.
func (c *Call) Attempts() int { return int(c.AttemptsEnd - c.AttemptsStart) }

// LinkStats counts what could not be linked. All counts are of spans.
type LinkStats struct {
	// Spans is how many spans the trace had.
	Spans uint64 `json:"spans"`
	// Duplicates repeat an earlier span's ID; they are ignored.
	Duplicates uint64 `json:"duplicate_span_ids"`
	// SelfParents name themselves as parent; they are treated as roots.
	SelfParents uint64 `json:"self_parents"`
	// Cycles are spans whose ancestry loops; the loop is cut there.
	Cycles uint64 `json:"cycles"`
	// Orphans have a parent ID that is not in the trace (not yet arrived,
	// sampled out, or from a service that exports elsewhere).
	Orphans uint64 `json:"orphans"`
	// RootOutbound are CLIENT or PRODUCER spans with no inbound span above
	// them: a client at the edge, or trace context lost inside a service
	// (broken context), where the service claims errors it did not cause.
	RootOutbound uint64 `json:"root_outbound"`
}

// Add adds o's counts to s.
func (s *LinkStats) Add(o LinkStats) {
	s.Spans += o.Spans
	s.Duplicates += o.Duplicates
	s.SelfParents += o.SelfParents
	s.Cycles += o.Cycles
	s.Orphans += o.Orphans
	s.RootOutbound += o.RootOutbound
}

// Trace is one trace's spans linked into requests and logical calls. It is
// owned by the Analyzer that made it and valid until its next Link.
type Trace struct {
	ID       pcommon.TraceID
	Spans    []Span
	Requests []Request
	Calls    []Call
	// Attempts holds span indexes, grouped by call, in start order.
	Attempts []int32
	// Callee maps an outbound attempt's span index to the index in
	// Requests of the request it made, or -1.
	Callee []int32
	Link   LinkStats
	// Sampling is how the trace was sampled, the strictest of its spans'
	// classes (SetSampling), and Weight its adjusted count: how many
	// traces of all traffic it stands for. Link sets SamplingNone and 1.
	Sampling SamplingClass
	Weight   float64
	// Incomplete says why the trace is not whole, IncompleteNone when it
	// is. An incomplete trace is counted apart (Stats.Incomplete), never
	// judged (Judge gives no verdicts) nor learned from (EdgeModel.Observe).
	Incomplete Incomplete
}

// Incomplete is why a trace is set apart as not whole (docs/design.md §8.1).
type Incomplete uint8

const (
	// IncompleteNone means the trace is whole as far as can be told.
	IncompleteNone Incomplete = iota
	// IncompleteMissingParent means its spans form more than one tree, so a
	// span between them never came (sampled out, lost, or late).
	IncompleteMissingParent
	// IncompleteMissingCallee means a call was answered by a callee known to be
	// instrumented whose inbound span is not in the trace (sampled out
	// below, or exported elsewhere): EdgeModel.CheckCallees.
	IncompleteMissingCallee
	// IncompleteSampling means a span's sampling threshold is contradicted by
	// its randomness, so the trace's weight is unknown.
	IncompleteSampling
	numIncomplete
)

var incompleteNames = [...]string{"", "missing_parent", "missing_callee", "inconsistent_sampling"}

// String returns the reason as telemetry and the store label it.
func (r Incomplete) String() string {
	if int(r) < len(incompleteNames) {
		return incompleteNames[r]
	}
	return ""
}

// IncompleteReasons lists the reasons a trace is set apart, in order.
func IncompleteReasons() []Incomplete {
	return []Incomplete{IncompleteMissingParent, IncompleteMissingCallee, IncompleteSampling}
}

// SetSampling records how the trace was sampled: c is the strictest class
// of its spans. A trace whose weight is unknown is set apart.
func (t *Trace) SetSampling(c SamplingClass) {
	t.Sampling, t.Weight = c, c.Weight()
	if c == SamplingInconsistent && t.Incomplete == IncompleteNone {
		t.Incomplete = IncompleteSampling
	}
}

// CallAttempts returns the span indexes of c's attempts.
func (t *Trace) CallAttempts(c *Call) []int32 { return t.Attempts[c.AttemptsStart:c.AttemptsEnd] }

// RequestCalls returns the logical calls r made.
func (t *Trace) RequestCalls(r *Request) []Call { return t.Calls[r.CallsStart:r.CallsEnd] }

// failedCalls counts the failed logical calls among calls: a call fails
// "alone" when it is the only one, which the edge model and the figures
// both need to tell a tolerated failure from a confounded one.
func failedCalls(calls []Call) int {
	n := 0
	for i := range calls {
		if calls[i].Failed {
			n++
		}
	}
	return n
}

// RequestSpan returns r's inbound span.
func (t *Trace) RequestSpan(r *Request) *Span { return &t.Spans[r.Span] }

// Analyzer links traces and judges them, reusing its buffers between
// traces. It is not safe for concurrent use: give each goroutine its own.
type Analyzer struct {
	tr Trace

	slots    []int32 // span index + 1 by slotOf(SpanID); 0 is empty
	slotMask uint64
	parent   []int32
	encl     []int32 // nearest inbound strict ancestor, -1 none
	state    []uint8
	stack    []int32
	wrapper  []bool
	reqOf    []int32
	pending  []attemptRef
	verdicts []Verdict
	failed   []int32
	latest   map[callDest]int32 // groupCalls' index of a big request's calls
}

type attemptRef struct {
	req  int32
	span int32
}

// NewAnalyzer returns an Analyzer.
func NewAnalyzer() *Analyzer {
	return &Analyzer{}
}

// Link builds the requests and logical calls of one trace's spans. Spans
// are linked by their IDs and kinds, not by resource: an outbound span
// belongs to its nearest inbound ancestor whatever its service.name, and a
// service's spans may come from several resources. Link never fails; what
// it cannot link it counts in Trace.Link. id is the trace's ID.
func (a *Analyzer) Link(id pcommon.TraceID, spans []Span) *Trace {
	n := len(spans)
	t := &a.tr
	*t = Trace{
		ID:       id,
		Spans:    spans,
		Requests: t.Requests[:0],
		Calls:    t.Calls[:0],
		Attempts: t.Attempts[:0],
		Callee:   resize(t.Callee, n, -1),
		Weight:   1,
	}
	t.Link.Spans = uint64(n)
	a.parent = resize(a.parent, n, -1)
	a.encl = resize(a.encl, n, -1)
	a.reqOf = resize(a.reqOf, n, -1)
	a.state = resize(a.state, n, 0)
	a.wrapper = resize(a.wrapper, n, false)

	a.indexSpans()
	for i := range spans {
		s := &spans[i]
		if a.state[i] == duplicate || s.ParentID.IsEmpty() {
			continue
		}
		if s.ParentID == s.SpanID {
			t.Link.SelfParents++
			continue
		}
		if p := a.find(s.ParentID); p >= 0 {
			a.parent[i] = p
		} else {
			t.Link.Orphans++
		}
	}
	a.enclosingRequests()
	if a.disconnected() {
		t.Incomplete = IncompleteMissingParent
	}

	// Requests, in span order.
	for i := range spans {
		if a.state[i] != duplicate && spans[i].Kind.Inbound() {
			a.reqOf[i] = int32(len(t.Requests))
			t.Requests = append(t.Requests, Request{Span: int32(i), Parent: -1, CalledBy: -1, Depth: -1})
		}
	}
	for ri := range t.Requests {
		r := &t.Requests[ri]
		if e := a.encl[r.Span]; e >= 0 {
			r.Parent = a.reqOf[e]
		}
		if p := a.parent[r.Span]; p >= 0 && spans[p].Kind.Outbound() {
			r.CalledBy = p
			if t.Callee[p] < 0 {
				t.Callee[p] = int32(ri)
			}
		}
	}
	a.depths()

	// Outbound attempts: an outbound span whose outbound children belong to
	// the same request is a wrapper around them, not an attempt.
	for i := range spans {
		if p := a.parent[i]; p >= 0 && spans[i].Kind.Outbound() && spans[p].Kind.Outbound() && a.encl[i] == a.encl[p] {
			a.wrapper[p] = true
		}
	}
	a.pending = a.pending[:0]
	for i := range spans {
		if a.state[i] == duplicate || a.wrapper[i] || !spans[i].Kind.Outbound() {
			continue
		}
		e := a.encl[i]
		if e < 0 {
			// An orphan (or a span below one) is counted as such, not
			// again as broken context: only a span whose ancestry ends
			// at a true root is.
			if a.rooted(int32(i)) {
				t.Link.RootOutbound++
			}
			continue
		}
		a.pending = append(a.pending, attemptRef{req: a.reqOf[e], span: int32(i)})
	}
	slices.SortFunc(a.pending, func(x, y attemptRef) int {
		if c := cmp.Compare(x.req, y.req); c != 0 {
			return c
		}
		if c := cmp.Compare(spans[x.span].Start, spans[y.span].Start); c != 0 {
			return c
		}
		return cmp.Compare(x.span, y.span)
	})
	a.groupCalls()
	return t
}

// disconnected reports whether the trace's spans form more than one tree:
// tops whose parents (absent, or none) differ. Several tops under one
// absent parent are a whole trace whose caller did not export its span,
// such as a load generator's or a browser's.
func (a *Analyzer) disconnected() bool {
	spans := a.tr.Spans
	var first pcommon.SpanID
	seen := false
	for i := range spans {
		if a.parent[i] >= 0 || a.state[i] == duplicate {
			continue
		}
		p := spans[i].ParentID
		if p == spans[i].SpanID {
			p = pcommon.SpanID{}
		}
		switch {
		case !seen:
			first, seen = p, true
		case p != first:
			return true
		}
	}
	return false
}

// duplicate is the state of a span ignored for its repeated ID.
const duplicate = 3

// indexSpans marks duplicate span IDs and builds the ID index find uses:
// an open-addressing table of span positions, sized to a power of two at
// least twice the trace, so that a lookup is a multiply and a probe or two
// rather than a string-keyed map access.
func (a *Analyzer) indexSpans() {
	spans := a.tr.Spans
	size := 16
	for size < 2*len(spans) {
		size *= 2
	}
	a.slots = resize(a.slots, size, 0)
	a.slotMask = uint64(size - 1)
	for i := range spans {
		id := spans[i].SpanID
		for h := slotOf(id) & a.slotMask; ; h = (h + 1) & a.slotMask {
			j := a.slots[h]
			if j == 0 {
				a.slots[h] = int32(i) + 1
				break
			}
			if spans[j-1].SpanID == id {
				a.tr.Link.Duplicates++
				a.state[i] = duplicate
				break
			}
		}
	}
}

// find returns the index of the first span with ID id, or -1.
func (a *Analyzer) find(id pcommon.SpanID) int32 {
	spans := a.tr.Spans
	for h := slotOf(id) & a.slotMask; ; h = (h + 1) & a.slotMask {
		j := a.slots[h]
		if j == 0 {
			return -1
		}
		if spans[j-1].SpanID == id {
			return j - 1
		}
	}
}

// slotOf spreads a span ID over the table. Span IDs are random, but not
// always: some clients and tests count, in either end of the ID, so every
// bit is mixed into every other (SplitMix64's finalizer) before the table
// takes the low ones; a counter in the high bytes once put every span of a
// trace into one probe run, which made linking quadratic.
func slotOf(id pcommon.SpanID) uint64 {
	h := binary.LittleEndian.Uint64(id[:])
	h = (h ^ h>>30) * 0xBF58476D1CE4E5B9
	h = (h ^ h>>27) * 0x94D049BB133111EB
	return h ^ h>>31
}

// enclosingRequests sets encl for every span, walking parents with memo.
// A loop in the ancestry is cut at the span where the walk finds it.
func (a *Analyzer) enclosingRequests() {
	const (
		unvisited = 0
		visiting  = 1
		done      = 2
	)
	spans := a.tr.Spans
	for i := range spans {
		if a.state[i] != unvisited {
			continue
		}
		a.stack = a.stack[:0]
		j := int32(i)
		for {
			a.stack = append(a.stack, j)
			a.state[j] = visiting
			p := a.parent[j]
			if p < 0 {
				a.encl[j] = -1
				break
			}
			if spans[p].Kind.Inbound() {
				a.encl[j] = p
				break
			}
			if a.state[p] == done {
				a.encl[j] = a.encl[p]
				break
			}
			if a.state[p] == visiting {
				a.tr.Link.Cycles++
				a.parent[j] = -1
				a.encl[j] = -1
				break
			}
			j = p
		}
		// Unwind: each span on the stack takes its parent's answer.
		for k := len(a.stack) - 1; k >= 0; k-- {
			s := a.stack[k]
			a.state[s] = done
			if k < len(a.stack)-1 {
				a.encl[s] = a.encl[a.stack[k+1]]
			}
		}
	}
	// state is reused below only to mark duplicates, which never reach here.
}

// depths sets Request.Depth from the root request down.
func (a *Analyzer) depths() {
	const visiting = -3
	t := &a.tr
	for ri := range t.Requests {
		if t.Requests[ri].Depth >= 0 {
			continue
		}
		a.stack = a.stack[:0]
		j := int32(ri)
		var depth int16 // set by each way out of the loop below
		for {
			r := &t.Requests[j]
			if r.Depth >= 0 || r.Depth == -2 {
				depth = r.Depth
				break
			}
			if r.Depth == visiting {
				// Requests that call each other in a loop: the trace's
				// IDs are corrupt, so no depth is known.
				t.Link.Cycles++
				depth = -2
				break
			}
			r.Depth = visiting
			a.stack = append(a.stack, j)
			if r.Parent < 0 {
				depth = -2 // the chain to the root is not in view
				if a.reachesRoot(r.Span) {
					depth = -1 // the root: its own depth is 0 below
				}
				break
			}
			j = r.Parent
		}
		for k := len(a.stack) - 1; k >= 0; k-- {
			r := &t.Requests[a.stack[k]]
			if depth == -2 {
				r.Depth = -2
				continue
			}
			depth++
			r.Depth = depth
		}
	}
	for ri := range t.Requests {
		if t.Requests[ri].Depth == -2 {
			t.Requests[ri].Depth = -1
		}
	}
}

// reachesRoot reports whether span i's ancestry ends at a span that has no
// parent, rather than at one whose parent is missing or cut from a loop. A
// root request may sit below a client span (a load generator, a browser).
func (a *Analyzer) reachesRoot(i int32) bool {
	top, ok := a.top(i)
	if !ok {
		return false
	}
	s := &a.tr.Spans[top]
	return s.ParentID.IsEmpty() || s.ParentID == s.SpanID
}

// rooted reports whether span i's ancestry ends at a span without a parent
// ID: neither an orphan nor a self-parent, each counted on its own.
func (a *Analyzer) rooted(i int32) bool {
	top, ok := a.top(i)
	return ok && a.tr.Spans[top].ParentID.IsEmpty()
}

// top returns the topmost ancestor of span i, or false when the walk finds
// a loop that linking did not cut.
func (a *Analyzer) top(i int32) (int32, bool) {
	for steps := 0; steps <= len(a.tr.Spans); steps++ {
		p := a.parent[i]
		if p < 0 {
			return i, true
		}
		i = p
	}
	return -1, false
}

// groupCalls turns the sorted attempts into logical calls. An attempt
// joins the latest call of its request to the same destination (callDest)
// when it says it is a retry (attempt number ≥ 1) whatever ran in between,
// or, when nothing says, when that call's last attempt failed and ended
// before it started. The call is then named after its callee (name).
func (a *Analyzer) groupCalls() {
	t := &a.tr
	spans := t.Spans
	attempts := t.Attempts[:0]
	for lo := 0; lo < len(a.pending); {
		req := a.pending[lo].req
		hi := lo
		for hi < len(a.pending) && a.pending[hi].req == req {
			hi++
		}
		r := &t.Requests[req]
		reqSpan := &spans[r.Span]
		first := int32(len(t.Calls))
		r.CallsStart = first
		// Attempt span indexes are gathered per call in a second pass, so
		// first record each attempt's call (reusing a.stack).
		a.stack = a.stack[:0]
		byDest := hi-lo > linearCalls
		if byDest {
			if a.latest == nil {
				a.latest = make(map[callDest]int32)
			}
			clear(a.latest)
		}
		for _, ref := range a.pending[lo:hi] {
			s := &spans[ref.span]
			// An outbound span that reports under another service.name
			// than its request (an in-process database client reporting as
			// the database) names its callee better than an address does.
			dest := callDest{peer: s.PeerService, target: s.Target}
			if dest.peer == NoSymbol && s.Service != reqSpan.Service {
				dest.peer = s.Service
			}
			if dest.peer == NoSymbol {
				dest.peer = s.PeerAddress
			}
			if dest.target == 0 {
				dest.op = s.PeerOperation
			}
			call := int32(-1)
			if byDest {
				if c, ok := a.latest[dest]; ok {
					call = c
				}
			} else {
				for c := int32(len(t.Calls)) - 1; c >= first; c-- {
					if t.Calls[c].dest == dest {
						call = c
						break
					}
				}
			}
			if call >= 0 {
				cl := &t.Calls[call]
				retry := s.Attempt >= 1 ||
					(s.Attempt == AttemptUnknown && cl.Failed && spans[cl.last].End() <= s.Start)
				if !retry {
					call = -1
				}
			}
			if call < 0 {
				call = int32(len(t.Calls))
				t.Calls = append(t.Calls, Call{Request: req, dest: dest})
				if byDest {
					a.latest[dest] = call
				}
			}
			cl := &t.Calls[call]
			cl.last = ref.span
			cl.attempts++
			if cl.attempts > 1 && cl.Claim == ownership.ClaimUnclaimed && cl.RetriedUnclaimed < 255 {
				cl.RetriedUnclaimed++
			}
			cl.Failed = s.Failed()
			cl.Claim = s.ClaimReceived()
			if callee := t.Callee[ref.span]; cl.Claim == ownership.ClaimMissing && callee >= 0 {
				// A caller without the hooks records no claim received;
				// the callee's own server span says what it sent.
				cl.Claim = spans[t.Requests[callee].Span].Claim()
			}
			if d := s.Decision(); d != ownership.DecisionNone {
				cl.Decision = d
			}
			if s.Start < reqSpan.End() && s.End()+inFlightSlack >= reqSpan.End() && !s.Completed() {
				cl.InFlight = true
			}
			if callee := t.Callee[ref.span]; callee >= 0 && (s.Attempt >= 1 || cl.attempts > 1) {
				t.Requests[callee].Retry = true
			}
			a.stack = append(a.stack, call)
		}
		r.CallsEnd = int32(len(t.Calls))
		// Lay out the attempts call by call.
		offset := int32(len(attempts))
		for c := first; c < r.CallsEnd; c++ {
			cl := &t.Calls[c]
			cl.AttemptsStart, cl.AttemptsEnd = offset, offset
			offset += cl.attempts
		}
		attempts = slices.Grow(attempts, hi-lo)[:offset]
		for k, ref := range a.pending[lo:hi] {
			cl := &t.Calls[a.stack[k]]
			attempts[cl.AttemptsEnd] = ref.span
			cl.AttemptsEnd++
		}
		t.Attempts = attempts
		for c := first; c < r.CallsEnd; c++ {
			a.name(&t.Calls[c])
		}
		lo = hi
	}
	t.Attempts = attempts
}

// linearCalls is how many attempts a request may make before groupCalls
// finds their calls by a map rather than by scanning the request's calls.
const linearCalls = 16

// name names c's callee as a service graph would: the service.name and
// operation of the latest attempt's inbound span in the trace, if any
// attempt reached one; else the peer attributes or the address, with the
// operation as the caller names it.
func (a *Analyzer) name(c *Call) {
	t := &a.tr
	last := &t.Spans[c.last]
	c.PeerService, c.PeerOperation, c.PeerAddress = c.dest.peer, last.PeerOperation, last.PeerAddress
	for _, ai := range slices.Backward(t.CallAttempts(c)) {
		if callee := t.Callee[ai]; callee >= 0 {
			in := &t.Spans[t.Requests[callee].Span]
			c.PeerService, c.PeerOperation = in.Service, in.Operation
			return
		}
	}
}

// resize returns s with length n, every element set to v.
func resize[T any](s []T, n int, v T) []T {
	if cap(s) < n {
		s = make([]T, n)
	}
	s = s[:n]
	for i := range s {
		s[i] = v
	}
	return s
}

// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

// OperationKey names a service's inbound operation.
type OperationKey struct {
	Service, Operation Symbol
}

// Figure is what a figure counts in: requests or calls seen (uint64), a
// correction of them (int64), or their estimate of all traffic (float64),
// each trace by its adjusted count.
type Figure interface{ ~uint64 | ~int64 | ~float64 }

// OperationCounts are one inbound operation's figures, seen or estimated.
type OperationCounts[T Figure] struct {
	// Served counts inbound requests, retries included.
	Served T
	// RetriesReceived counts requests whose calling attempt was a retry.
	RetriesReceived T
	// Failed counts requests that ended in an error.
	Failed T
	// Verdicts counts failed requests by VerdictKind.
	Verdicts [4]T
	// Claims is the claim-accuracy confusion matrix: the claim the service
	// sent (error_ownership.claim.sent; ownership.Claim) by the verdict (VerdictKind).
	Claims [3][4]T
	// ClaimsCorrect counts failed requests whose sent claim is the one the
	// rules expect.
	ClaimsCorrect T
	// ExpectedClaims counts failed requests by the claim the rules expect.
	ExpectedClaims [3]T
}

// count counts a verdict of kind whose service sent sent where the rules
// expect expected, n times.
func (c *OperationCounts[T]) count(kind VerdictKind, sent, expected ownership.Claim, n T) {
	c.Failed += n
	c.Verdicts[kind] += n
	c.Claims[sent][kind] += n
	c.ExpectedClaims[expected] += n
	if sent == expected {
		c.ClaimsCorrect += n
	}
}

func (c *OperationCounts[T]) merge(o *OperationCounts[T]) {
	c.Served += o.Served
	c.RetriesReceived += o.RetriesReceived
	c.Failed += o.Failed
	c.ClaimsCorrect += o.ClaimsCorrect
	for i := range o.Verdicts {
		c.Verdicts[i] += o.Verdicts[i]
	}
	for i := range o.Claims {
		for j := range o.Claims[i] {
			c.Claims[i][j] += o.Claims[i][j]
		}
	}
	for i := range o.ExpectedClaims {
		c.ExpectedClaims[i] += o.ExpectedClaims[i]
	}
}

// OperationStats are one inbound operation's figures: the requests seen,
// and (Est) the same figures as estimates of all traffic, each trace
// weighing its adjusted count (docs/design.md §8.1), apart by
// SamplingMethod as the span-metrics connector keeps them: Est[SamplingCounted]
// counts the traces without sampling information, one each, and
// Est[SamplingExtrapolated] weighs the others. Ratios are of estimates.
type OperationStats struct {
	OperationCounts[uint64]
	Est [2]OperationCounts[float64]
	// Extrapolated counts the served requests whose trace's weight came
	// from its sampling (SamplingExtrapolated).
	Extrapolated uint64
}

// Estimate returns op's estimates of all traffic, both methods summed.
func (op *OperationStats) Estimate() OperationCounts[float64] {
	e := op.Est[SamplingCounted]
	e.merge(&op.Est[SamplingExtrapolated])
	return e
}

// VerdictCounts are the figures verdicts add to an operation — OperationStats'
// Failed, Verdicts, Claims, ClaimsCorrect and ExpectedClaims; Served and
// RetriesReceived stay 0 — signed, so that they can take a verdict back as
// well as add one.
type VerdictCounts struct {
	OperationCounts[int64]
	// Est are the same figures as estimates of all traffic, by
	// SamplingMethod (OperationStats.Est).
	Est [2]OperationCounts[float64]
}

// add adds n verdicts of kind whose service sent sent where the rules
// expect expected, of a trace of adjusted count w by method m.
func (c *VerdictCounts) add(kind VerdictKind, sent, expected ownership.Claim, n int64, w float64, m SamplingMethod) {
	c.count(kind, sent, expected, n)
	c.Est[m].count(kind, sent, expected, float64(n)*w)
}

// VerdictCounts returns op's verdict figures, signed.
func (op *OperationStats) VerdictCounts() VerdictCounts {
	var c VerdictCounts
	c.Failed, c.ClaimsCorrect = toSigned(op.Failed), toSigned(op.ClaimsCorrect)
	for i, n := range op.Verdicts {
		c.Verdicts[i] = toSigned(n)
	}
	for i := range op.Claims {
		for j, n := range op.Claims[i] {
			c.Claims[i][j] = toSigned(n)
		}
	}
	for i, n := range op.ExpectedClaims {
		c.ExpectedClaims[i] = toSigned(n)
	}
	c.Est = op.Est
	for m := range c.Est {
		c.Est[m].Served, c.Est[m].RetriesReceived = 0, 0 // not verdict figures
	}
	return c
}

// toSigned converts a count; counts past int64's range, which no real
// traffic reaches, saturate instead of turning negative.
func toSigned(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// Merge adds o to c.
func (c *VerdictCounts) Merge(o *VerdictCounts) {
	c.merge(&o.OperationCounts)
	for m := range c.Est {
		c.Est[m].merge(&o.Est[m])
	}
}

// EdgeTraffic are one edge's traffic figures, seen or estimated.
type EdgeTraffic[T Figure] struct {
	// Calls counts logical calls and FailedCalls those whose last attempt failed.
	Calls, FailedCalls T
	// Attempts counts outbound spans; Retries those after a call's first.
	Attempts, Retries T
	// Decisions counts attempts by their ownership.RetryDecision;
	// Suppressed() ones are the retries the hooks held back.
	Decisions [6]T
	// CallFailedRequestFailed counts failed calls whose request failed too,
	// and CallOKRequestFailed successful calls whose request failed anyway.
	CallFailedRequestFailed, CallOKRequestFailed T
	// FailedAlone counts failed calls that were the only failed call of
	// their request, and FailedAloneRequestFailed those whose request
	// failed too: the edge model's evidence (EdgeCounts), so that models
	// from several collectors merge by summing.
	FailedAlone, FailedAloneRequestFailed T
	// RetriesAfterUnclaimed counts retries sent after an attempt whose
	// callee unclaimed its error (Call.RetriedUnclaimed).
	RetriesAfterUnclaimed T
}

func (e *EdgeTraffic[T]) merge(o *EdgeTraffic[T]) {
	e.Calls += o.Calls
	e.FailedCalls += o.FailedCalls
	e.Attempts += o.Attempts
	e.Retries += o.Retries
	e.CallFailedRequestFailed += o.CallFailedRequestFailed
	e.CallOKRequestFailed += o.CallOKRequestFailed
	e.FailedAlone += o.FailedAlone
	e.FailedAloneRequestFailed += o.FailedAloneRequestFailed
	e.RetriesAfterUnclaimed += o.RetriesAfterUnclaimed
	for i := range o.Decisions {
		e.Decisions[i] += o.Decisions[i]
	}
}

// EdgeStats are one edge's traffic figures: the calls seen, and (Est) their
// estimate of all traffic, by SamplingMethod (OperationStats.Est).
type EdgeStats struct {
	EdgeTraffic[uint64]
	Est [2]EdgeTraffic[float64]
}

// Estimate returns e's estimates of all traffic, both methods summed.
func (e *EdgeStats) Estimate() EdgeTraffic[float64] {
	t := e.Est[SamplingCounted]
	t.merge(&e.Est[SamplingExtrapolated])
	return t
}

// AddressKey names an address a service used to reach a peer service.
type AddressKey struct {
	Service, PeerService, Address Symbol
}

// AuditEntry records one coincidental error: the service failed for its
// own reason while a dependency it tolerates failed too.
type AuditEntry struct {
	Time          pcommon.Timestamp
	TraceID       pcommon.TraceID
	SpanID        pcommon.SpanID
	Service       Symbol
	Operation     Symbol
	PeerService   Symbol // the first failed fail-open dependency
	PeerOperation Symbol
	ClaimSent     ownership.Claim
	ClaimExpected ownership.Claim
	// Weight is the request's trace's adjusted count: how many such errors
	// of all traffic the entry stands for.
	Weight float64
}

// AuditKey names the audit entry of one request: its trace and span, and
// its time, which says where a store keeps it.
type AuditKey struct {
	Time    pcommon.Timestamp
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
}

// Suppressed reports how many retries the hooks held back on the edge.
func (e *EdgeStats) Suppressed() uint64 {
	return e.Decisions[ownership.DecisionSuppressedUnclaimed] + e.Decisions[ownership.DecisionSuppressedBudget]
}

// DepthKey names the requests a service served at one depth below a root operation.
type DepthKey struct {
	RootService, RootOperation Symbol
	Depth                      int16
	Service                    Symbol
}

// DepthCount counts the requests a service served at one depth below a root
// operation, seen (N) and estimated by SamplingMethod (Est).
type DepthCount struct {
	N   uint64
	Est [2]float64
}

// Estimate returns the estimate of all traffic, both methods summed.
func (d DepthCount) Estimate() float64 { return d.Est[0] + d.Est[1] }

// RootStats are a user-facing (root) operation's figures.
type RootStats struct {
	// Requests counts root requests: divide DepthKey counts by it for the
	// requests served per root request (docs/design.md §1: Ƞ, 2Ƞ, 4Ƞ …).
	Requests uint64
	// RadiusMax is the longest chain of consecutive hops that retried one
	// failure, over all its traces; RadiusSum sums it per trace.
	RadiusMax int
	RadiusSum uint64
	// RequestsEst and RadiusSumEst are Requests and RadiusSum estimated
	// for all traffic, by SamplingMethod; Extrapolated counts the root
	// requests whose weight came from their sampling.
	RequestsEst, RadiusSumEst [2]float64
	Extrapolated              uint64
}

// EstimatedRequests returns RequestsEst summed over the methods.
func (r *RootStats) EstimatedRequests() float64 { return r.RequestsEst[0] + r.RequestsEst[1] }

// EstimatedRadiusSum returns RadiusSumEst summed over the methods.
func (r *RootStats) EstimatedRadiusSum() float64 { return r.RadiusSumEst[0] + r.RadiusSumEst[1] }

// Stats accumulates figures over judged traces. It is not safe for
// concurrent use: keep one per goroutine and Merge them.
type Stats struct {
	Operations map[OperationKey]*OperationStats
	Edges      map[EdgeKey]*EdgeStats
	Depths     map[DepthKey]*DepthCount
	Roots      map[OperationKey]*RootStats
	// Addresses counts logical calls by the address a service used to
	// reach a peer service named otherwise (by its own service.name or a
	// peer attribute): it is how the SDK hooks, which know only the
	// address at call time, find the peer's hints.
	Addresses map[AddressKey]uint64
	Link      LinkStats
	// Traces counts traces added, incomplete ones included; Extrapolated
	// those of them weighed by their sampling (SamplingExtrapolated).
	Traces, Extrapolated uint64
	// CountedFailed counts the whole traces without sampling information
	// (SamplingCounted) with a failed request: beside Traces less
	// Extrapolated, the share of failing traces a sampler upstream that
	// keeps errors and says nothing would inflate.
	CountedFailed uint64
	// Incomplete counts the traces set apart as not whole, by Incomplete.
	Incomplete [numIncomplete]uint64
	// Audit holds coincidental errors, at most AuditLimit per service (0:
	// no limit; negative: none at all); AuditDropped counts those left out.
	Audit        []AuditEntry
	AuditLimit   int
	AuditDropped uint64

	// Provisional holds the verdicts of held requests counted before
	// their final judgement (AddProvisional), less those the final one
	// took back (Correct). A store counts Operations plus Provisional: a
	// request then has its verdict in its bucket from its first
	// judgement, and a later flush of the bucket carries the correction
	// alone. Operations holds final verdicts only, for readers that can
	// only count up, such as metrics.
	Provisional map[OperationKey]*VerdictCounts
	// Unaudit lists the audit entries of provisional verdicts, written
	// with an earlier flush of the bucket, that the final verdict took
	// back; an entry still in Audit is taken out of it instead.
	Unaudit []AuditKey

	auditCount map[Symbol]int
	radius     []int16
	// byOp finds an operation's figures, and through them the figures
	// its requests count once a call or once a request under it as root:
	// the edges from it and the depths under it. A trace then looks up
	// its operations, few and mostly recurring, and not each call's edge
	// and each request's depth in tables that grow to a million entries,
	// each look-up there a cache miss.
	byOp map[OperationKey]*opEntry
	// opCache is a direct-mapped cache in front of byOp: a trace's
	// requests mostly repeat operations seen moments ago, and a hit costs
	// a multiply and a compare instead of hashing a struct key.
	opCache [256]cacheSlot[OperationKey, opEntry]
}

// opEntry is one operation's figures in Stats' maps, each nil until
// counted, and the edges from it and the depths under it, up to maxRefs
// of each; the rest are looked up in Stats' maps.
type opEntry struct {
	op     *OperationStats
	root   *RootStats
	edges  []ref[peerKey, EdgeStats]
	depths []ref[depthUnder, DepthCount]
}

// maxRefs bounds the edges from an operation and the depths under it that
// its entry finds without a map: a scan of 16 references is about one map
// look-up whose table is in the cache.
const maxRefs = 16

// ref is a value of one of Stats' maps, found by the part of its key
// that is not the operation's.
type ref[S comparable, V any] struct {
	sub S
	v   *V
}

// peerKey is an EdgeKey's part past its operation's; depthUnder a
// DepthKey's past its root's.
type (
	peerKey    struct{ service, operation Symbol }
	depthUnder struct {
		depth   int16
		service Symbol
	}
)

// cacheSlot is a slot of a direct-mapped cache in front of a map.
type cacheSlot[K comparable, V any] struct {
	k K
	v *V
}

// mix spreads symbols over a cache; symbols are small dense integers.
func mix(a, b Symbol) uint32 { return (uint32(a)*0x9E3779B1 ^ uint32(b)*0x85EBCA77) >> 16 }

// NewStats returns empty Stats.
func NewStats() *Stats {
	return &Stats{
		Operations:  make(map[OperationKey]*OperationStats),
		Edges:       make(map[EdgeKey]*EdgeStats),
		Depths:      make(map[DepthKey]*DepthCount),
		Roots:       make(map[OperationKey]*RootStats),
		Addresses:   make(map[AddressKey]uint64),
		Provisional: make(map[OperationKey]*VerdictCounts),
		auditCount:  make(map[Symbol]int),
		byOp:        make(map[OperationKey]*opEntry),
	}
}

// Empty reports whether nothing was added since NewStats or Reset.
func (s *Stats) Empty() bool {
	return s.Traces == 0 && len(s.Operations) == 0 && s.AuditDropped == 0 && len(s.Provisional) == 0 && len(s.Unaudit) == 0
}

// Reset empties s, keeping its maps' storage.
func (s *Stats) Reset() {
	clear(s.Operations)
	clear(s.Edges)
	clear(s.Depths)
	clear(s.Roots)
	clear(s.Addresses)
	clear(s.Provisional)
	clear(s.auditCount)
	clear(s.byOp)
	clear(s.opCache[:])
	s.Link = LinkStats{}
	s.Traces, s.Extrapolated, s.CountedFailed = 0, 0, 0
	s.Incomplete = [numIncomplete]uint64{}
	s.Audit = s.Audit[:0]
	s.AuditDropped = 0
	s.Unaudit = s.Unaudit[:0]
}

// Add accumulates a judged trace and the verdicts to count now: a verdict
// held to be judged again (Hold) is counted apart, provisionally
// (AddProvisional) and once final (Correct).
//
// Every figure is counted once and, in its Est, by the trace's adjusted
// count. An incomplete trace is counted in Incomplete and adds what its
// spans say each alone — requests served and retried, calls, attempts,
// retries and decisions, root requests and depths — but nothing that
// judges a request from its calls: it has no verdicts (so its failed
// requests, which verdicts count, are not counted), and gives the edge
// model's evidence nothing. A trace analysed in parts (split by a plain
// load balancer, a handover) so counts every request served once.
func (s *Stats) Add(t *Trace, verdicts []Verdict) {
	s.Traces++
	s.Link.Add(t.Link)
	whole := t.Incomplete == IncompleteNone
	w, m := t.Weight, t.Sampling.Method()
	if !whole {
		s.Incomplete[t.Incomplete]++
		if !(w > 0) { // a contradicted threshold: the weight is unknown
			w, m = 1, SamplingCounted
		}
	}
	extrapolated := m == SamplingExtrapolated
	if extrapolated && whole {
		s.Extrapolated++
	}
	anyFailed := false
	for ri := range t.Requests {
		r := &t.Requests[ri]
		req := &t.Spans[r.Span]
		k := OperationKey{req.Service, req.Operation}
		x := s.entry(k)
		op := s.operationOf(x, k)
		op.Served++
		op.Est[m].Served += w
		if extrapolated {
			op.Extrapolated++
		}
		if r.Retry {
			op.RetriesReceived++
			op.Est[m].RetriesReceived += w
		}
		anyFailed = anyFailed || req.Failed()
		calls := t.RequestCalls(r)
		failed := failedCalls(calls)
		for ci := range calls {
			c := &calls[ci]
			e := s.edgeOf(x, EdgeKey{req.Service, req.Operation, c.PeerService, c.PeerOperation})
			addCall(&e.EdgeTraffic, t, c, req.Failed(), failed == 1, whole, 1)
			addCall(&e.Est[m], t, c, req.Failed(), failed == 1, whole, w)
			if c.PeerAddress != NoSymbol && c.PeerAddress != c.PeerService {
				s.Addresses[AddressKey{req.Service, c.PeerService, c.PeerAddress}]++
			}
		}
	}
	if anyFailed && !extrapolated && whole {
		s.CountedFailed++
	}
	for i := range verdicts {
		v := &verdicts[i]
		req := t.RequestSpan(&t.Requests[v.Request])
		s.addVerdict(OperationKey{req.Service, req.Operation}, v, func() AuditEntry {
			c := &t.Calls[v.FailedCalls[0]]
			return AuditEntry{
				Time: req.End(), TraceID: t.ID, SpanID: req.SpanID,
				Service: req.Service, Operation: req.Operation,
				PeerService: c.PeerService, PeerOperation: c.PeerOperation,
				ClaimSent: v.Sent, ClaimExpected: v.Expected, Weight: w,
			}
		}, w, m)
	}
	s.addDepths(t, w, m)
}

// addCall counts logical call c of a request, n for each event: whether
// the request failed, and whether c was its only failed call; evidence
// says whether the edge model's evidence counts too (a whole trace).
func addCall[T Figure](e *EdgeTraffic[T], t *Trace, c *Call, reqFailed, alone, evidence bool, n T) {
	e.Calls += n
	switch {
	case c.Failed:
		e.FailedCalls += n
		if !evidence {
			break
		}
		if reqFailed {
			e.CallFailedRequestFailed += n
		}
		if alone {
			e.FailedAlone += n
			if reqFailed {
				e.FailedAloneRequestFailed += n
			}
		}
	case reqFailed && evidence:
		e.CallOKRequestFailed += n
	}
	attempts := T(c.Attempts())
	e.Attempts += attempts * n
	e.Retries += (attempts - 1) * n
	e.RetriesAfterUnclaimed += T(c.RetriedUnclaimed) * n
	for _, ai := range t.CallAttempts(c) {
		e.Decisions[t.Spans[ai].Decision()] += n
	}
}

// addVerdict counts a verdict on a request of operation k, of a trace of
// adjusted count w by method m, and audits it by entry when it is
// coincidental.
func (s *Stats) addVerdict(k OperationKey, v *Verdict, entry func() AuditEntry, w float64, m SamplingMethod) {
	op := s.operation(k)
	op.count(v.Kind, v.Sent, v.Expected, 1)
	op.Est[m].count(v.Kind, v.Sent, v.Expected, w)
	if v.Kind == VerdictCoincidental {
		s.audit(entry())
	}
}

// audit keeps e unless its service has used up AuditLimit.
func (s *Stats) audit(e AuditEntry) {
	if s.AuditLimit < 0 || (s.AuditLimit > 0 && s.auditCount[e.Service] >= s.AuditLimit) {
		s.AuditDropped++
		return
	}
	s.auditCount[e.Service]++
	s.Audit = append(s.Audit, e)
}

// unaudit takes back the audit entry of k: out of Audit if it is there,
// else listed in Unaudit for the store to delete.
func (s *Stats) unaudit(k AuditKey) {
	for i := range s.Audit {
		if e := &s.Audit[i]; e.TraceID == k.TraceID && e.SpanID == k.SpanID && e.Time == k.Time {
			s.auditCount[e.Service]--
			s.Audit = append(s.Audit[:i], s.Audit[i+1:]...)
			return
		}
	}
	s.Unaudit = append(s.Unaudit, k)
}

func (s *Stats) provisional(k OperationKey) *VerdictCounts { return lookup(s.Provisional, k) }

// entry returns the entry of operation k, adding it if new.
func (s *Stats) entry(k OperationKey) *opEntry {
	slot := &s.opCache[mix(k.Service, k.Operation)%uint32(len(s.opCache))]
	if slot.v == nil || slot.k != k {
		*slot = cacheSlot[OperationKey, opEntry]{k, lookup(s.byOp, k)}
	}
	return slot.v
}

func (s *Stats) operation(k OperationKey) *OperationStats { return s.operationOf(s.entry(k), k) }

// operationOf returns the figures of operation k, whose entry is x.
func (s *Stats) operationOf(x *opEntry, k OperationKey) *OperationStats {
	if x.op == nil {
		x.op = lookup(s.Operations, k)
	}
	return x.op
}

// edgeOf returns the figures of edge k, from the operation whose entry is x.
func (s *Stats) edgeOf(x *opEntry, k EdgeKey) *EdgeStats {
	return through(&x.edges, s.Edges, k, peerKey{k.PeerService, k.PeerOperation})
}

// depthOf returns the count of k, under the root operation whose entry is x.
func (s *Stats) depthOf(x *opEntry, k DepthKey) *DepthCount {
	return through(&x.depths, s.Depths, k, depthUnder{k.Depth, k.Service})
}

// through returns m's value for k, whose part past its operation is sub:
// from refs, else from m (adding a zero value if m has none), kept in
// refs while they are fewer than maxRefs.
func through[K, S comparable, V any](refs *[]ref[S, V], m map[K]*V, k K, sub S) *V {
	for i := range *refs {
		if r := &(*refs)[i]; r.sub == sub {
			return r.v
		}
	}
	v := lookup(m, k)
	if len(*refs) < maxRefs {
		*refs = append(*refs, ref[S, V]{sub, v})
	}
	return v
}

// rootOf returns the figures of root operation k, whose entry is x.
func (s *Stats) rootOf(x *opEntry, k OperationKey) *RootStats {
	if x.root == nil {
		x.root = lookup(s.Roots, k)
	}
	return x.root
}

// lookup returns m's value for k, adding a zero value if m has none.
func lookup[K comparable, V any](m map[K]*V, k K) *V {
	v, ok := m[k]
	if !ok {
		v = new(V)
		m[k] = v
	}
	return v
}

// addDepths counts requests by depth under the trace's root request and
// the root operation's storm radius.
func (s *Stats) addDepths(t *Trace, w float64, m SamplingMethod) {
	root := int32(-1)
	for ri := range t.Requests {
		if t.Requests[ri].Depth == 0 {
			root = int32(ri)
			break
		}
	}
	if root < 0 {
		return
	}
	rs := t.RequestSpan(&t.Requests[root])
	rk := OperationKey{rs.Service, rs.Operation}
	x := s.entry(rk)
	for ri := range t.Requests {
		r := &t.Requests[ri]
		if r.Depth < 0 {
			continue
		}
		c := s.depthOf(x, DepthKey{rk.Service, rk.Operation, r.Depth, t.Spans[r.Span].Service})
		c.N++
		c.Est[m] += w
	}
	st := s.rootOf(x, rk)
	st.Requests++
	st.RequestsEst[m] += w
	if m == SamplingExtrapolated {
		st.Extrapolated++
	}
	radius := s.stormRadius(t)
	st.RadiusMax = max(st.RadiusMax, radius)
	st.RadiusSum += uint64(radius)
	st.RadiusSumEst[m] += float64(radius) * w
}

// Radius marks for stormRadius.
const (
	radiusUnknown  = -1
	radiusVisiting = -2
)

// stormRadius returns the longest chain of consecutive hops in t that
// retried: a logical call with more than one attempt, whose callee's own
// request made such a call, and so on.
func (s *Stats) stormRadius(t *Trace) int {
	if !anyRetried(t.Calls) {
		return 0 // most traces
	}
	s.radius = resize(s.radius, len(t.Requests), radiusUnknown)
	radius := 0
	for ri := range t.Requests {
		radius = max(radius, int(s.radiusFrom(t, int32(ri))))
	}
	return radius
}

// anyRetried reports whether a call of calls was retried.
func anyRetried(calls []Call) bool {
	for i := range calls {
		if calls[i].Attempts() > 1 {
			return true
		}
	}
	return false
}

func (s *Stats) radiusFrom(t *Trace, ri int32) int16 {
	switch s.radius[ri] {
	case radiusUnknown:
	case radiusVisiting:
		return 0 // a loop in the calls: count no further
	default:
		return s.radius[ri]
	}
	s.radius[ri] = radiusVisiting
	best := int16(0)
	for _, c := range t.RequestCalls(&t.Requests[ri]) {
		if c.Attempts() < 2 {
			continue
		}
		below := int16(0)
		for _, ai := range t.CallAttempts(&c) {
			if callee := t.Callee[ai]; callee >= 0 {
				below = max(below, s.radiusFrom(t, callee))
			}
		}
		best = max(best, 1+below)
	}
	s.radius[ri] = best
	return best
}

// Merge adds o's figures to s.
func (s *Stats) Merge(o *Stats) {
	s.Traces += o.Traces
	s.Extrapolated += o.Extrapolated
	s.CountedFailed += o.CountedFailed
	for i, n := range o.Incomplete {
		s.Incomplete[i] += n
	}
	s.Link.Add(o.Link)
	for k, v := range o.Operations {
		op := s.operation(k)
		op.merge(&v.OperationCounts)
		for m := range op.Est {
			op.Est[m].merge(&v.Est[m])
		}
		op.Extrapolated += v.Extrapolated
	}
	// Edges and depths straight into the maps: the entries' references
	// would cost a look-up of the operation a key, in an order that
	// finds no operation in the cache, and are filled when Add needs them.
	for k, v := range o.Edges {
		e := lookup(s.Edges, k)
		e.merge(&v.EdgeTraffic)
		for m := range e.Est {
			e.Est[m].merge(&v.Est[m])
		}
	}
	s.AuditDropped += o.AuditDropped
	for _, e := range o.Audit {
		s.audit(e)
	}
	for k, c := range o.Provisional {
		s.provisional(k).Merge(c)
	}
	for _, k := range o.Unaudit {
		s.unaudit(k)
	}
	for k, v := range o.Depths {
		c := lookup(s.Depths, k)
		c.N += v.N
		c.Est[0] += v.Est[0]
		c.Est[1] += v.Est[1]
	}
	for k, v := range o.Addresses {
		s.Addresses[k] += v
	}
	for k, v := range o.Roots {
		st := lookup(s.Roots, k)
		st.Requests += v.Requests
		st.RadiusSum += v.RadiusSum
		st.RadiusMax = max(st.RadiusMax, v.RadiusMax)
		for m := range st.RequestsEst {
			st.RequestsEst[m] += v.RequestsEst[m]
			st.RadiusSumEst[m] += v.RadiusSumEst[m]
		}
		st.Extrapolated += v.Extrapolated
	}
}

// Symbols calls keep for every symbol s holds, so that a sweep of the
// symbol table (Symbols.Sweep) keeps them.
func (s *Stats) Symbols(keep func(Symbol)) {
	for k := range s.Operations {
		keep(k.Service)
		keep(k.Operation)
	}
	for k := range s.Edges {
		k.symbols(keep)
	}
	for k := range s.Depths {
		keep(k.RootService)
		keep(k.RootOperation)
		keep(k.Service)
	}
	for k := range s.Roots {
		keep(k.Service)
		keep(k.Operation)
	}
	for k := range s.Addresses {
		keep(k.Service)
		keep(k.PeerService)
		keep(k.Address)
	}
	for k := range s.Provisional {
		keep(k.Service)
		keep(k.Operation)
	}
	for i := range s.Audit {
		e := &s.Audit[i]
		keep(e.Service)
		keep(e.Operation)
		keep(e.PeerService)
		keep(e.PeerOperation)
	}
}

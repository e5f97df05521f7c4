// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector // import "github.com/errorownership/errorownership/connector/errorownershipconnector"

import (
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Attribute names: the semantic conventions' where they have one, the
// span attributes of docs/design.md §3 for the claim and the retry
// decision, errorownership.* for the rest.
const (
	AttrServiceName   = "service.name"
	AttrOperation     = "errorownership.operation"
	AttrVerdict       = "errorownership.verdict"
	AttrClaim         = "error_ownership.claim.sent"
	AttrPeerService   = "service.peer.name"
	AttrPeerOperation = "errorownership.peer.operation"
	AttrRetryDecision = "error_ownership.retry.decision"
	AttrRootService   = "errorownership.root.service"
	AttrRootOperation = "errorownership.root.operation"
	AttrDepth         = "errorownership.depth"
	// AttrSamplingMethod says whether a series counts traces without
	// sampling information ("counted") or sums the adjusted counts of
	// sampled ones ("extrapolated"), spelt as contrib's spanmetrics
	// connector spells it (docs/design.md §8.1).
	AttrSamplingMethod = "sampling.method"
	// AttrOverflow marks the series that counts what a cardinality bound
	// kept out, as contrib's connectors mark theirs.
	AttrOverflow = "otel.metric.overflow"
)

// metricDef describes one metric the connector makes.
type metricDef struct {
	name, description, unit string
	// gauge: the largest value of the emission interval; else a
	// monotonic sum.
	gauge bool
	// attrs are the attribute names, in the order of a series' values.
	attrs []string
	// service is the index in attrs of the service a series counts
	// against for max_series_per_service; depth of an int attribute, or -1;
	// method of sampling.method, or -1.
	service, depth, method int
	// exemplars: the series take exemplars (Counted verdicts).
	exemplars bool
}

// The metrics, in the order they are emitted.
const (
	mServed = iota
	mRetried
	mFailed
	mCorrectlyClaimed
	mCallsMade
	mCallsFailed
	mCallsRetries
	mCallsRetriesAfterUnclaimed
	mCallsSuppressed
	mRootRequests
	mRootServed
	mStormHops
	mStormRadius
	numMetrics
)

// The sums' attribute lists end with sampling.method: each figure is
// kept apart by how its traces were sampled, as spanmetrics keeps its
// own, and a query sums over it for the estimate of all traffic.
var (
	opAttrs   = []string{AttrServiceName, AttrOperation, AttrSamplingMethod}
	edgeAttrs = []string{AttrServiceName, AttrOperation, AttrPeerService, AttrPeerOperation, AttrSamplingMethod}
	rootAttrs = []string{AttrRootService, AttrRootOperation, AttrSamplingMethod}
	// The storm radius is a largest value, not a count: no weight applies
	// to it, and the engine keeps one for the traces of both methods.
	radiusAttrs = []string{AttrRootService, AttrRootOperation}
)

var metricDefs = [numMetrics]metricDef{
	mServed: {name: "errorownership.requests.served", unit: "{request}", attrs: opAttrs, depth: -1, method: 2,
		description: "Inbound requests served, retries included, by service and operation."},
	mRetried: {name: "errorownership.requests.retried", unit: "{request}", attrs: opAttrs, depth: -1, method: 2,
		description: "Inbound requests served whose calling attempt was a retry."},
	mFailed: {name: "errorownership.requests.failed", unit: "{request}", depth: -1, method: 4, exemplars: true,
		attrs:       []string{AttrServiceName, AttrOperation, AttrVerdict, AttrClaim, AttrSamplingMethod},
		description: "Failed inbound requests by verdict (own, propagated, coincidental) and the claim the service sent (claimed, unclaimed, missing)."},
	mCorrectlyClaimed: {name: "errorownership.requests.correctly_claimed", unit: "{request}", attrs: opAttrs, depth: -1, method: 2,
		description: "Failed inbound requests whose claim sent was the one the rules expect; over errorownership.requests.failed, the claim accuracy."},
	mCallsMade: {name: "errorownership.calls.made", unit: "{call}", attrs: edgeAttrs, depth: -1, method: 4,
		description: "Logical calls (an attempt and its retries) by edge: (service, operation) to (peer service, peer operation)."},
	mCallsFailed: {name: "errorownership.calls.failed", unit: "{call}", attrs: edgeAttrs, depth: -1, method: 4,
		description: "Logical calls whose last attempt failed, by edge."},
	mCallsRetries: {name: "errorownership.calls.retries", unit: "{retry}", attrs: edgeAttrs, depth: -1, method: 4,
		description: "Retries sent, attempts after a call's first, by edge."},
	mCallsRetriesAfterUnclaimed: {name: "errorownership.calls.retries_after_unclaimed", unit: "{retry}", attrs: edgeAttrs, depth: -1, method: 4,
		description: "Retries sent after an attempt whose callee unclaimed its error, by edge: the retries error ownership should have suppressed (a caller without the hooks, or one ignoring the claim)."},
	mCallsSuppressed: {name: "errorownership.calls.retries_suppressed", unit: "{retry}", depth: -1, method: 5,
		attrs:       []string{AttrServiceName, AttrOperation, AttrPeerService, AttrPeerOperation, AttrRetryDecision, AttrSamplingMethod},
		description: "Failed attempts not retried, by edge and the hooks' error_ownership.retry.decision: suppressed_unclaimed and suppressed_budget (retries the hooks suppressed), no_policy and exhausted."},
	mRootRequests: {name: "errorownership.root.requests", unit: "{request}", attrs: rootAttrs, depth: -1, method: 2,
		description: "Root (user-facing) requests, by root service and operation."},
	mRootServed: {name: "errorownership.root.served", unit: "{request}", depth: 2, method: 4,
		attrs:       []string{AttrRootService, AttrRootOperation, AttrDepth, AttrServiceName, AttrSamplingMethod},
		description: "Requests served in root requests' traces, by the root operation, the depth below it and the service; over errorownership.root.requests, the requests served per root request (amplification)."},
	mStormHops: {name: "errorownership.root.storm_hops", unit: "{hop}", attrs: rootAttrs, depth: -1, method: 2,
		description: "The retry-storm radius of each root request summed: over errorownership.root.requests, the mean radius."},
	mStormRadius: {name: "errorownership.root.storm_radius", unit: "{hop}", gauge: true, attrs: radiusAttrs, depth: -1, method: -1,
		description: "The largest retry-storm radius among the root requests of the emission interval (0 when there were none), sampled or not: the longest chain of consecutive hops that retried one failure."},
}

// exemplar is a failed request a data point links to.
type exemplar struct {
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
	time    pcommon.Timestamp
	// weight is the adjusted count of the request's trace: the exemplar's
	// value, what it adds to its point.
	weight float64
}

// overflowKind says what a series holds besides a set of attribute values.
type overflowKind uint8

const (
	// notOverflow: the series of its attribute values.
	notOverflow overflowKind = iota
	// serviceOverflow: a service's figures past max_series_per_service.
	serviceOverflow
	// metricOverflow: a metric's figures past max_series_per_metric.
	metricOverflow
)

// series is one attribute set of a metric.
type series struct {
	vals []string
	// overflow: the series counts what a bound kept out; vals then holds
	// the service (a service's overflow series) or "" (the metric's), and
	// the sampling method where the metric has it, or "".
	overflow overflowKind
	// value is the total (cumulative), the sum since the last point
	// (delta), or the interval's largest value (gauge). A sum adds
	// adjusted counts: an estimate of all traffic, fractional where a
	// trace's sampling probability is not 1 in a whole number.
	value float64
	// fresh: not emitted yet. A new series' first point is 0, its count
	// in the next: a counter that appears at N loses N to Prometheus'
	// increase(), which begins at the first sample.
	fresh bool
	// start is the point's start time: the series' creation for a
	// cumulative sum, the last point's time for a delta.
	start   pcommon.Timestamp
	updated time.Time
	// ex are the exemplars of the series' points, the oldest first. A
	// cumulative series keeps them on every point until newer ones
	// replace them: an exporter such as prometheus keeps only a series'
	// latest point, and a scrape after the one point that carried them
	// would find none. A delta point carries those of the figures it
	// adds up, and the first point (0) of a new series passes them on.
	ex []exemplar
}

// keep adds the exemplars ex, the latest last, keeping the latest limit.
func (s *series) keep(ex []exemplar, limit int) {
	s.ex = append(s.ex, ex...)
	if over := len(s.ex) - limit; over > 0 {
		s.ex = append(s.ex[:0], s.ex[over:]...)
	}
}

// bounds are the cardinality bounds and what passed them, by bound.
type bounds struct {
	perMetric, perService int
}

// table holds one metric's series within the bounds. A series of each
// sampling method is a series of its own, against the bounds too: it is
// one in the backend.
type table struct {
	def    *metricDef
	series map[string]*series
	// perService counts each service's series, its overflow series not
	// included.
	perService map[string]int
	// overflow are the metric's overflow series, by sampling method;
	// serviceOverflow each service's, by service and method. Both count
	// against the metric's bound.
	overflow        map[string]*series
	serviceOverflow map[string]*series
	// overflowed counts, since the telemetry was last told, the figures
	// folded into an overflow series: by the metric's bound and by a
	// service's.
	overflowed [2]int64
}

func newTable(def *metricDef) *table {
	return &table{def: def, series: map[string]*series{}, perService: map[string]int{}, overflow: map[string]*series{}, serviceOverflow: map[string]*series{}}
}

// len is how many series the table holds, overflow series included.
func (t *table) len() int {
	return len(t.series) + len(t.serviceOverflow) + len(t.overflow)
}

func key(vals []string) string { return strings.Join(vals, "\x00") }

// method is the sampling method of a series' values, "" for a metric
// without it.
func (t *table) method(vals []string) string {
	if t.def.method < 0 {
		return ""
	}
	return vals[t.def.method]
}

// get returns the series of vals, or the overflow series its figures go to
// past a bound.
func (t *table) get(vals []string, b bounds, now time.Time, start pcommon.Timestamp) *series {
	k := key(vals)
	if s := t.series[k]; s != nil {
		return s
	}
	svc, method := vals[t.def.service], t.method(vals)
	svcKey := key([]string{svc, method})
	full := t.len() >= b.perMetric
	switch {
	case !full && t.perService[svc] < b.perService:
		s := &series{vals: append([]string(nil), vals...), fresh: true, start: start, updated: now}
		t.series[k] = s
		t.perService[svc]++
		return s
	case !full || t.serviceOverflow[svcKey] != nil:
		t.overflowed[1]++
		s := t.serviceOverflow[svcKey]
		if s == nil {
			s = &series{vals: []string{svc, method}, overflow: serviceOverflow, fresh: true, start: start, updated: now}
			t.serviceOverflow[svcKey] = s
		}
		return s
	default:
		t.overflowed[0]++
		s := t.overflow[method]
		if s == nil {
			s = &series{vals: []string{"", method}, overflow: metricOverflow, fresh: true, start: start, updated: now}
			t.overflow[method] = s
		}
		return s
	}
}

// add adds n to the series of vals (keeps the largest value, for a gauge).
func (t *table) add(vals []string, n float64, b bounds, now time.Time, start pcommon.Timestamp) *series {
	s := t.get(vals, b, now, start)
	if t.def.gauge {
		s.value = max(s.value, n)
	} else {
		s.value += n
	}
	s.updated = now
	return s
}

// each calls fn for every series, overflow series last.
func (t *table) each(fn func(s *series)) {
	for _, s := range t.series {
		fn(s)
	}
	for _, s := range t.serviceOverflow {
		fn(s)
	}
	for _, s := range t.overflow {
		fn(s)
	}
}

// expire drops the series that have not changed since before.
func (t *table) expire(before time.Time) {
	for k, s := range t.series {
		if s.updated.Before(before) && !t.pending(s) {
			delete(t.series, k)
			svc := s.vals[t.def.service]
			if t.perService[svc]--; t.perService[svc] <= 0 {
				delete(t.perService, svc)
			}
		}
	}
	for k, s := range t.serviceOverflow {
		if s.updated.Before(before) && !t.pending(s) {
			delete(t.serviceOverflow, k)
		}
	}
	for k, s := range t.overflow {
		if s.updated.Before(before) && !t.pending(s) {
			delete(t.overflow, k)
		}
	}
}

// pending reports whether a series still has a point to emit.
func (t *table) pending(s *series) bool { return s.fresh }

// emit appends the table's metric with a point per series to ms, and
// readies the series for the next interval: a delta's count and a gauge's
// value start again from 0. final emits a fresh series' count at once,
// there being no next emission.
//
// A sum's points are doubles, counted series' too: a metric keeps one
// value type, and an extrapolated series sums fractional adjusted counts.
// The gauge is a largest radius, a whole number of hops: an int.
func (t *table) emit(ms pmetric.MetricSlice, temporality pmetric.AggregationTemporality, now pcommon.Timestamp, final bool) {
	def := t.def
	m := pmetric.NewMetric()
	m.SetName(def.name)
	m.SetDescription(def.description)
	m.SetUnit(def.unit)
	var dps pmetric.NumberDataPointSlice
	if def.gauge {
		dps = m.SetEmptyGauge().DataPoints()
	} else {
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(temporality)
		dps = sum.DataPoints()
	}
	delta := temporality == pmetric.AggregationTemporalityDelta
	t.each(func(s *series) {
		var v float64
		switch {
		case def.gauge:
			v, s.value = s.value, 0
		case s.fresh && !final:
		case delta:
			if s.value == 0 && !s.fresh {
				return // nothing happened in the interval
			}
			v, s.value = s.value, 0
		default:
			v = s.value
		}
		dp := dps.AppendEmpty()
		t.attributes(s, dp.Attributes())
		if def.gauge {
			dp.SetIntValue(int64(v))
		} else {
			dp.SetStartTimestamp(s.start)
			dp.SetDoubleValue(v)
		}
		dp.SetTimestamp(now)
		for _, e := range s.ex {
			x := dp.Exemplars().AppendEmpty()
			x.SetTraceID(e.traceID)
			x.SetSpanID(e.spanID)
			x.SetTimestamp(e.time)
			x.SetDoubleValue(e.weight)
		}
		s.fresh = false
		if delta {
			if v != 0 {
				s.ex = s.ex[:0]
			}
			s.start = now
		}
	})
	if dps.Len() > 0 {
		m.MoveTo(ms.AppendEmpty())
	}
}

// attributes writes a series' attributes.
func (t *table) attributes(s *series, m pcommon.Map) {
	def := t.def
	if s.overflow != notOverflow {
		if s.overflow == serviceOverflow {
			m.PutStr(def.attrs[def.service], s.vals[0])
		}
		if def.method >= 0 {
			m.PutStr(AttrSamplingMethod, s.vals[1])
		}
		m.PutBool(AttrOverflow, true)
		return
	}
	m.EnsureCapacity(len(s.vals))
	for i, v := range s.vals {
		if i == def.depth {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m.PutInt(def.attrs[i], n)
				continue
			}
		}
		m.PutStr(def.attrs[i], v)
	}
}

// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector // import "github.com/errorownership/errorownership/connector/errorownershipconnector"

import (
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/figures"
	"github.com/errorownership/errorownership/ownership"
)

// pendingExemplarAge is how long an exemplar waits for its series, which
// the bucket counting its request creates at the analysis's next flush.
const pendingExemplarAge = 5 * time.Minute

// accumulator turns an analysis's buckets into the metrics' series, within
// the cardinality bounds, and keeps the exemplars of the verdicts counted
// until newer ones replace them. It is the connector's figures.Listener.
type accumulator struct {
	temporality pmetric.AggregationTemporality
	bounds      bounds
	expiration  time.Duration
	exemplars   int // per data point; 0 keeps none
	start       pcommon.Timestamp
	now         func() time.Time

	mu     sync.Mutex
	tables [numMetrics]*table

	exMu sync.Mutex
	// pendingEx are the exemplars of requests.failed series by series
	// key, at most bounds.perMetric keys.
	pendingEx map[string]*pendingExemplars
}

type pendingExemplars struct {
	ex   []exemplar
	seen time.Time
}

func newAccumulator(cfg *Config, now func() time.Time) *accumulator {
	a := &accumulator{
		temporality: cfg.temporality(),
		bounds:      bounds{perMetric: cfg.Cardinality.MaxSeriesPerMetric, perService: cfg.Cardinality.MaxSeriesPerService},
		expiration:  cfg.SeriesExpiration,
		start:       pcommon.NewTimestampFromTime(now()),
		now:         now,
		pendingEx:   map[string]*pendingExemplars{},
	}
	if cfg.Exemplars.Enabled {
		a.exemplars = cfg.Exemplars.MaxPerDataPoint
	}
	for i := range a.tables {
		a.tables[i] = newTable(&metricDefs[i])
	}
	return a
}

// Counted keeps the trace of a propagated or coincidental failure for the
// exemplars of its series — the series of its trace's sampling method —
// the latest ones when there are more than a point takes.
func (a *accumulator) Counted(v *figures.Verdict) {
	if a.exemplars == 0 || (v.Kind != dependencyanalysis.VerdictPropagated && v.Kind != dependencyanalysis.VerdictCoincidental) {
		return
	}
	k := key([]string{v.Symbols.Name(v.Service), v.Symbols.Name(v.Operation), v.Kind.String(), v.Sent.String(), v.Method.String()})
	a.exMu.Lock()
	defer a.exMu.Unlock()
	p := a.pendingEx[k]
	if p == nil {
		if len(a.pendingEx) >= a.bounds.perMetric {
			return
		}
		p = &pendingExemplars{}
		a.pendingEx[k] = p
	}
	if len(p.ex) == a.exemplars {
		copy(p.ex, p.ex[1:])
		p.ex = p.ex[:len(p.ex)-1]
	}
	p.ex = append(p.ex, exemplar{traceID: v.TraceID, spanID: v.SpanID, time: v.Time, weight: v.Weight})
	p.seen = a.now()
}

// Flushed adds a bucket's figures to the series: each figure's estimate of
// all traffic (the sum of its traces' adjusted counts), in the series of
// its sampling method, the counted and the extrapolated apart.
func (a *accumulator) Flushed(b *figures.Bucket) {
	name := b.Symbols.Name
	st := b.Stats
	now := a.now()
	start := pcommon.NewTimestampFromTime(now)
	if a.temporality == pmetric.AggregationTemporalityCumulative {
		start = a.start
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// A figure of 0 makes no series: a method without traces has none.
	add := func(m int, n float64, vals ...string) {
		if n > 0 {
			a.tables[m].add(vals, n, a.bounds, now, start)
		}
	}
	decisions := []ownership.RetryDecision{ownership.DecisionSuppressedUnclaimed, ownership.DecisionSuppressedBudget, ownership.DecisionNoPolicy, ownership.DecisionExhausted}
	for k, op := range st.Operations {
		svc, opn := name(k.Service), name(k.Operation)
		for sm := range op.Est {
			est, method := &op.Est[sm], methods[sm]
			add(mServed, est.Served, svc, opn, method)
			add(mRetried, est.RetriesReceived, svc, opn, method)
			add(mCorrectlyClaimed, est.ClaimsCorrect, svc, opn, method)
			for kind := dependencyanalysis.VerdictOwn; kind <= dependencyanalysis.VerdictCoincidental; kind++ {
				for claim := ownership.ClaimMissing; claim <= ownership.ClaimUnclaimed; claim++ {
					add(mFailed, est.Claims[claim][kind], svc, opn, kind.String(), claim.String(), method)
				}
			}
		}
	}
	for k, e := range st.Edges {
		svc, opn, peer, peerOp := name(k.Service), name(k.Operation), name(k.PeerService), name(k.PeerOperation)
		for sm := range e.Est {
			est, method := &e.Est[sm], methods[sm]
			add(mCallsMade, est.Calls, svc, opn, peer, peerOp, method)
			add(mCallsFailed, est.FailedCalls, svc, opn, peer, peerOp, method)
			add(mCallsRetries, est.Retries, svc, opn, peer, peerOp, method)
			add(mCallsRetriesAfterUnclaimed, est.RetriesAfterUnclaimed, svc, opn, peer, peerOp, method)
			for _, d := range decisions {
				add(mCallsSuppressed, est.Decisions[d], svc, opn, peer, peerOp, d.String(), method)
			}
		}
	}
	for k, n := range st.Depths {
		rootSvc, rootOp, depth, svc := name(k.RootService), name(k.RootOperation), strconv.Itoa(int(k.Depth)), name(k.Service)
		for sm, est := range n.Est {
			add(mRootServed, est, rootSvc, rootOp, depth, svc, methods[sm])
		}
	}
	for k, r := range st.Roots {
		svc, opn := name(k.Service), name(k.Operation)
		for sm := range r.RequestsEst {
			add(mRootRequests, r.RequestsEst[sm], svc, opn, methods[sm])
			add(mStormHops, r.RadiusSumEst[sm], svc, opn, methods[sm])
		}
		if r.Requests > 0 {
			// A radius of 0 is a figure too: the gauge's series exists.
			a.tables[mStormRadius].add([]string{svc, opn}, float64(r.RadiusMax), a.bounds, now, start)
		}
	}
}

// methods are the sampling.method values by dependencyanalysis.SamplingMethod.
var methods = [2]string{dependencyanalysis.SamplingCounted.String(), dependencyanalysis.SamplingExtrapolated.String()}

// emit builds the metrics of the interval that ends now, and reports for
// the telemetry how many figures went to overflow series since the last
// emission, by metric and bound.
func (a *accumulator) emit(final bool) (md pmetric.Metrics, overflowed [numMetrics][2]int64) {
	now := a.now()
	ts := pcommon.NewTimestampFromTime(now)
	md = pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scopeName)

	a.exMu.Lock()
	ex := a.pendingEx
	a.pendingEx = map[string]*pendingExemplars{}
	a.exMu.Unlock()

	a.mu.Lock()
	defer a.mu.Unlock()
	failed := a.tables[mFailed]
	for k, p := range ex {
		if s := failed.series[k]; s != nil {
			s.keep(p.ex, a.exemplars)
			delete(ex, k)
		}
	}
	for i, t := range a.tables {
		t.emit(sm.Metrics(), a.temporality, ts, final)
		overflowed[i], t.overflowed = t.overflowed, [2]int64{}
		if a.expiration > 0 {
			t.expire(now.Add(-a.expiration))
		}
	}
	// Exemplars whose series the next bucket may still create wait for it.
	a.exMu.Lock()
	for k, p := range ex {
		if _, ok := a.pendingEx[k]; !ok && now.Sub(p.seen) < pendingExemplarAge && len(a.pendingEx) < a.bounds.perMetric {
			a.pendingEx[k] = p
		}
	}
	a.exMu.Unlock()
	return md, overflowed
}

// lens reports how many series each metric holds.
func (a *accumulator) lens() [numMetrics]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n [numMetrics]int
	for i, t := range a.tables {
		n[i] = t.len()
	}
	return n
}

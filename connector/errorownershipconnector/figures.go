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
// until their points are emitted. It is the connector's figures.Listener.
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
// exemplars of its series' next point, the latest ones when there are
// more than a point takes.
func (a *accumulator) Counted(v *figures.Verdict) {
	if a.exemplars == 0 || (v.Kind != dependencyanalysis.VerdictPropagated && v.Kind != dependencyanalysis.VerdictCoincidental) {
		return
	}
	k := key([]string{v.Symbols.Name(v.Service), v.Symbols.Name(v.Operation), v.Kind.String(), v.Sent.String()})
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
	p.ex = append(p.ex, exemplar{traceID: v.TraceID, spanID: v.SpanID, time: v.Time})
	p.seen = a.now()
}

// Flushed adds a bucket's figures to the series.
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
	add := func(m int, n uint64, vals ...string) {
		if n > 0 {
			a.tables[m].add(vals, int64(n), a.bounds, now, start)
		}
	}
	for k, op := range st.Operations {
		svc, opn := name(k.Service), name(k.Operation)
		add(mServed, op.Served, svc, opn)
		add(mRetried, op.RetriesReceived, svc, opn)
		add(mCorrectlyClaimed, op.ClaimsCorrect, svc, opn)
		for kind := dependencyanalysis.VerdictOwn; kind <= dependencyanalysis.VerdictCoincidental; kind++ {
			for claim := ownership.ClaimMissing; claim <= ownership.ClaimUnclaimed; claim++ {
				add(mFailed, op.Claims[claim][kind], svc, opn, kind.String(), claim.String())
			}
		}
	}
	for k, e := range st.Edges {
		svc, opn, peer, peerOp := name(k.Service), name(k.Operation), name(k.PeerService), name(k.PeerOperation)
		add(mCallsMade, e.Calls, svc, opn, peer, peerOp)
		add(mCallsFailed, e.FailedCalls, svc, opn, peer, peerOp)
		add(mCallsRetries, e.Retries, svc, opn, peer, peerOp)
		for _, d := range []ownership.RetryDecision{ownership.DecisionSuppressedUnclaimed, ownership.DecisionSuppressedBudget, ownership.DecisionNoPolicy, ownership.DecisionExhausted} {
			add(mCallsSuppressed, e.Decisions[d], svc, opn, peer, peerOp, d.String())
		}
	}
	for k, n := range st.Depths {
		add(mRootServed, n.N, name(k.RootService), name(k.RootOperation), strconv.Itoa(int(k.Depth)), name(k.Service))
	}
	for k, r := range st.Roots {
		svc, opn := name(k.Service), name(k.Operation)
		add(mRootRequests, r.Requests, svc, opn)
		add(mStormHops, r.RadiusSum, svc, opn)
		if r.Requests > 0 {
			// A radius of 0 is a figure too: the gauge's series exists.
			a.tables[mStormRadius].add([]string{svc, opn}, int64(r.RadiusMax), a.bounds, now, start)
		}
	}
}

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
			s.ex = append(s.ex[:0], p.ex...)
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

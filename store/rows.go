// SPDX-License-Identifier: Apache-2.0

package store

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
)

// Flush is one collector instance's statistics for one bucket, the unit
// the store writes exactly once.
type Flush struct {
	// Instance names the collector instance; Seq numbers its flushes. The
	// pair identifies the flush: a flush whose (Instance, Seq) was written
	// already is skipped. So Instance must be unique per process lifetime
	// (NewInstanceID), or Seq must never restart; if Instance is empty,
	// Writer.Enqueue fills in the writer's own identity and sequence.
	Instance string
	Seq      uint64
	// Bucket is the time the statistics belong to; the store truncates it
	// to Config.Bucket. Zero means the time of Enqueue.
	Bucket time.Time
	// Stats are the figures. Enqueue takes ownership: the caller must not
	// use them afterwards (start the next interval with a new Stats).
	Stats *dependencyanalysis.Stats
	// Names resolves the symbols in Stats.
	Names *dependencyanalysis.Symbols
	// Corrects, if not 0, is the Seq of the flush of the same Instance and
	// Bucket whose provisional verdicts this one corrects: Stats then
	// carries their final verdicts and takes the provisional ones back
	// (dependencyanalysis.Stats.Provisional, Unaudit). Such a flush is
	// written only where that flush was, or it would take away what was
	// never added (Write reports ErrCorrectsUnwritten).
	Corrects uint64
}

// unknownPeer names a callee no span attribute named.
const unknownPeer = "unknown"

// auditReason is the reason stored with every audit entry: the audit log
// records coincidental errors.
var auditReason = ownership.ReasonCoincidental.String()

// A statistics table's columns are a key of up to maxKeys columns (text or
// smallint) and up to maxValues counts.
const (
	maxKeys   = 4
	maxValues = 14
)

// rowKey packs a row's key columns, four 32-bit slots, into two words that
// compare in the order of the columns. A text slot holds the rank of the
// string in the batch's sorted dictionary, so comparing ranks orders rows
// as comparing their strings would; a smallint slot holds the value plus
// 2^15. Comparing two words instead of four strings makes sorting 100,000
// rows several times cheaper.
type rowKey struct{ hi, lo uint64 }

func makeKey(s0, s1, s2, s3 uint32) rowKey {
	return rowKey{uint64(s0)<<32 | uint64(s1), uint64(s2)<<32 | uint64(s3)}
}

// slot returns key column i.
func (k rowKey) slot(i int) uint32 {
	w := k.hi
	if i >= 2 {
		w = k.lo
	}
	if i%2 == 0 {
		return uint32(w >> 32)
	}
	return uint32(w)
}

func cmpKey(a, b rowKey) int {
	switch {
	case a.hi != b.hi:
		if a.hi < b.hi {
			return -1
		}
		return 1
	case a.lo != b.lo:
		if a.lo < b.lo {
			return -1
		}
		return 1
	}
	return 0
}

// smallintBias maps an int16 to a slot that sorts in the same order.
const smallintBias = 1 << 15

// statRow is one row of a statistics table: the counts seen and, at the
// same index, the estimates of all traffic of those that have one.
type statRow struct {
	key  rowKey
	vals [maxValues]int64
	ests [maxValues]float64
}

// tableRows are the rows of one table in a batch, sorted by key.
type tableRows struct {
	spec *tableSpec
	rows []statRow
}

// The tables of a batch, in the order they are written.
const (
	tableOps = iota
	tableClaims
	tableEdges
	tableDepths
	tableRoots
	tableAddresses
	tableTraces
	numTables
)

// batch is a flush turned into rows, ready to write and to retry: it is
// built once, whatever the number of attempts.
type batch struct {
	instance string
	seq      int64
	corrects int64 // Flush.Corrects
	bucket   time.Time
	// names is the dictionary the text key slots index, sorted.
	names  []string
	tables [numTables]tableRows
	audit  []auditRow
	// unaudit are the audit entries a correction withdraws, each with
	// how many of its rows to delete.
	unaudit []unauditRow
	// auditDropped counts audit entries left out (dated outside the
	// retention window around the bucket).
	auditDropped int
	// namesCut counts the distinct names cut to the name bound.
	namesCut int
}

type auditRow struct {
	time                                                       time.Time
	traceID, spanID                                            string
	service, operation, peerService, peerOperation, sent, want string
	weight                                                     float64
}

type unauditRow struct {
	time            time.Time
	traceID, spanID string
	n               int32
}

// rows counts the rows b writes, and deletes: its figures. Its trace_stats
// row is the flush's own bookkeeping, like its row in flushes, and is not
// counted.
func (b *batch) rows() int {
	n := len(b.audit) + len(b.unaudit)
	for i, t := range b.tables {
		if i != tableTraces {
			n += len(t.rows)
		}
	}
	return n
}

// empty reports whether b writes nothing at all: a correction that changes
// nothing. A flush of incomplete traces alone has no figures but counts
// its traces.
func (b *batch) empty() bool { return b.rows() == 0 && len(b.tables[tableTraces].rows) == 0 }

// countRows returns how many rows s makes (batch.rows), without making
// them: the writer bounds its queue by it.
func countRows(s *dependencyanalysis.Stats) int {
	if s == nil {
		return 0
	}
	n := len(s.Operations) + len(s.Edges) + len(s.Depths) + len(s.Roots) + len(s.Addresses) + len(s.Audit) +
		len(s.Provisional) + len(s.Unaudit)
	for _, op := range s.Operations {
		n += claimCells(&op.Claims)
	}
	for _, c := range s.Provisional {
		n += claimCells(&c.Claims)
	}
	return n
}

// claimCells counts the non-zero cells of a claim matrix.
func claimCells[T uint64 | int64](claims *[3][4]T) int {
	n := 0
	for sent := range claims {
		for v := dependencyanalysis.VerdictOwn; v <= dependencyanalysis.VerdictCoincidental; v++ {
			if claims[sent][v] != 0 {
				n++
			}
		}
	}
	return n
}

// MaxNameBytes bounds the names the store writes: services, operations,
// peers. A statistics table's primary key holds up to four names, and a
// PostgreSQL B-tree index entry at most 2704 bytes, so a longer name (a
// database span named by its whole SQL statement, say) would make its flush
// fail however often it is tried (SQLSTATE 54000). A longer name is cut on a
// UTF-8 boundary and ends in nameCutMarker and the first hashBytes bytes of
// the whole name's SHA-256 in hex, MaxNameBytes bytes in all, so that a
// reader sees it was cut and distinct long names stay distinct.
const MaxNameBytes = 512

// nameCutMarker separates a cut name from the hash of the whole.
const nameCutMarker = "…"

// hashBytes is how much of the SHA-256 a cut name keeps: 40 bits.
const hashBytes = 5

// cutName returns name cut to limit bytes, if it is longer, and whether it
// was.
func cutName(name string, limit int) (string, bool) {
	if len(name) <= limit {
		return name, false
	}
	sum := sha256.Sum256([]byte(name))
	tail := nameCutMarker + hex.EncodeToString(sum[:hashBytes])
	cut := max(limit-len(tail), 0)
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + tail, true
}

// cleanText makes s acceptable as PostgreSQL text, which must be valid
// UTF-8 without NUL bytes, where span names need be neither: one bad name
// must not make a whole flush fail forever.
func cleanText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return s
}

// toInt64 stores a count in a bigint column; counts past its range, which
// no real traffic reaches, saturate instead of turning negative.
func toInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

var (
	claimNames   = [...]string{ownership.ClaimMissing.String(), ownership.ClaimClaimed.String(), ownership.ClaimUnclaimed.String()}
	verdictNames = [...]string{"", dependencyanalysis.VerdictOwn.String(), dependencyanalysis.VerdictPropagated.String(), dependencyanalysis.VerdictCoincidental.String()}
)

// dictionary ranks the names a batch uses. Symbols resolve once each.
type dictionary struct {
	table  *dependencyanalysis.Symbols
	limit  int    // longest name in bytes; longer ones are cut
	cut    int    // distinct names cut
	used   []bool // by symbol
	extra  []string
	names  []string // sorted, distinct
	bySym  []uint32 // rank by symbol
	byName map[string]uint32
}

func (d *dictionary) use(sym dependencyanalysis.Symbol) {
	if int(sym) >= len(d.used) {
		d.used = append(d.used, make([]bool, int(sym)+1-len(d.used))...)
	}
	d.used[sym] = true
}

// rank sorts the used names and numbers them.
func (d *dictionary) rank() {
	names := append([]string(nil), d.extra...)
	resolved := make([]string, len(d.used))
	for sym, ok := range d.used {
		if ok && sym != 0 && d.table != nil {
			name, cut := cutName(cleanText(d.table.Name(dependencyanalysis.Symbol(sym))), d.limit)
			if cut {
				d.cut++
			}
			resolved[sym] = name
			names = append(names, name)
		}
	}
	slices.Sort(names)
	d.names = slices.Compact(names)
	d.byName = make(map[string]uint32, len(d.names))
	for i, n := range d.names {
		d.byName[n] = uint32(i)
	}
	d.bySym = make([]uint32, len(d.used))
	for sym, ok := range d.used {
		if ok {
			d.bySym[sym] = d.byName[resolved[sym]] // NoSymbol: ""
		}
	}
}

// of returns sym's rank; NoSymbol is "".
func (d *dictionary) of(sym dependencyanalysis.Symbol) uint32 { return d.bySym[sym] }

// peer returns a callee's rank; NoSymbol is "unknown".
func (d *dictionary) peer(sym dependencyanalysis.Symbol) uint32 {
	if sym == dependencyanalysis.NoSymbol {
		return d.byName[unknownPeer]
	}
	return d.bySym[sym]
}

// name returns sym's name; NoSymbol is "".
func (d *dictionary) name(sym dependencyanalysis.Symbol) string { return d.names[d.of(sym)] }

// newBatch turns a flush into rows, sorted by key within each table with
// equal keys merged, its names cut to maxName bytes. The order matters:
// concurrent writers lock rows in the same order and so never deadlock.
// Equal keys arise when two symbols resolve to one name (an absent peer and
// a peer named "unknown").
func newBatch(f *Flush, bucket time.Duration, maxName int) *batch {
	// The instance is part of the flushes table's key: it is bounded
	// like a name, keeping distinct instances distinct.
	instance, _ := cutName(cleanText(f.Instance), maxName)
	b := &batch{instance: instance, seq: int64(f.Seq), corrects: int64(f.Corrects), bucket: f.Bucket.Truncate(bucket).UTC()}
	for i, spec := range allSpecs {
		b.tables[i].spec = spec
	}
	s := f.Stats
	if s == nil {
		return b
	}

	// First pass: which names the rows use.
	d := &dictionary{table: f.Names, limit: maxName, extra: []string{"", unknownPeer}}
	d.extra = append(d.extra, claimNames[:]...)
	d.extra = append(d.extra, verdictNames[1:]...)
	d.use(dependencyanalysis.NoSymbol)
	for k := range s.Operations {
		d.use(k.Service)
		d.use(k.Operation)
	}
	for k := range s.Provisional {
		d.use(k.Service)
		d.use(k.Operation)
	}
	for k := range s.Edges {
		d.use(k.Service)
		d.use(k.Operation)
		d.use(k.PeerService)
		d.use(k.PeerOperation)
	}
	for k := range s.Depths {
		d.use(k.RootService)
		d.use(k.RootOperation)
		d.use(k.Service)
	}
	for k := range s.Roots {
		d.use(k.Service)
		d.use(k.Operation)
	}
	for k := range s.Addresses {
		d.use(k.Service)
		d.use(k.PeerService)
		d.use(k.Address)
	}
	for i := range s.Audit {
		e := &s.Audit[i]
		d.use(e.Service)
		d.use(e.Operation)
		d.use(e.PeerService)
		d.use(e.PeerOperation)
	}
	d.rank()
	b.names = d.names
	b.namesCut = d.cut

	var claimRank [3]uint32
	for i, n := range claimNames {
		claimRank[i] = d.byName[n]
	}
	var verdictRank [4]uint32
	for v := dependencyanalysis.VerdictOwn; v <= dependencyanalysis.VerdictCoincidental; v++ {
		verdictRank[v] = d.byName[verdictNames[v]]
	}

	// The verdict figures are the final verdicts (Operations) plus the
	// provisional ones, signed: a correction's rows are the difference
	// its final verdicts make, negative where they take one back.
	ops := make([]statRow, 0, len(s.Operations)+len(s.Provisional))
	var claims []statRow
	// op is nil for an operation with provisional verdicts only.
	addOp := func(k dependencyanalysis.OperationKey, op *dependencyanalysis.OperationStats, c *dependencyanalysis.VerdictCounts) {
		svc, name := d.of(k.Service), d.of(k.Operation)
		est := sumMethods(&c.Est)
		row := statRow{key: makeKey(svc, name, 0, 0), vals: [maxValues]int64{
			0, 0, c.Failed,
			c.Verdicts[dependencyanalysis.VerdictOwn],
			c.Verdicts[dependencyanalysis.VerdictPropagated],
			c.Verdicts[dependencyanalysis.VerdictCoincidental],
			c.ClaimsCorrect,
			c.ExpectedClaims[ownership.ClaimClaimed],
			c.ExpectedClaims[ownership.ClaimUnclaimed],
		}, ests: [maxValues]float64{
			0, 0, est.Failed,
			est.Verdicts[dependencyanalysis.VerdictOwn],
			est.Verdicts[dependencyanalysis.VerdictPropagated],
			est.Verdicts[dependencyanalysis.VerdictCoincidental],
			est.ClaimsCorrect,
			est.ExpectedClaims[ownership.ClaimClaimed],
			est.ExpectedClaims[ownership.ClaimUnclaimed],
		}}
		if op != nil {
			all := op.Estimate()
			row.vals[0], row.vals[1], row.vals[9] = toInt64(op.Served), toInt64(op.RetriesReceived), toInt64(op.Extrapolated)
			row.ests[0], row.ests[1] = all.Served, all.RetriesReceived
		}
		ops = append(ops, row)
		for sent := range c.Claims {
			for v := dependencyanalysis.VerdictOwn; v <= dependencyanalysis.VerdictCoincidental; v++ {
				if n := c.Claims[sent][v]; n != 0 {
					claims = append(claims, statRow{key: makeKey(svc, name, claimRank[sent], verdictRank[v]),
						vals: [maxValues]int64{n, n - seenCounted(c.Est[dependencyanalysis.SamplingCounted].Claims[sent][v])},
						ests: [maxValues]float64{est.Claims[sent][v]}})
				}
			}
		}
	}
	for k, op := range s.Operations {
		c := op.VerdictCounts()
		if p := s.Provisional[k]; p != nil {
			c.Merge(p)
		}
		addOp(k, op, &c)
	}
	for k, p := range s.Provisional {
		if _, ok := s.Operations[k]; !ok {
			addOp(k, nil, p)
		}
	}
	b.tables[tableOps].rows = ops
	b.tables[tableClaims].rows = claims

	edges := make([]statRow, 0, len(s.Edges))
	for k, e := range s.Edges {
		est := e.Estimate()
		edges = append(edges, statRow{key: makeKey(d.of(k.Service), d.of(k.Operation), d.peer(k.PeerService), d.of(k.PeerOperation)), vals: [maxValues]int64{
			toInt64(e.Calls), toInt64(e.FailedCalls), toInt64(e.Attempts), toInt64(e.Retries),
			toInt64(e.CallFailedRequestFailed), toInt64(e.CallOKRequestFailed),
			toInt64(e.Decisions[ownership.DecisionRetried]),
			toInt64(e.Decisions[ownership.DecisionSuppressedUnclaimed]),
			toInt64(e.Decisions[ownership.DecisionSuppressedBudget]),
			toInt64(e.Decisions[ownership.DecisionNoPolicy]),
			toInt64(e.Decisions[ownership.DecisionExhausted]),
			toInt64(e.FailedAlone), toInt64(e.FailedAloneRequestFailed),
			toInt64(e.Calls) - seenCounted(e.Est[dependencyanalysis.SamplingCounted].Calls),
		}, ests: [maxValues]float64{
			est.Calls, est.FailedCalls, est.Attempts, est.Retries,
			est.CallFailedRequestFailed, est.CallOKRequestFailed,
			est.Decisions[ownership.DecisionRetried],
			est.Decisions[ownership.DecisionSuppressedUnclaimed],
			est.Decisions[ownership.DecisionSuppressedBudget],
			est.Decisions[ownership.DecisionNoPolicy],
			est.Decisions[ownership.DecisionExhausted],
			est.FailedAlone, est.FailedAloneRequestFailed,
		}})
	}
	b.tables[tableEdges].rows = edges

	depths := make([]statRow, 0, len(s.Depths))
	for k, served := range s.Depths {
		depths = append(depths, statRow{
			key:  makeKey(d.of(k.RootService), d.of(k.RootOperation), uint32(int32(k.Depth)+smallintBias), d.of(k.Service)),
			vals: [maxValues]int64{toInt64(served.N), toInt64(served.N) - seenCounted(served.Est[dependencyanalysis.SamplingCounted])},
			ests: [maxValues]float64{served.Estimate()}})
	}
	b.tables[tableDepths].rows = depths

	roots := make([]statRow, 0, len(s.Roots))
	for k, r := range s.Roots {
		roots = append(roots, statRow{key: makeKey(d.of(k.Service), d.of(k.Operation), 0, 0),
			vals: [maxValues]int64{toInt64(r.Requests), int64(min(r.RadiusMax, math.MaxInt32)), toInt64(r.RadiusSum), toInt64(r.Extrapolated)},
			ests: [maxValues]float64{r.EstimatedRequests(), 0, r.EstimatedRadiusSum()}})
	}
	b.tables[tableRoots].rows = roots

	addresses := make([]statRow, 0, len(s.Addresses))
	for k, calls := range s.Addresses {
		addresses = append(addresses, statRow{key: makeKey(d.of(k.Service), d.peer(k.PeerService), d.of(k.Address), 0),
			vals: [maxValues]int64{toInt64(calls)}})
	}
	b.tables[tableAddresses].rows = addresses

	// One row a flush: a correction adds no traces, and writes none.
	b.tables[tableTraces].rows = []statRow{{vals: [maxValues]int64{
		toInt64(s.Traces), toInt64(s.Extrapolated), toInt64(s.CountedFailed),
		toInt64(s.Incomplete[dependencyanalysis.IncompleteMissingParent]),
		toInt64(s.Incomplete[dependencyanalysis.IncompleteMissingCallee]),
		toInt64(s.Incomplete[dependencyanalysis.IncompleteSampling]),
	}}}

	for i := range b.tables {
		b.tables[i].sortMerge()
		// A correction whose final verdicts count as the provisional
		// ones did nets to nothing, and writes nothing.
		b.tables[i].rows = slices.DeleteFunc(b.tables[i].rows, func(r statRow) bool { return r.empty() })
	}

	b.audit = make([]auditRow, 0, len(s.Audit))
	for _, e := range s.Audit {
		b.audit = append(b.audit, auditRow{
			time:    e.Time.AsTime().UTC(),
			traceID: hexID(e.TraceID[:]), spanID: hexID(e.SpanID[:]),
			service: d.name(e.Service), operation: d.name(e.Operation),
			peerService: d.names[d.peer(e.PeerService)], peerOperation: d.name(e.PeerOperation),
			sent: e.ClaimSent.String(), want: e.ClaimExpected.String(),
			weight: auditWeight(e.Weight),
		})
	}
	// A request analysed twice (its trace sent twice) has two entries:
	// each withdrawal deletes one.
	withdrawn := make(map[dependencyanalysis.AuditKey]int, len(s.Unaudit))
	for _, k := range s.Unaudit {
		if i, ok := withdrawn[k]; ok {
			b.unaudit[i].n++
			continue
		}
		withdrawn[k] = len(b.unaudit)
		b.unaudit = append(b.unaudit, unauditRow{time: k.Time.AsTime().UTC(), traceID: hexID(k.TraceID[:]), spanID: hexID(k.SpanID[:]), n: 1})
	}
	return b
}

// sortMerge sorts the rows by key and merges rows with equal keys, by sum
// or, for the columns the spec says, by maximum.
func (t *tableRows) sortMerge() {
	slices.SortFunc(t.rows, func(a, b statRow) int { return cmpKey(a.key, b.key) })
	out := t.rows[:0]
	for i := range t.rows {
		r := &t.rows[i]
		if len(out) > 0 && out[len(out)-1].key == r.key {
			last := &out[len(out)-1]
			for j, c := range t.spec.values {
				if c.greatest {
					last.vals[j] = max(last.vals[j], r.vals[j])
				} else {
					last.vals[j] += r.vals[j]
					last.ests[j] += r.ests[j]
				}
			}
			continue
		}
		out = append(out, *r)
	}
	t.rows = out
}

// empty reports whether r adds nothing: a correction whose final verdicts
// count as the provisional ones did. The estimates of a verdict taken back
// and given again by the same trace's weight cancel but for rounding.
func (r *statRow) empty() bool {
	if r.vals != [maxValues]int64{} {
		return false
	}
	for _, e := range r.ests {
		if math.Abs(e) > 1e-6 {
			return false
		}
	}
	return true
}

// seenCounted returns the count seen of an estimate by SamplingCounted:
// such a trace weighs exactly 1, so the estimate is the count. The count
// seen less it is the count extrapolated.
func seenCounted(est float64) int64 { return int64(math.Round(est)) }

// sumMethods returns estimates summed over the sampling methods.
func sumMethods(est *[2]dependencyanalysis.OperationCounts[float64]) dependencyanalysis.OperationCounts[float64] {
	var op dependencyanalysis.OperationStats
	op.Est = *est
	return op.Estimate()
}

// auditWeight is an entry's weight as stored: an entry from Stats built by
// hand, without one, counts once, as every entry did before weights.
func auditWeight(w float64) float64 {
	if w <= 0 || math.IsNaN(w) || math.IsInf(w, 0) {
		return 1
	}
	return w
}

// hexID spells a trace or span ID as lower-case hex, the form trace UIs
// search by; an all-zero (absent) ID is "".
func hexID(id []byte) string {
	for _, c := range id {
		if c != 0 {
			return hex.EncodeToString(id)
		}
	}
	return ""
}

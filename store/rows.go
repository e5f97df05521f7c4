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
	maxValues = 13
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

// statRow is one row of a statistics table.
type statRow struct {
	key  rowKey
	vals [maxValues]int64
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
}

type unauditRow struct {
	time            time.Time
	traceID, spanID string
	n               int32
}

// rows counts the rows b writes, and deletes.
func (b *batch) rows() int {
	n := len(b.audit) + len(b.unaudit)
	for _, t := range b.tables {
		n += len(t.rows)
	}
	return n
}

// countRows returns how many rows s makes, without making them: the writer
// bounds its queue by it.
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
	addOp := func(k dependencyanalysis.OperationKey, served, retries int64, c *dependencyanalysis.VerdictCounts) {
		svc, name := d.of(k.Service), d.of(k.Operation)
		ops = append(ops, statRow{makeKey(svc, name, 0, 0), [maxValues]int64{
			served, retries, c.Failed,
			c.Verdicts[dependencyanalysis.VerdictOwn],
			c.Verdicts[dependencyanalysis.VerdictPropagated],
			c.Verdicts[dependencyanalysis.VerdictCoincidental],
			c.ClaimsCorrect,
			c.ExpectedClaims[ownership.ClaimClaimed],
			c.ExpectedClaims[ownership.ClaimUnclaimed],
		}})
		for sent := range c.Claims {
			for v := dependencyanalysis.VerdictOwn; v <= dependencyanalysis.VerdictCoincidental; v++ {
				if n := c.Claims[sent][v]; n != 0 {
					claims = append(claims, statRow{makeKey(svc, name, claimRank[sent], verdictRank[v]), [maxValues]int64{n}})
				}
			}
		}
	}
	for k, op := range s.Operations {
		c := op.VerdictCounts()
		if p := s.Provisional[k]; p != nil {
			c.Merge(p)
		}
		addOp(k, toInt64(op.Served), toInt64(op.RetriesReceived), &c)
	}
	for k, p := range s.Provisional {
		if _, ok := s.Operations[k]; !ok {
			addOp(k, 0, 0, p)
		}
	}
	b.tables[tableOps].rows = ops
	b.tables[tableClaims].rows = claims

	edges := make([]statRow, 0, len(s.Edges))
	for k, e := range s.Edges {
		edges = append(edges, statRow{makeKey(d.of(k.Service), d.of(k.Operation), d.peer(k.PeerService), d.of(k.PeerOperation)), [maxValues]int64{
			toInt64(e.Calls), toInt64(e.FailedCalls), toInt64(e.Attempts), toInt64(e.Retries),
			toInt64(e.CallFailedRequestFailed), toInt64(e.CallOKRequestFailed),
			toInt64(e.Decisions[ownership.DecisionRetried]),
			toInt64(e.Decisions[ownership.DecisionSuppressedUnclaimed]),
			toInt64(e.Decisions[ownership.DecisionSuppressedBudget]),
			toInt64(e.Decisions[ownership.DecisionNoPolicy]),
			toInt64(e.Decisions[ownership.DecisionExhausted]),
			toInt64(e.FailedAlone), toInt64(e.FailedAloneRequestFailed),
		}})
	}
	b.tables[tableEdges].rows = edges

	depths := make([]statRow, 0, len(s.Depths))
	for k, served := range s.Depths {
		depths = append(depths, statRow{
			makeKey(d.of(k.RootService), d.of(k.RootOperation), uint32(int32(k.Depth)+smallintBias), d.of(k.Service)),
			[maxValues]int64{toInt64(served.N)}})
	}
	b.tables[tableDepths].rows = depths

	roots := make([]statRow, 0, len(s.Roots))
	for k, r := range s.Roots {
		roots = append(roots, statRow{makeKey(d.of(k.Service), d.of(k.Operation), 0, 0),
			[maxValues]int64{toInt64(r.Requests), int64(min(r.RadiusMax, math.MaxInt32)), toInt64(r.RadiusSum)}})
	}
	b.tables[tableRoots].rows = roots

	addresses := make([]statRow, 0, len(s.Addresses))
	for k, calls := range s.Addresses {
		addresses = append(addresses, statRow{makeKey(d.of(k.Service), d.peer(k.PeerService), d.of(k.Address), 0),
			[maxValues]int64{toInt64(calls)}})
	}
	b.tables[tableAddresses].rows = addresses

	for i := range b.tables {
		b.tables[i].sortMerge()
		// A correction whose final verdicts count as the provisional
		// ones did nets to nothing, and writes nothing.
		b.tables[i].rows = slices.DeleteFunc(b.tables[i].rows, func(r statRow) bool { return r.vals == [maxValues]int64{} })
	}

	b.audit = make([]auditRow, 0, len(s.Audit))
	for _, e := range s.Audit {
		b.audit = append(b.audit, auditRow{
			time:    e.Time.AsTime().UTC(),
			traceID: hexID(e.TraceID[:]), spanID: hexID(e.SpanID[:]),
			service: d.name(e.Service), operation: d.name(e.Operation),
			peerService: d.names[d.peer(e.PeerService)], peerOperation: d.name(e.PeerOperation),
			sent: e.ClaimSent.String(), want: e.ClaimExpected.String(),
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
				}
			}
			continue
		}
		out = append(out, *r)
	}
	t.rows = out
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

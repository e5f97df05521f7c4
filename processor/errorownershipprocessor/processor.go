// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/internal/figures"
	"github.com/errorownership/errorownership/internal/hintsserver"
	"github.com/errorownership/errorownership/internal/status"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/buffer"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadata"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/sink"
	"github.com/errorownership/errorownership/store"
)

// maxTake bounds how many traces a worker takes from its shard at once, so
// that it holds the shard's lock briefly.
const maxTake = 64

// symbolLimit bounds the names (services, operations, addresses) the
// processor holds at once; past it new names count as "_other" until the
// next flush sweeps the names nothing holds (sweepSymbols).
var symbolLimit = 1 << 20

// maxScratchSpans bounds the record buffer a pooled extractor keeps between
// batches, so that one huge batch does not stay resident.
const maxScratchSpans = 1 << 16

// ownershipProcessor passes traces on unchanged and analyses them on the
// side: records are extracted synchronously, buffered by trace ID, and
// analysed by one worker per buffer shard.
type ownershipProcessor struct {
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	flushEach time.Duration

	symbols *dependencyanalysis.Symbols
	// symbolsInUse is held for reading by whatever holds symbols that a
	// sweep could not find (records being extracted, traces taken from
	// the buffer, a model table being built), and for writing by the
	// sweep (sweepSymbols).
	symbolsInUse sync.RWMutex
	// edges is the edge model verdicts and hints read: the processor's
	// own, or the store's.
	edges      edges.Model
	storeModel *edges.Store // edges, with a store; nil without
	buffer     *buffer.Buffer
	workers    []*worker
	// scratch pools extractors with their record buffers: an Extractor is
	// not safe for concurrent use, and ConsumeTraces is called concurrently.
	scratch sync.Pool
	// sink receives the statistics; nil without a store section.
	sink sink.Sink
	// store and storeSink write the statistics; nil without a store
	// section, and until start opens them.
	store     *store.Store
	storeSink *sink.Store
	cfg       *Config
	id        component.ID
	// status reports the store's health to the collector, from start on.
	status *status.Reporter
	// stopHints ends the serving of the model by the hints extension; nil
	// without hints_extension.
	stopHints func()
	set       component.TelemetrySettings
	// auditLimit bounds the coincidental errors a bucket keeps per service
	// (dependencyanalysis.Stats.AuditLimit).
	auditLimit int

	lifecycle   sync.Mutex
	started     bool
	stopped     atomic.Bool // set first thing in Shutdown
	abort       atomic.Bool // shutdown ran out of time: drop what is left
	workersDone sync.WaitGroup
	flushDone   sync.WaitGroup
	stopFlush   chan struct{}

	flushing    sync.Mutex // serialises flushes
	merged      *dependencyanalysis.Stats
	bucketStart time.Time
	// gen is the generation of the bucket being filled; genStart when each
	// earlier generation's bucket began, while a held request may be of it.
	gen      uint64
	genStart map[uint64]time.Time
	// late are the final verdicts of held requests whose bucket was
	// flushed already, by generation: each is flushed to its own bucket.
	late map[uint64]*dependencyanalysis.Stats

	// maxHeld bounds each worker's held requests (rejudge.max_held over
	// the workers); maxAge is rejudge.max_age. maxHeld 0 holds none.
	maxHeld int
	maxAge  time.Duration

	verdictAttrs [4]metric.MeasurementOption
	// hub hands the figures to the errorownership connectors that listen
	// (figures.go); withdraw unpublishes it at shutdown, nil when a
	// connector created the processor for itself.
	hub      figures.Hub
	withdraw func()

	// rejudgedAttrs tell verdicts_rejudged's causes apart.
	rejudgedSettled, rejudgedAged, rejudgedEvicted, rejudgedShutdown metric.MeasurementOption
	reasonAttrs                                                      [5]metric.MeasurementOption
	// lateAttrs tell spans_late's causes apart: the trace was due, or evicted.
	lateDue, lateEvicted metric.MeasurementOption
}

// scratch is one goroutine's extraction state, pooled.
type scratch struct {
	ex      *dependencyanalysis.Extractor
	records []dependencyanalysis.Record
	buf     buffer.Scratch
}

// worker analyses one shard's traces.
type worker struct {
	p     *ownershipProcessor
	index int // the worker's, and its shard's, place
	shard *buffer.Shard
	an    *dependencyanalysis.Analyzer
	take  []*buffer.Entry
	spans []dependencyanalysis.Span // a trace's records, when they came in several batches

	mu    sync.Mutex // guards stats, spare and held against the flusher
	stats *dependencyanalysis.Stats
	spare *dependencyanalysis.Stats
	// held are the worker's failed requests whose verdict rested on edges
	// without a mode, oldest first, judged again at each flush.
	held    []heldRequest
	settled []dependencyanalysis.Verdict // scratch: the verdicts counted now
	// gen numbers the bucket the worker's stats are for; flush advances it.
	gen uint64
	// late are the final verdicts of held requests of buckets already
	// flushed, by generation, until the flusher takes them.
	lateMu sync.Mutex
	late   map[uint64]*dependencyanalysis.Stats
}

// heldRequest is a held failed request and the bucket its trace was counted
// in, by generation: its final verdict is counted in that bucket.
type heldRequest struct {
	dependencyanalysis.Held
	gen uint64
}

// unlinkedReasons are the values of the reason attribute, in unlinked's order.
var unlinkedReasons = [5]string{"orphan", "duplicate", "self_parent", "cycle", "root_outbound"}

// unlinked lists what could not be linked by reason.
func unlinked(l *dependencyanalysis.LinkStats) [5]uint64 {
	return [5]uint64{l.Orphans, l.Duplicates, l.SelfParents, l.Cycles, l.RootOutbound}
}

func newOwnershipProcessor(set processor.Settings, cfg *Config) (*ownershipProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	engine := cfg.Engine()
	workers := cfg.NumWorkers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &ownershipProcessor{
		logger:      set.Logger,
		telemetry:   tb,
		flushEach:   cfg.FlushInterval,
		symbols:     dependencyanalysis.NewSymbols(symbolLimit),
		buffer:      buffer.New(workers, cfg.MaxTraces, cfg.MaxSpans, cfg.DecisionWait),
		stopFlush:   make(chan struct{}),
		bucketStart: time.Now(),
		auditLimit:  cfg.auditLimit(),
	}
	p.merged = p.newStats()
	p.genStart, p.late = make(map[uint64]time.Time), make(map[uint64]*dependencyanalysis.Stats)
	if cfg.Rejudge.holds() {
		p.maxHeld, p.maxAge = max(cfg.Rejudge.MaxHeld/workers, 1), cfg.Rejudge.MaxAge
	}
	p.set = set.TelemetrySettings
	p.cfg, p.id = cfg, set.ID
	own := dependencyanalysis.NewEdgeModel(engine.EdgeModel, dependencyanalysis.WithClock(time.Now))
	p.edges = edges.NewOwn(own, p.symbols, &p.symbolsInUse)
	p.scratch.New = func() any {
		return &scratch{ex: dependencyanalysis.NewExtractor(engine, p.symbols)}
	}
	for i, s := range p.buffer.Shards() {
		p.workers = append(p.workers, &worker{
			p:     p,
			index: i,
			shard: s,
			an:    dependencyanalysis.NewAnalyzer(),
			take:  make([]*buffer.Entry, 0, maxTake),
			stats: p.newStats(),
			spare: p.newStats(),
			late:  make(map[uint64]*dependencyanalysis.Stats),
		})
	}
	for k := dependencyanalysis.VerdictOwn; k <= dependencyanalysis.VerdictCoincidental; k++ {
		p.verdictAttrs[k] = metric.WithAttributeSet(attribute.NewSet(attribute.String("verdict", k.String())))
	}
	for i, r := range unlinkedReasons {
		p.reasonAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
	}
	p.lateDue = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", "decision_wait")))
	p.lateEvicted = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", "evicted")))
	p.rejudgedSettled = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", "settled")))
	p.rejudgedAged = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", "aged_out")))
	p.rejudgedEvicted = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", "evicted")))
	p.rejudgedShutdown = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", "shutdown")))
	err = tb.RegisterProcessorErrorownershipBufferTracesCallback(func(_ context.Context, o metric.Int64Observer) error {
		traces, _ := p.buffer.Occupancy()
		o.Observe(int64(traces))
		return nil
	})
	if err == nil {
		err = tb.RegisterProcessorErrorownershipBufferSpansCallback(func(_ context.Context, o metric.Int64Observer) error {
			_, spans := p.buffer.Occupancy()
			o.Observe(int64(spans))
			return nil
		})
	}
	if err == nil && !cfg.Store.HasValue() { // with a store, start replaces the own model by the merged one
		err = tb.RegisterProcessorErrorownershipEdgesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(own.Len()))
			return nil
		})
		if err == nil {
			err = tb.RegisterProcessorErrorownershipEdgesEvictedCallback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(int64(own.Evicted()))
				return nil
			})
		}
	}
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return p, nil
}

// newStats returns empty statistics with the audit bounded.
func (p *ownershipProcessor) newStats() *dependencyanalysis.Stats {
	s := dependencyanalysis.NewStats()
	s.AuditLimit = p.auditLimit
	return s
}

// processTraces is the pass-through: it reads td on the side and returns
// it, unchanged, for processorhelper to hand to the next consumer.
func (p *ownershipProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	p.observe(ctx, td)
	return td, nil
}

// observe extracts td's records and buffers them. It never panics: the
// pipeline must not fail because the analysis did.
func (p *ownershipProcessor) observe(ctx context.Context, td ptrace.Traces) {
	if p.stopped.Load() {
		return
	}
	tb := p.telemetry
	counted := false
	defer func() {
		if r := recover(); r != nil {
			if !counted {
				tb.ProcessorErrorownershipSpansSeen.Add(ctx, int64(td.SpanCount()))
			}
			p.recovered(ctx, "extracting and buffering spans", r)
		}
	}()
	sc := p.scratch.Get().(*scratch)
	var c buffer.Counts
	p.symbolsInUse.RLock()
	sc.records = sc.ex.Append(sc.records[:0], td)
	malformed, legacy := int64(sc.ex.Malformed), int64(sc.ex.Legacy)
	sc.ex.Malformed, sc.ex.Legacy = 0, 0
	// Counted from the extraction rather than td.SpanCount(), which would
	// walk the batch a second time on the pipeline's goroutine.
	tb.ProcessorErrorownershipSpansSeen.Add(ctx, int64(len(sc.records))+malformed)
	counted = true
	p.buffer.Add(sc.records, &sc.buf, p.buffer.Now(), &c)
	p.symbolsInUse.RUnlock()
	if cap(sc.records) > maxScratchSpans {
		sc.records, sc.buf = nil, buffer.Scratch{}
	}
	// A scratch is put back only after a clean run: one that panicked may
	// hold an extractor in a broken state.
	p.scratch.Put(sc)

	if malformed > 0 {
		tb.ProcessorErrorownershipSpansMalformed.Add(ctx, malformed)
	}
	if legacy > 0 {
		tb.ProcessorErrorownershipSpansLegacyAttributes.Add(ctx, legacy)
	}
	if c.Late > 0 {
		tb.ProcessorErrorownershipSpansLate.Add(ctx, c.Late, p.lateDue)
	}
	if c.LateEvicted > 0 {
		tb.ProcessorErrorownershipSpansLate.Add(ctx, c.LateEvicted, p.lateEvicted)
	}
	if c.Evicted > 0 {
		tb.ProcessorErrorownershipTracesEvicted.Add(ctx, c.Evicted)
	}
	if c.Dropped > 0 {
		tb.ProcessorErrorownershipSpansDropped.Add(ctx, c.Dropped)
	}
}

// recovered counts and logs a panic of the side path.
func (p *ownershipProcessor) recovered(ctx context.Context, doing string, r any) {
	p.telemetry.ProcessorErrorownershipPanicsRecovered.Add(ctx, 1)
	p.logger.Error("Recovered from a panic in the error-ownership analysis; the spans were passed on unanalysed",
		zap.String("while", doing), zap.String("panic", fmt.Sprint(r)), zap.Stack("stack"))
}

// start opens the store, hands the model to the hints extension, and
// launches the workers and the flush ticker. A database that is down or
// refuses the password does not fail it: the processor reports a
// recoverable error, keeps the flushes in memory within
// store.max_pending_rows, and reports OK again once it can write.
func (p *ownershipProcessor) start(ctx context.Context, host component.Host) error {
	p.lifecycle.Lock()
	defer p.lifecycle.Unlock()
	if p.started || p.stopped.Load() {
		return nil
	}
	p.status = status.New(host)
	if err := p.openStore(ctx); err != nil {
		return err
	}
	if err := p.serveHints(host); err != nil {
		p.closeStore()
		return err
	}
	if p.storeSink != nil {
		if err := p.storeSink.Writer.Start(ctx); err != nil {
			p.closeStore()
			return err
		}
		p.logger.Info("Writing error-ownership statistics", zap.Stringer("store", p.store))
	}
	if p.storeModel != nil {
		p.storeModel.Start()
	}
	p.started = true
	for _, w := range p.workers {
		p.workersDone.Add(1)
		go func() {
			defer p.workersDone.Done()
			w.loop(w.run)
		}()
	}
	p.flushDone.Add(1)
	go func() {
		defer p.flushDone.Done()
		p.flushLoop()
	}()
	return nil
}

// openStore opens the store of the store section, if any: the writer of
// the statistics and the merged model the verdicts read.
func (p *ownershipProcessor) openStore(ctx context.Context) error {
	if !p.cfg.Store.HasValue() {
		return nil
	}
	scfg := *p.cfg.Store.Get()
	st, err := store.Open(ctx, scfg)
	if err != nil {
		return err
	}
	p.store = st
	p.storeSink = sink.NewStore(st, p.logger, store.WithStatus(func(err error) {
		p.status.Set("writing statistics to the store", err)
	}))
	if err := p.storeSink.RegisterTelemetry(p.telemetry); err != nil {
		st.Close()
		return err
	}
	p.sink = p.storeSink
	p.storeModel = edges.NewStore(st, p.cfg.Engine().EdgeModel, p.symbols, &p.symbolsInUse, scfg.ModelRefresh, p.logger)
	p.storeModel.OnRead(func(err error) { p.status.Set("reading the edge model from the store", err) })
	p.edges = p.storeModel
	return nil
}

// closeStore closes what openStore opened, when start fails after it.
func (p *ownershipProcessor) closeStore() {
	if p.store != nil {
		p.store.Close()
	}
}

// serveHints hands the model to the errorownership_hints extension that
// hints_extension names, found among the host's extensions.
func (p *ownershipProcessor) serveHints(host component.Host) error {
	id := p.cfg.HintsExtension
	if id == nil {
		return nil
	}
	ext, ok := host.GetExtensions()[*id]
	if !ok {
		return fmt.Errorf("hints_extension: no extension %s in this collector; configure it under extensions and list it in service.extensions", id)
	}
	reg, ok := ext.(hintsserver.Registry)
	if !ok {
		return fmt.Errorf("hints_extension: %s is not an errorownership_hints extension", id)
	}
	stop, err := reg.ServeModelOf(p.id, p.edges)
	if err != nil {
		return err
	}
	p.stopHints = stop
	return nil
}

// shutdown stops buffering, analyses everything buffered, flushes the
// statistics and waits for every goroutine. It may be called more than
// once, and without start.
func (p *ownershipProcessor) shutdown(ctx context.Context) error {
	p.lifecycle.Lock()
	defer p.lifecycle.Unlock()
	if p.stopped.Swap(true) {
		return nil
	}
	if p.stopHints != nil {
		p.stopHints()
	}
	if p.status != nil {
		p.status.Stop()
	}
	if p.storeModel != nil {
		p.storeModel.Shutdown()
	}
	for _, s := range p.buffer.Shards() {
		s.Close()
	}
	// Out of time, the workers drop what is left; they are still waited
	// for, so that none outlives the processor.
	stop := context.AfterFunc(ctx, func() { p.abort.Store(true) })
	defer stop()
	if ctx.Err() != nil {
		p.abort.Store(true) // rather than whenever AfterFunc's goroutine runs
	}
	if p.started {
		p.workersDone.Wait()
		close(p.stopFlush)
		p.flushDone.Wait()
	} else {
		for _, w := range p.workers {
			w.loop(w.drain)
		}
	}
	var err error
	if p.abort.Load() {
		err = ctx.Err()
	}
	p.flush(ctx, true)
	if p.withdraw != nil {
		p.withdraw()
	}
	var storeErr error
	if p.storeSink != nil {
		// The writer drains what is queued, the last bucket included,
		// for at most store.shutdown_timeout, and logs, counts and
		// reports what it could not write.
		storeErr = p.storeSink.Writer.Shutdown(ctx)
		p.store.Close()
	}
	p.telemetry.Shutdown()
	return errors.Join(err, storeErr)
}

// loop calls work until it returns. A panic in the buffer code is
// recovered and counted, and work called again: the collector must not
// crash because the analysis did, and the shard must still be drained.
func (w *worker) loop(work func()) {
	for returned := false; !returned; {
		returned = w.safely(work)
	}
}

func (w *worker) safely(work func()) (returned bool) {
	defer func() {
		if r := recover(); r != nil {
			w.p.recovered(context.Background(), "taking traces from the buffer", r)
		}
	}()
	work()
	return true
}

// run analyses the shard's traces as they become due or are handed over,
// until the shard is closed and empty.
func (w *worker) run() {
	s := w.shard
	queued, handed := s.Signals()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// lookAt is when the queue's head is due; the worker takes mu only then,
	// or when told the queue changed, never for each trace handed over.
	var lookAt int64
	const never = math.MaxInt64
	for {
		// Traces taken from the buffer hold symbols a sweep would not
		// find there: the lock is held until they are analysed.
		w.p.symbolsInUse.RLock()
		batch := s.TakeHanded(w.take[:0])
		now := w.p.buffer.Now()
		if len(batch) < cap(batch) && now >= lookAt {
			var wait time.Duration
			var done bool
			batch, wait, done = s.TakeDue(now, batch)
			if done && len(batch) == 0 {
				w.p.symbolsInUse.RUnlock()
				return
			}
			switch {
			case done || len(batch) == cap(batch):
				lookAt = 0 // draining, or more may be due
			case wait > 0:
				lookAt = now + int64(wait)
			default:
				lookAt = never // empty: queued says when not
			}
		}
		if len(batch) > 0 {
			w.analyse(batch)
			w.p.symbolsInUse.RUnlock()
			continue
		}
		w.p.symbolsInUse.RUnlock()
		if lookAt != never {
			timer.Reset(time.Duration(lookAt - now))
		}
		select {
		case <-queued:
			lookAt = 0
		case <-handed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// drain analyses everything left in a closed shard, in the caller's goroutine.
func (w *worker) drain() {
	for {
		w.p.symbolsInUse.RLock()
		batch := w.shard.TakeHanded(w.take[:0])
		batch, _, done := w.shard.TakeDue(w.p.buffer.Now(), batch)
		w.analyse(batch)
		w.p.symbolsInUse.RUnlock()
		if done && len(batch) == 0 {
			return
		}
	}
}

// tally sums what analysing a batch of traces observed, so that telemetry
// is recorded once per batch rather than once per trace.
type tally struct {
	traces, panics, dropped int64
	timed                   int // traces whose analysis was timed (durationSampled)
	verdicts                [4]int64
	held                    int64    // verdicts held to be judged again
	evicted                 [4]int64 // held verdicts pushed out by max_held, by final verdict
	link                    dependencyanalysis.LinkStats
	durations               [maxTake]float64
}

func (w *worker) analyse(batch []*buffer.Entry) {
	if len(batch) == 0 {
		return
	}
	var t tally
	for i, e := range batch {
		if w.p.abort.Load() {
			t.dropped += int64(e.Len())
		} else if ms, timed, ok := w.analyseTrace(e, &t); ok {
			if timed {
				t.durations[t.timed] = ms
				t.timed++
			}
			t.traces++
		}
		batch[i] = nil
	}
	ctx := context.Background()
	tb := w.p.telemetry
	if t.traces > 0 {
		tb.ProcessorErrorownershipTracesAnalyzed.Add(ctx, t.traces)
		for _, ms := range t.durations[:t.timed] {
			tb.ProcessorErrorownershipAnalysisDuration.Record(ctx, ms)
		}
	}
	for k, n := range t.verdicts {
		if n > 0 {
			tb.ProcessorErrorownershipVerdicts.Add(ctx, n, w.p.verdictAttrs[k])
		}
	}
	if t.held > 0 {
		tb.ProcessorErrorownershipVerdictsHeld.Add(ctx, t.held)
	}
	var evicted int64
	for k, n := range t.evicted {
		if n > 0 {
			tb.ProcessorErrorownershipVerdicts.Add(ctx, n, w.p.verdictAttrs[k])
			evicted += n
		}
	}
	if evicted > 0 {
		tb.ProcessorErrorownershipVerdictsRejudged.Add(ctx, evicted, w.p.rejudgedEvicted)
	}
	for i, n := range unlinked(&t.link) {
		if n > 0 {
			tb.ProcessorErrorownershipSpansUnlinked.Add(ctx, int64(n), w.p.reasonAttrs[i])
		}
	}
	if t.dropped > 0 {
		tb.ProcessorErrorownershipSpansDropped.Add(ctx, t.dropped)
	}
	if t.panics > 0 {
		tb.ProcessorErrorownershipPanicsRecovered.Add(ctx, t.panics)
	}
}

// analyseTrace runs the engine over one trace and reports whether it did,
// and, if it was timed (durationSampled), how long it took in milliseconds. A panic is recovered and counted, and the analyzer
// replaced, since its buffers may be inconsistent.
func (w *worker) analyseTrace(e *buffer.Entry, t *tally) (ms float64, timed, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			t.panics++
			w.an = dependencyanalysis.NewAnalyzer()
			w.p.logger.Error("Recovered from a panic in the error-ownership analysis; the trace was not analysed",
				zap.String("trace_id", e.ID.String()), zap.String("panic", fmt.Sprint(r)), zap.Stack("stack"))
		}
	}()
	timed = durationSampled(e.ID)
	var start time.Time
	if timed {
		start = time.Now()
	}
	tr := w.an.Link(e.ID, e.Spans(&w.spans))
	w.p.edges.Observe(tr)
	modes := w.p.edges.Modes()
	verdicts := w.an.Judge(tr, modes)
	w.add(tr, verdicts, modes, t)
	if timed {
		ms = float64(time.Since(start)) / float64(time.Millisecond)
	}
	t.link.Add(tr.Link)
	return ms, timed, true
}

// durationSampled reports whether the analysis of trace id is timed for
// analysis_duration: one trace in eight, by bits of its ID, which are
// random, so that the histogram's shape is the traces' while a one-span
// trace does not pay for two clock reads and a histogram update, which
// cost as much as its analysis.
func durationSampled(id pcommon.TraceID) bool { return (id[15]^id[7])&7 == 0 }

// add counts the trace and its settled verdicts, and holds the unsettled
// ones to be judged again; past maxHeld the oldest held is judged for the
// last time, by modes.
func (w *worker) add(tr *dependencyanalysis.Trace, verdicts []dependencyanalysis.Verdict, modes dependencyanalysis.Modes, t *tally) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var now time.Time // when held requests were judged first; read only if one is
	w.settled = w.settled[:0]
	for i := range verdicts {
		v := &verdicts[i]
		if !v.Unsettled || w.p.maxHeld == 0 {
			w.settled = append(w.settled, *v)
			t.verdicts[v.Kind]++
			w.p.countedRequest(tr, v)
			continue
		}
		if len(w.held) >= w.p.maxHeld {
			oldest := &w.held[0]
			final, _ := oldest.Rejudge(modes)
			w.statsOf(oldest.gen).AddHeld(&oldest.Held, &final)
			w.p.countedHeld(&oldest.Held, &final)
			t.evicted[final.Kind]++
			w.held[0] = heldRequest{}
			w.held = w.held[1:]
		}
		if now.IsZero() {
			now = time.Now()
		}
		w.held = append(w.held, heldRequest{Held: dependencyanalysis.Hold(tr, v, now), gen: w.gen})
		t.held++
	}
	w.stats.Add(tr, w.settled)
}

// statsOf returns the statistics a final verdict of generation gen is
// counted in: the worker's own for the bucket being filled, else the late
// ones of gen's bucket, flushed at the next flush. It needs w.mu.
func (w *worker) statsOf(gen uint64) *dependencyanalysis.Stats {
	if gen == w.gen {
		return w.stats
	}
	w.lateMu.Lock()
	defer w.lateMu.Unlock()
	s := w.late[gen]
	if s == nil {
		s = w.p.newStats()
		w.late[gen] = s
	}
	return s
}

// rejudge judges the held requests again by modes, and counts those whose
// edges now have a mode, those held since before agedBefore, and, when
// final, all: the verdicts each final and counted once. It returns how
// many it counted for each cause and verdict.
func (w *worker) rejudge(modes dependencyanalysis.Modes, agedBefore time.Time, final bool) (settled, aged int64, kinds [4]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.held[:0]
	for i := range w.held {
		h := &w.held[i]
		v, ok := h.Rejudge(modes)
		switch {
		case ok:
			settled++
		case final || h.At.Before(agedBefore):
			aged++
		default:
			kept = append(kept, *h)
			continue
		}
		w.statsOf(h.gen).AddHeld(&h.Held, &v)
		w.p.countedHeld(&h.Held, &v)
		kinds[v.Kind]++
	}
	clear(w.held[len(kept):])
	w.held = kept
	return settled, aged, kinds
}

// swap hands the worker's statistics to the flusher and gives it the empty
// spare to fill meanwhile.
func (w *worker) swap() *dependencyanalysis.Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	full := w.stats
	w.stats, w.spare = w.spare, nil
	w.gen++
	return full
}

// giveBack returns flushed statistics to the worker as its next spare.
func (w *worker) giveBack(s *dependencyanalysis.Stats) {
	s.Reset()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spare = s
}

func (p *ownershipProcessor) flushLoop() {
	ticker := time.NewTicker(p.flushEach)
	defer ticker.Stop()
	for {
		select {
		case <-p.stopFlush:
			return
		case <-ticker.C:
			ctx, cancel := context.WithTimeout(context.Background(), p.flushEach)
			p.flush(ctx, false)
			cancel()
		}
	}
}

// flush merges the workers' statistics into one bucket and hands it to the
// sink. The bucket ends now and the next one starts here, empty or not, so
// that buckets tile time.
func (p *ownershipProcessor) flush(ctx context.Context, final bool) {
	p.flushing.Lock()
	defer p.flushing.Unlock()
	p.rejudge(final)
	for _, w := range p.workers {
		s := w.swap()
		p.merged.Merge(s)
		w.giveBack(s)
	}
	end := time.Now()
	snap := &sink.Snapshot{Stats: p.merged, Symbols: p.symbols, Start: p.bucketStart, End: end}
	p.genStart[p.gen] = p.bucketStart
	p.gen++
	p.bucketStart = end
	if p.sink != nil && !p.merged.Empty() {
		if err := p.flushTo(ctx, snap); err != nil {
			p.logger.Warn("Dropped an error-ownership statistics bucket: the sink failed",
				zap.Time("start", snap.Start), zap.Time("end", snap.End), zap.Error(err))
		}
	}
	p.flushed(snap)
	p.merged.Reset()
	p.flushLate(ctx)
	p.sweepSymbols()
	for _, s := range p.buffer.Shards() {
		s.Compact()
	}
}

// flushLate hands on the final verdicts of held requests whose buckets were
// flushed before, each to its own bucket, where the store merges them.
func (p *ownershipProcessor) flushLate(ctx context.Context) {
	for _, w := range p.workers {
		w.lateMu.Lock()
		for gen, s := range w.late {
			if into := p.late[gen]; into != nil {
				into.Merge(s)
			} else {
				p.late[gen] = s
			}
			delete(w.late, gen)
		}
		w.lateMu.Unlock()
	}
	for gen, s := range p.late {
		start := p.genStart[gen]
		snap := &sink.Snapshot{Stats: s, Symbols: p.symbols, Start: start, End: start.Add(p.flushEach)}
		if p.sink != nil && !s.Empty() {
			if err := p.flushTo(ctx, snap); err != nil {
				p.logger.Warn("Dropped the final verdicts of held requests: the sink failed",
					zap.Time("bucket", start), zap.Error(err))
			}
		}
		p.flushed(snap)
		delete(p.late, gen)
	}
	// A bucket whose held requests have all been judged is forgotten.
	oldest := p.gen
	for _, w := range p.workers {
		w.mu.Lock()
		if len(w.held) > 0 {
			oldest = min(oldest, w.held[0].gen)
		}
		w.mu.Unlock()
	}
	for gen := range p.genStart {
		if gen < oldest {
			delete(p.genStart, gen)
		}
	}
}

// rejudge judges every worker's held requests again, counting the final
// ones in the worker's statistics before they are swapped out; final
// counts them all, as shutdown must.
func (p *ownershipProcessor) rejudge(final bool) {
	if p.maxHeld == 0 {
		return
	}
	modes := p.edges.Modes()
	agedBefore := time.Now().Add(-p.maxAge)
	var settled, aged int64
	var kinds [4]int64
	for _, w := range p.workers {
		s, a, k := w.rejudge(modes, agedBefore, final)
		settled, aged = settled+s, aged+a
		for i, n := range k {
			kinds[i] += n
		}
	}
	ctx := context.Background()
	tb := p.telemetry
	for k, n := range kinds {
		if n > 0 {
			tb.ProcessorErrorownershipVerdicts.Add(ctx, n, p.verdictAttrs[k])
		}
	}
	if settled > 0 {
		tb.ProcessorErrorownershipVerdictsRejudged.Add(ctx, settled, p.rejudgedSettled)
	}
	if aged > 0 {
		cause := p.rejudgedAged
		if final {
			cause = p.rejudgedShutdown
		}
		tb.ProcessorErrorownershipVerdictsRejudged.Add(ctx, aged, cause)
	}
}

// sweepAt is how full the symbol table may get before a flush sweeps it.
const sweepAt = 0.75

// forgetAfter is how many half-lives an edge of the processor's own model
// may go unobserved before a sweep forgets it: its evidence weighs under
// 2^-30 by then.
const forgetAfter = 30

// sweepSymbols frees the names nothing holds any more once the table is
// filling up, so that a burst of high-cardinality names (spans named by
// their SQL or their URL) does not freeze the names for good. Extraction
// and analysis pause meanwhile: the marking walks every buffered record.
func (p *ownershipProcessor) sweepSymbols() {
	if !p.symbols.Full(sweepAt) {
		return
	}
	p.symbolsInUse.Lock()
	defer p.symbolsInUse.Unlock()
	start := time.Now()
	if own, ok := p.edges.(*edges.Own); ok {
		if hl := own.EdgeModel().Config().HalfLife; hl > 0 {
			own.EdgeModel().Forget(start.Add(-forgetAfter * hl))
		}
	}
	freed := p.symbols.Sweep(func(keep func(dependencyanalysis.Symbol)) {
		for _, s := range p.buffer.Shards() {
			s.Symbols(keep)
		}
		for _, w := range p.workers {
			w.mu.Lock()
			w.stats.Symbols(keep)
			if w.spare != nil {
				w.spare.Symbols(keep)
			}
			for i := range w.held {
				w.held[i].Symbols(keep)
			}
			w.lateMu.Lock()
			for _, late := range w.late {
				late.Symbols(keep)
			}
			w.lateMu.Unlock()
			w.mu.Unlock()
		}
		p.merged.Symbols(keep)
		p.edges.Symbols(keep)
	})
	p.logger.Info("Swept the error-ownership name table",
		zap.Int("freed", freed), zap.Int("kept", p.symbols.Len()), zap.Duration("took", time.Since(start)))
}

// flushTo calls the sink, turning its panic into an error.
func (p *ownershipProcessor) flushTo(ctx context.Context, snap *sink.Snapshot) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p.telemetry.ProcessorErrorownershipPanicsRecovered.Add(ctx, 1)
			err = fmt.Errorf("sink panicked: %v", r)
		}
	}()
	return p.sink.Flush(ctx, snap)
}

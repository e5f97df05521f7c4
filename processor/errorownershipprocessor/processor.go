// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/internal/figures"
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

// maxScratchSpans bounds the spans a pooled extractor's batch keeps between
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
	// callees remembers the instrumented destinations, so that a trace
	// missing a callee's spans is set apart (Callees.Check).
	callees *dependencyanalysis.Callees
	buffer  *buffer.Buffer
	workers []*worker
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
	// gen is the generation of the bucket being filled; gens are the
	// earlier generations' buckets, while a held request may be of one.
	gen  uint64
	gens map[uint64]genBucket
	// late are the corrections of held requests whose bucket was flushed
	// already, by generation: each is flushed to its own bucket.
	late map[uint64]*dependencyanalysis.Stats
	// seq numbers the snapshots handed to the sink.
	seq uint64

	// maxHeld bounds each worker's held requests (rejudge.max_held over
	// the workers); maxAge is rejudge.max_age. maxHeld 0 holds none.
	maxHeld int
	maxAge  time.Duration

	// The attributes of the processor's counters, as the options Add
	// takes: a slice built once, since passing one option builds a slice
	// at each call, an allocation on the workers' path.
	verdictAttrs [4][]metric.AddOption
	// hub hands the figures to the errorownership connectors that listen
	// (figures.go); withdraw unpublishes it at shutdown, nil when a
	// connector created the processor for itself.
	hub      figures.Hub
	withdraw func()

	// rejudgedAttrs tell verdicts_rejudged's causes apart.
	rejudgedSettled, rejudgedAged, rejudgedEvicted, rejudgedShutdown []metric.AddOption
	reasonAttrs                                                      [5][]metric.AddOption
	// samplingAttrs and incompleteAttrs tell traces_sampling's methods
	// and traces_incomplete's reasons apart, by their values.
	samplingAttrs   [2][]metric.AddOption
	incompleteAttrs [4][]metric.AddOption
	// unweighed is whether the last flush's figures were called not
	// estimates of traffic (sampling.warn_failed_share); under flushing.
	unweighed bool
	// lateAttrs tell spans_late's causes apart: the trace was due, or evicted.
	lateDue, lateEvicted []metric.AddOption
}

// addOption is the option to Add that gives a counter attribute key the
// value v.
func addOption(key, v string) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(key, v)))}
}

// scratch is one goroutine's extraction state, pooled.
type scratch struct {
	ex    *dependencyanalysis.Extractor
	batch dependencyanalysis.Batch
	buf   buffer.Scratch
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
		auditLimit:  -1, // until start finds a store
	}
	p.merged = p.newStats()
	p.gens, p.late = make(map[uint64]genBucket), make(map[uint64]*dependencyanalysis.Stats)
	if cfg.Rejudge.holds() {
		p.maxHeld, p.maxAge = max(cfg.Rejudge.MaxHeld/workers, 1), cfg.Rejudge.MaxAge
	}
	p.set = set.TelemetrySettings
	p.cfg, p.id = cfg, set.ID
	own := dependencyanalysis.NewEdgeModel(engine.EdgeModel, dependencyanalysis.WithClock(time.Now))
	p.edges = edges.NewOwn(own, p.symbols, &p.symbolsInUse)
	p.callees = dependencyanalysis.NewCallees(engine.EdgeModel.MaxEdges)
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
		p.verdictAttrs[k] = addOption("verdict", k.String())
	}
	for _, m := range []dependencyanalysis.SamplingMethod{dependencyanalysis.SamplingCounted, dependencyanalysis.SamplingExtrapolated} {
		p.samplingAttrs[m] = addOption("sampling_method", m.String())
	}
	for _, r := range dependencyanalysis.IncompleteReasons() {
		p.incompleteAttrs[r] = addOption("incomplete", r.String())
	}
	for i, r := range unlinkedReasons {
		p.reasonAttrs[i] = addOption("reason", r)
	}
	p.lateDue = addOption("cause", "decision_wait")
	p.lateEvicted = addOption("cause", "evicted")
	p.rejudgedSettled = addOption("cause", "settled")
	p.rejudgedAged = addOption("cause", "aged_out")
	p.rejudgedEvicted = addOption("cause", "evicted")
	p.rejudgedShutdown = addOption("cause", "shutdown")
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
	if err == nil && cfg.Store == nil { // with a store, start replaces the own model by the merged one
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
	sc.batch.Reset()
	sc.ex.Extract(&sc.batch, td)
	malformed, legacy := int64(sc.ex.Malformed), int64(sc.ex.Legacy)
	sc.ex.Malformed, sc.ex.Legacy = 0, 0
	// Counted from the extraction rather than td.SpanCount(), which would
	// walk the batch a second time on the pipeline's goroutine.
	tb.ProcessorErrorownershipSpansSeen.Add(ctx, int64(len(sc.batch.Spans))+malformed)
	counted = true
	p.buffer.Add(&sc.batch, &sc.buf, p.buffer.Now(), &c)
	p.symbolsInUse.RUnlock()
	if cap(sc.batch.Spans) > maxScratchSpans {
		sc.batch, sc.buf = dependencyanalysis.Batch{}, buffer.Scratch{}
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
		tb.ProcessorErrorownershipSpansLate.Add(ctx, c.Late, p.lateDue...)
	}
	if c.LateEvicted > 0 {
		tb.ProcessorErrorownershipSpansLate.Add(ctx, c.LateEvicted, p.lateEvicted...)
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

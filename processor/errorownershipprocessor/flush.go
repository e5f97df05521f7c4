// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/sink"
)

// flushLoop flushes every flush_interval until shutdown.
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
	p.checkSampling(p.merged)
	end := time.Now()
	snap := &sink.Snapshot{Stats: p.merged, Symbols: p.symbols, Start: p.bucketStart, End: end}
	if p.sink != nil && !p.merged.Empty() {
		p.seq++
		snap.Seq = p.seq
	}
	p.gens[p.gen] = genBucket{start: p.bucketStart, seq: snap.Seq}
	p.gen++
	p.bucketStart = end
	if snap.Seq != 0 {
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

// genBucket is a flushed generation's bucket: when it began, and the Seq
// of its snapshot (0: none was handed to the sink).
type genBucket struct {
	start time.Time
	seq   uint64
}

// flushLate hands on the corrections of held requests whose buckets were
// flushed before, each to its own bucket as a correction of that bucket's
// snapshot, which the store merges into the rows it wrote.
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
		b := p.gens[gen]
		snap := &sink.Snapshot{Stats: s, Symbols: p.symbols, Start: b.start, End: b.start.Add(p.flushEach), Corrects: b.seq}
		if p.sink != nil && !s.Empty() {
			p.seq++
			snap.Seq = p.seq
			if err := p.flushTo(ctx, snap); err != nil {
				p.logger.Warn("Dropped the final verdicts of held requests: the sink failed",
					zap.Time("bucket", b.start), zap.Error(err))
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
	for gen := range p.gens {
		if gen < oldest {
			delete(p.gens, gen)
		}
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
	if hl := p.cfg.Engine().EdgeModel.HalfLife; hl > 0 {
		p.callees.Forget(start.Add(-forgetAfter * hl))
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
		p.callees.Symbols(keep)
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

// minSamplingCheck is how many whole counted traces a bucket needs before
// their share of failures says anything about a sampler upstream.
const minSamplingCheck = 100

// checkSampling tells the collector, through the component's status, when
// a bucket's traces carry no sampling information while so many of them
// failed that a sampler upstream which keeps errors (a tail sampler) is
// likely: their figures are then counts of what it kept, and every ratio
// leans towards failure. The status clears with the first bucket that does
// not look so.
func (p *ownershipProcessor) checkSampling(s *dependencyanalysis.Stats) {
	limit := p.cfg.Sampling.WarnFailedShare
	var incomplete uint64
	for _, n := range s.Incomplete {
		incomplete += n
	}
	counted := s.Traces - s.Extrapolated - incomplete
	if limit <= 0 || counted < minSamplingCheck {
		return
	}
	share := float64(s.CountedFailed) / float64(counted)
	unweighed := share > limit
	if unweighed == p.unweighed {
		return
	}
	p.unweighed = unweighed
	var err error
	if unweighed {
		err = fmt.Errorf("%d of %d traces without sampling information had a failed request (%.0f%%, above sampling.warn_failed_share %v): "+
			"if a sampler before this processor keeps errors (tail sampling), these figures are counts of what it kept, not estimates of traffic, "+
			"and every ratio leans towards failure; analyse before the sampler, or sample with OpenTelemetry's probability sampling (tracestate ot=th)",
			s.CountedFailed, counted, 100*share, limit)
		p.logger.Warn("Traces without sampling information fail unusually often: the figures may not be representative", zap.Error(err))
	}
	if p.status != nil {
		p.status.Set("sampling", err)
	}
}

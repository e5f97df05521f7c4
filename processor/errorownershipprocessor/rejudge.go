// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"time"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// heldRequest is a held failed request and the bucket its trace and its
// provisional verdict were counted in, by generation: its final verdict
// corrects that bucket.
type heldRequest struct {
	dependencyanalysis.Held
	gen uint64
}

// statsOf returns the statistics a final verdict of generation gen is
// counted in: the worker's own for the bucket being filled, else the late
// ones of gen's bucket, flushed at the next flush as a correction of it.
// It needs w.mu.
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
// final, all: the verdicts each final and counted once, in place of the
// provisional one. It returns how many it counted for each cause and
// verdict, and how many of them correct the provisional verdict.
func (w *worker) rejudge(modes dependencyanalysis.Modes, agedBefore time.Time, final bool) (settled, aged int64, kinds, corrected [4]int64) {
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
		if w.statsOf(h.gen).Correct(&h.Held, &v) {
			corrected[v.Kind]++
		}
		w.p.countedHeld(&h.Held, &v)
		kinds[v.Kind]++
	}
	clear(w.held[len(kept):])
	w.held = kept
	return settled, aged, kinds, corrected
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
	var kinds, corrected [4]int64
	for _, w := range p.workers {
		s, a, k, c := w.rejudge(modes, agedBefore, final)
		settled, aged = settled+s, aged+a
		for i := range k {
			kinds[i] += k[i]
			corrected[i] += c[i]
		}
	}
	ctx := context.Background()
	tb := p.telemetry
	for k, n := range kinds {
		if n > 0 {
			tb.ProcessorErrorownershipVerdicts.Add(ctx, n, p.verdictAttrs[k]...)
		}
	}
	if settled > 0 {
		tb.ProcessorErrorownershipVerdictsRejudged.Add(ctx, settled, p.rejudgedSettled...)
	}
	if aged > 0 {
		cause := p.rejudgedAged
		if final {
			cause = p.rejudgedShutdown
		}
		tb.ProcessorErrorownershipVerdictsRejudged.Add(ctx, aged, cause...)
	}
	p.countCorrected(ctx, &corrected)
}

// countCorrected counts the final verdicts, by kind, that correct the
// provisional verdict their request was counted with.
func (p *ownershipProcessor) countCorrected(ctx context.Context, corrected *[4]int64) {
	for k, n := range corrected {
		if n > 0 {
			p.telemetry.ProcessorErrorownershipVerdictsCorrected.Add(ctx, n, p.verdictAttrs[k]...)
		}
	}
}

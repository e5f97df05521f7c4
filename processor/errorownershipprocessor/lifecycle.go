// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/internal/hintsserver"
	"github.com/errorownership/errorownership/internal/status"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/sink"
	"github.com/errorownership/errorownership/store"
)

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
	if err := p.openStore(host); err != nil {
		return err
	}
	if err := p.serveHints(host); err != nil {
		return err
	}
	if p.storeSink != nil {
		if err := p.storeSink.Writer.Start(ctx); err != nil {
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
	p.hub.MarkStarted()
	return nil
}

// openStore finds the errorownership_store extension the store key names,
// if any: the writer of the statistics, over the extension's pool, and the
// merged model the verdicts read, judged by the extension's edge_model.
func (p *ownershipProcessor) openStore(host component.Host) error {
	if p.cfg.Store == nil {
		return nil
	}
	ext, err := p.cfg.Store.Lookup(host)
	if err != nil {
		return err
	}
	st := ext.Store()
	p.store = st
	p.setAuditLimit(p.cfg.auditLimit(st.Config().AuditPerServicePerMinute))
	p.storeSink = sink.NewStore(st, p.logger, store.WithStatus(func(err error) {
		p.status.Set("writing statistics to the store", err)
	}))
	if err := p.storeSink.RegisterTelemetry(p.telemetry); err != nil {
		return err
	}
	p.sink = p.storeSink
	p.storeModel = ext.Model(p.symbols, &p.symbolsInUse)
	p.storeModel.OnRead(func(err error) { p.status.Set("reading the edge model from the store", err) })
	p.edges = p.storeModel
	return nil
}

// setAuditLimit bounds the audit of every bucket, those made already too.
func (p *ownershipProcessor) setAuditLimit(n int) {
	p.auditLimit = n
	p.merged.AuditLimit = n
	for _, w := range p.workers {
		w.stats.AuditLimit = n
		w.spare.AuditLimit = n
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
		// The pool is the store extension's, which the collector shuts
		// down after the pipelines.
		storeErr = p.storeSink.Writer.Shutdown(ctx)
	}
	p.telemetry.Shutdown()
	return errors.Join(err, storeErr)
}

// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector // import "github.com/errorownership/errorownership/connector/errorownershipconnector"

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/connector/errorownershipconnector/internal/metadata"
	"github.com/errorownership/errorownership/internal/figures"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// scopeName is the instrumentation scope of the metrics the connector makes.
const scopeName = "github.com/errorownership/errorownership/connector/errorownershipconnector"

// ownershipConnector turns an analysis's figures into metrics: its own
// analysis of the spans it receives, or that of the processor it names.
type ownershipConnector struct {
	cfg       *Config
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	next      consumer.Metrics
	acc       *accumulator
	// analysis is the connector's own, an errorownership processor that
	// hands its figures only to the connector; nil beside a processor.
	analysis    processor.Traces
	unsubscribe []func()
	// hubs are the processor's analyses the connector subscribed to.
	hubs []*figures.Hub

	// The telemetry's attributes: the connector's ID on each, as
	// processorhelper gives a processor's, so that two connectors' figures
	// stay apart.
	idAttr        attribute.KeyValue
	own           metric.MeasurementOption
	overflowAttrs [numMetrics][2]metric.MeasurementOption

	lifecycle sync.Mutex
	started   bool
	stop      chan struct{}
	emitting  sync.WaitGroup
	// emitMu serialises emissions: a delta's points must follow one
	// another.
	emitMu sync.Mutex
}

func newConnector(ctx context.Context, set connector.Settings, cfg *Config, next consumer.Metrics) (*ownershipConnector, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c := &ownershipConnector{cfg: cfg, logger: set.Logger, telemetry: tb, next: next, acc: newAccumulator(cfg, time.Now), stop: make(chan struct{})}
	c.idAttr = attribute.String("connector", set.ID.String())
	c.own = metric.WithAttributeSet(attribute.NewSet(c.idAttr))
	var seriesAttrs [numMetrics]metric.ObserveOption
	for i := range metricDefs {
		name := attribute.String("metric", metricDefs[i].name)
		seriesAttrs[i] = metric.WithAttributeSet(attribute.NewSet(c.idAttr, name))
		for b, bound := range []string{"max_series_per_metric", "max_series_per_service"} {
			c.overflowAttrs[i][b] = metric.WithAttributeSet(attribute.NewSet(c.idAttr, name, attribute.String("bound", bound)))
		}
	}
	err = tb.RegisterConnectorErrorownershipSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		for i, n := range c.acc.lens() {
			o.Observe(int64(n), seriesAttrs[i])
		}
		return nil
	})
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	if cfg.Processor == nil {
		// The processor's own telemetry (spans seen, traces analysed,
		// late and dropped spans …) is the analysis's, under this
		// connector's ID.
		pset := processor.Settings{ID: set.ID, TelemetrySettings: set.TelemetrySettings, BuildInfo: set.BuildInfo}
		c.analysis, err = errorownershipprocessor.NewFactory().CreateTraces(figures.WithListener(ctx, safeListener{c}), pset, cfg.analysis(), discard{})
		if err != nil {
			tb.Shutdown()
			return nil, fmt.Errorf("the connector's analysis: %w", err)
		}
	}
	return c, nil
}

// Capabilities: the spans are only read.
func (c *ownershipConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ConsumeTraces hands the spans to the connector's own analysis. Beside a
// processor they are that processor's to analyse, and dropped here.
func (c *ownershipConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if c.analysis == nil {
		return nil
	}
	return c.analysis.ConsumeTraces(ctx, td)
}

// Start finds the processor the connector reads, or starts its own
// analysis, and the emissions.
func (c *ownershipConnector) Start(ctx context.Context, host component.Host) error {
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.cfg.Processor != nil {
		hubs := figures.Published(*c.cfg.Processor)
		if len(hubs) == 0 {
			return fmt.Errorf("processor: no errorownership processor %s in this collector's pipelines; add it to a traces pipeline, or remove processor: to have the connector analyse the spans itself", c.cfg.Processor)
		}
		started := 0
		for _, h := range hubs {
			c.unsubscribe = append(c.unsubscribe, h.Subscribe(safeListener{c}))
			if h.Started() {
				started++
			}
		}
		c.hubs = hubs
		if started > 0 {
			// The collector starts what is downstream of a processor first:
			// this connector is not, and nothing orders their shutdowns.
			c.logger.Warn("The errorownership connector starts after the processor it reads, so it is not downstream of it: "+
				"the collector may shut it down first, and the processor's last figures, flushed at its shutdown, would be lost to the metrics. "+
				"Put the connector in the exporters of the traces pipeline that has the processor in its processors",
				zap.String("connector", c.idAttr.Value.AsString()), zap.Stringer("processor", c.cfg.Processor), zap.Int("instances_started", started))
		}
	} else if err := c.analysis.Start(ctx, host); err != nil {
		return err
	}
	c.started = true
	c.emitting.Add(1)
	go func() {
		defer c.emitting.Done()
		c.emitLoop()
	}()
	return nil
}

// emitLoop emits every metrics_flush_interval until Shutdown. Start's
// context ends with Start, so each emission has a context of its own.
func (c *ownershipConnector) emitLoop() {
	ticker := time.NewTicker(c.cfg.MetricsFlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-ticker.C:
			c.emit(context.Background(), false)
		}
	}
}

// Shutdown ends the analysis, which flushes its last bucket, and emits
// the last metrics. Beside a processor, the collector has shut the
// processor down first (it is upstream), so its last bucket is in.
func (c *ownershipConnector) Shutdown(ctx context.Context) error {
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	var err error
	if c.analysis != nil {
		err = c.analysis.Shutdown(ctx)
	}
	c.checkShutdownOrder()
	for _, u := range c.unsubscribe {
		u()
	}
	c.unsubscribe = nil
	if c.started {
		close(c.stop)
		c.emitting.Wait()
		c.emit(ctx, true)
		c.started = false
	}
	c.telemetry.Shutdown()
	return err
}

// checkShutdownOrder says so when the processor the connector reads is
// still running as the connector shuts down: its last bucket, which its
// shutdown flushes, will reach no metrics. The collector shuts a processor
// down before the components downstream of it, so this happens only to a
// connector outside the processor's pipeline, and there at random (the
// order of unrelated components is not fixed). Start warns of such a
// connector when it starts after the processor; one that started first is
// told apart only here. The collector tells no component its pipelines
// (component.Host has no such view,
// open-telemetry/opentelemetry-collector#2536). A processor withdraws its
// analysis when it has shut down (figures.Publish).
func (c *ownershipConnector) checkShutdownOrder() {
	if len(c.hubs) == 0 {
		return
	}
	published := figures.Published(*c.cfg.Processor)
	running := 0
	for _, h := range c.hubs {
		if slices.Contains(published, h) {
			running++
		}
	}
	if running == 0 {
		return
	}
	c.logger.Error("The errorownership connector shut down before the processor it reads: the processor's last figures, flushed at its shutdown, are lost to the metrics. "+
		"The collector shuts a processor down first only for the components downstream of it; put the connector in the exporters of the traces pipeline that has the processor in its processors",
		zap.String("connector", c.idAttr.Value.AsString()), zap.Stringer("processor", c.cfg.Processor), zap.Int("instances_running", running))
}

// emit hands the metrics of the interval to the next consumer. A failure
// is logged and counted: the figures are not sent again (a cumulative
// sum's next point carries them; a delta's are lost).
func (c *ownershipConnector) emit(ctx context.Context, final bool) {
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			c.recovered("emitting metrics", r)
		}
	}()
	md, overflowed := c.acc.emit(final)
	for i := range overflowed {
		for b, n := range overflowed[i] {
			if n > 0 {
				c.telemetry.ConnectorErrorownershipSeriesOverflowed.Add(ctx, n, c.overflowAttrs[i][b])
			}
		}
	}
	if md.DataPointCount() == 0 {
		return
	}
	if err := c.next.ConsumeMetrics(ctx, md); err != nil {
		c.telemetry.ConnectorErrorownershipExportsFailed.Add(ctx, 1, c.own)
		c.logger.Warn("The next consumer refused the errorownership metrics", zap.Int("data_points", md.DataPointCount()), zap.Error(err))
	}
}

func (c *ownershipConnector) recovered(doing string, r any) {
	c.telemetry.ConnectorErrorownershipPanicsRecovered.Add(context.Background(), 1, c.own)
	c.logger.Error("Recovered from a panic in the errorownership connector",
		zap.String("while", doing), zap.String("panic", fmt.Sprint(r)), zap.Stack("stack"))
}

// safeListener hands the analysis's figures to the accumulator, and
// turns its panics into counts: neither the analysis nor the spans may
// stop for the metrics.
type safeListener struct{ c *ownershipConnector }

func (l safeListener) Counted(v *figures.Verdict) {
	defer func() {
		if r := recover(); r != nil {
			l.c.recovered("keeping an exemplar", r)
		}
	}()
	l.c.acc.Counted(v)
}

func (l safeListener) Flushed(b *figures.Bucket) {
	defer func() {
		if r := recover(); r != nil {
			l.c.recovered("adding a bucket", r)
		}
	}()
	l.c.acc.Flushed(b)
}

// discard is where the connector's own analysis passes the spans on to:
// they have been delivered already.
type discard struct{}

func (discard) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (discard) ConsumeTraces(context.Context, ptrace.Traces) error { return nil }

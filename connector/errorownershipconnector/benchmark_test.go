// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// BenchmarkAnalysedOnce measures what the connector costs a collector, in
// CPU time a span (the process's user and system time, every goroutine's:
// the pipeline's extraction and the workers' analysis), over batches of 50
// traces of 20 spans (scenario.Mix), each analysed by the end:
//
//   - restamp: giving the batch new trace IDs, which every case does;
//   - processor: the processor alone;
//   - processor+connector: the connector beside it (processor:), the spans
//     analysed once;
//   - processor+connector-alone: a connector with its own analysis beside
//     the processor, the spans analysed twice;
//   - connector-alone: the connector alone.
//
// The second analysis costs processor+connector-alone less
// processor+connector.
func BenchmarkAnalysedOnce(b *testing.B) {
	spans := scenario.Mix(50, 1).SpanCount()
	for _, tc := range []struct {
		name                string
		processor           bool
		connector, analyses bool
	}{
		{name: "restamp"},
		{name: "processor", processor: true},
		{name: "processor+connector", processor: true, connector: true},
		{name: "processor+connector-alone", processor: true, connector: true, analyses: true},
		{name: "connector-alone", connector: true, analyses: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			batch := scenario.Mix(50, 1)
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(b, tt.Shutdown(ctx)) }()
			procID := component.MustNewIDWithName("errorownership", "bench")
			var head consumer.Traces = consumertest.NewNop()
			var parts []component.Component
			if tc.connector {
				cfg := benchConfig(nil)
				if !tc.analyses {
					cfg.Processor = &procID
				}
				c, err := NewFactory().CreateTracesToMetrics(ctx, connectorSettings(tt), cfg, consumertest.NewNop())
				require.NoError(b, err)
				head, parts = c, append(parts, c)
			}
			if tc.processor {
				pcfg := errorownershipprocessor.NewFactory().CreateDefaultConfig().(*errorownershipprocessor.Config)
				pcfg.DecisionWait = 500 * time.Millisecond
				pset := processortest.NewNopSettings(component.MustNewType("errorownership"))
				pset.ID = procID
				pset.TelemetrySettings = tt.NewTelemetrySettings()
				p, err := errorownershipprocessor.NewFactory().CreateTraces(ctx, pset, pcfg, head)
				require.NoError(b, err)
				head, parts = p, append([]component.Component{p}, parts...)
			}
			// Downstream first, as the collector starts them.
			for i := len(parts) - 1; i >= 0; i-- {
				require.NoError(b, parts[i].Start(ctx, componenttest.NewNopHost()))
			}
			// The batch is sent again and again as new traces: neither the
			// processor nor the connector keeps a reference into it once
			// ConsumeTraces has returned.
			start := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				scenario.Restamp(batch, uint32(i+1))
				require.NoError(b, head.ConsumeTraces(ctx, batch))
			}
			// Upstream first: shutdown analyses what is still buffered.
			for _, c := range parts {
				require.NoError(b, c.Shutdown(ctx))
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N*spans), "cpu-ns/span")
		})
	}
}

// benchConfig is the defaults, but for a decision_wait short enough that
// the analysis keeps up rather than evicting.
func benchConfig(mutate func(*Config)) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.DecisionWait = 500 * time.Millisecond
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

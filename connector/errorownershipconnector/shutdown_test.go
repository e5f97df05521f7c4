// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// TestShutdownOrder: a connector beside the processor, downstream of it,
// is started before it and shut down after it, and gets its last bucket.
// One outside the processor's pipeline, which the collector may start
// after the processor and then shuts down first, warns at its start and
// says so again at its shutdown, naming both and the fix, and misses the
// figures the processor's shutdown flushes.
func TestShutdownOrder(t *testing.T) {
	for _, tc := range []struct {
		name           string
		connectorFirst bool
	}{
		{name: "processor first, as in its pipeline"},
		{name: "processor started first, outside its pipeline", connectorFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(ctx)) }()
			procID := component.MustNewIDWithName("errorownership", "order_"+map[bool]string{false: "kept", true: "broken"}[tc.connectorFirst])
			pcfg := errorownershipprocessor.NewFactory().CreateDefaultConfig().(*errorownershipprocessor.Config)
			pcfg.DecisionWait = time.Hour
			pcfg.Rejudge.MaxHeld = 0
			pset := processortest.NewNopSettings(component.MustNewType("errorownership"))
			pset.ID = procID
			proc, err := errorownershipprocessor.NewFactory().CreateTraces(ctx, pset, pcfg, &consumertest.TracesSink{})
			require.NoError(t, err)

			core, logs := observer.New(zapcore.WarnLevel)
			set := connectorSettings(tt)
			set.Logger = zap.New(core)
			sink := &consumertest.MetricsSink{}
			c, err := NewFactory().CreateTracesToMetrics(ctx, set, testConfig(func(c *Config) { c.Processor = &procID }), sink)
			require.NoError(t, err)
			// As the collector starts them, and shuts them down in the
			// reverse order: downstream first when the connector is in the
			// processor's pipeline.
			first, second := component.Component(c), component.Component(proc)
			if tc.connectorFirst {
				first, second = second, first
			}
			require.NoError(t, first.Start(ctx, componenttest.NewNopHost()))
			require.NoError(t, second.Start(ctx, componenttest.NewNopHost()))
			for _, td := range scenarioTraces(t, "chain_retry_every_hop") {
				require.NoError(t, proc.ConsumeTraces(ctx, td))
			}
			require.NoError(t, second.Shutdown(ctx))
			require.NoError(t, first.Shutdown(ctx))

			served := readFigures(t, sink.AllMetrics()).sum("errorownership.requests.served")
			if !tc.connectorFirst {
				assert.Empty(t, logs.All(), "nothing to say")
				assert.Equal(t, float64(chainRoots*(1+2+4+8+8+8+8)), served, "the last bucket: every request served")
				return
			}
			assert.Zero(t, served, "the last bucket came after the connector's last emission")
			require.Equal(t, 2, logs.Len(), "a warning at start, an error at shutdown")
			for i, want := range []struct {
				level   zapcore.Level
				message string
			}{
				{zapcore.WarnLevel, "starts after the processor it reads"},
				{zapcore.ErrorLevel, "shut down before the processor it reads"},
			} {
				e := logs.All()[i]
				assert.Equal(t, want.level, e.Level)
				assert.Contains(t, e.Message, want.message)
				assert.Contains(t, strings.ToLower(e.Message), "put the connector in the exporters of the traces pipeline that has the processor in its processors")
				fields := e.ContextMap()
				assert.Equal(t, "errorownership", fields["connector"])
				assert.Equal(t, procID.String(), fields["processor"])
			}
		})
	}
}

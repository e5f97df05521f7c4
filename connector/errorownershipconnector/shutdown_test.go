// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
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
// is shut down after it and gets its last bucket; one shut down first — as
// happens, at random, to a connector outside the processor's pipeline —
// says so at once, naming both and the fix, and misses the figures the
// processor's shutdown flushes.
func TestShutdownOrder(t *testing.T) {
	for _, tc := range []struct {
		name           string
		connectorFirst bool
	}{
		{name: "processor first, as in its pipeline"},
		{name: "connector first", connectorFirst: true},
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
			// As the collector starts them: downstream first.
			require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
			require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
			for _, td := range scenarioTraces(t, "chain_retry_every_hop") {
				require.NoError(t, proc.ConsumeTraces(ctx, td))
			}
			first, second := component.Component(proc), component.Component(c)
			if tc.connectorFirst {
				first, second = second, first
			}
			require.NoError(t, first.Shutdown(ctx))
			require.NoError(t, second.Shutdown(ctx))

			served := readFigures(t, sink.AllMetrics()).sum("errorownership.requests.served")
			if !tc.connectorFirst {
				assert.Empty(t, logs.All(), "nothing to say")
				assert.Equal(t, float64(chainRoots*(1+2+4+8+8+8+8)), served, "the last bucket: every request served")
				return
			}
			assert.Zero(t, served, "the last bucket came after the connector's last emission")
			require.Equal(t, 1, logs.Len(), "one error")
			e := logs.All()[0]
			assert.Equal(t, zapcore.ErrorLevel, e.Level)
			assert.Contains(t, e.Message, "shut down before the processor it reads")
			assert.Contains(t, e.Message, "put the connector in the exporters of the traces pipeline that has the processor in its processors")
			fields := e.ContextMap()
			assert.Equal(t, "errorownership", fields["connector"])
			assert.Equal(t, procID.String(), fields["processor"])
		})
	}
}

// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/connector/errorownershipconnector/internal/metadata"
)

// The lifecycle mdatagen v0.159.0 generates for a connector
// (generated_component_test.go) creates, starts and stops it but sends it
// nothing; this is the step it leaves out: a read-only batch through a
// started connector, then a second instance started after the first
// stopped.
func TestLifecycleConsumesTraces(t *testing.T) {
	factory := NewFactory()
	cm, err := confmaptest.LoadConf("metadata.yaml")
	require.NoError(t, err)
	cfg := factory.CreateDefaultConfig()
	sub, err := cm.Sub("tests::config")
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(&cfg))
	ctx := context.Background()
	host := componenttest.NewNopHost()

	first, err := factory.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, first.Start(ctx, host))
	traces := lifecycleTraces()
	if !first.Capabilities().MutatesData {
		traces.MarkReadOnly()
	}
	require.NotPanics(t, func() { err = first.ConsumeTraces(ctx, traces) })
	require.NoError(t, err)
	require.NoError(t, first.Shutdown(ctx))

	second, err := factory.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, second.Start(ctx, host))
	require.NoError(t, second.Shutdown(ctx))
}

func lifecycleTraces() ptrace.Traces {
	traces := ptrace.NewTraces()
	rs := traces.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("resource", "R1")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.Attributes().PutStr("test_attr", "value_1")
	span.SetName("test_span")
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Now().Add(-1 * time.Second)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	return traces
}

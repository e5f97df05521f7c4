// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

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

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.TracesStability())
	assert.Equal(t, component.StabilityLevelUndefined, f.MetricsStability())
	assert.Equal(t, component.StabilityLevelUndefined, f.LogsStability())

	_, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	assert.Error(t, err, "metrics are not supported")
	_, err = f.CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	assert.Error(t, err, "logs are not supported")
}

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.(*Config).Validate())
	assert.Equal(t, &Config{AnalysisConfig: AnalysisConfig{
		DecisionWait:  5 * time.Second,
		MaxTraces:     50_000,
		MaxSpans:      1_000_000,
		NumWorkers:    0,
		FlushInterval: 30 * time.Second,
		Rejudge:       RejudgeConfig{MaxHeld: 100_000, MaxAge: 10 * time.Minute},
		Sampling:      SamplingConfig{WarnFailedShare: 0.5},
		EngineConfig:  EngineConfig(dependencyanalysis.DefaultConfig()),
	}}, cfg)
	assert.Nil(t, cfg.(*Config).HintsExtension, "no hints are served until hints_extension names an extension")
	assert.Nil(t, cfg.(*Config).Store, "no store until store names one")
}

func TestCreateTraces(t *testing.T) {
	f := NewFactory()
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.False(t, p.Capabilities().MutatesData, "the processor only reads spans")
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.Shutdown(context.Background()))
}

func TestShutdownVerifier(t *testing.T) {
	processortest.VerifyShutdown(t, NewFactory(), NewFactory().CreateDefaultConfig())
}

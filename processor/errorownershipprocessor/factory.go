// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadata"
)

// NewFactory returns a factory for the errorownership processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{AnalysisConfig: DefaultAnalysisConfig()}
}

// DefaultAnalysisConfig returns the analysis keys' defaults.
func DefaultAnalysisConfig() AnalysisConfig {
	return AnalysisConfig{
		DecisionWait:  defaultDecisionWait,
		MaxTraces:     defaultMaxTraces,
		MaxSpans:      defaultMaxSpans,
		FlushInterval: defaultFlushInterval,
		Rejudge:       RejudgeConfig{MaxHeld: defaultRejudgeMaxHeld, MaxAge: defaultRejudgeMaxAge},
		Sampling:      SamplingConfig{WarnFailedShare: defaultWarnFailedShare},
		EngineConfig:  EngineConfig(dependencyanalysis.DefaultConfig()),
	}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p, err := newOwnershipProcessor(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	p.listen(ctx)
	return wrap(ctx, set, cfg, next, p)
}

// wrap makes p a pipeline component.
func wrap(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces, p *ownershipProcessor) (processor.Traces, error) {
	tp, err := processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		// The spans are only read, so the pipeline need not copy them for us.
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
	)
	if err != nil {
		if p.withdraw != nil {
			p.withdraw()
		}
		p.telemetry.Shutdown()
		return nil, err
	}
	return tp, nil
}

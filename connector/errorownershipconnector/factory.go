// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector // import "github.com/errorownership/errorownership/connector/errorownershipconnector"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/errorownership/errorownership/connector/errorownershipconnector/internal/metadata"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// NewFactory returns a factory for the errorownership connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability),
	)
}

// createDefaultConfig gives the analysis keys the processor's defaults.
func createDefaultConfig() component.Config {
	return &Config{
		AnalysisConfig:         errorownershipprocessor.DefaultAnalysisConfig(),
		AggregationTemporality: Cumulative,
		MetricsFlushInterval:   defaultMetricsFlushInterval,
		Cardinality:            CardinalityConfig{MaxSeriesPerMetric: defaultMaxSeriesPerMetric, MaxSeriesPerService: defaultMaxSeriesPerService},
		Exemplars:              ExemplarsConfig{Enabled: true, MaxPerDataPoint: defaultExemplarsPerPoint},
	}
}

func createTracesToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return newConnector(ctx, set, cfg.(*Config), next)
}

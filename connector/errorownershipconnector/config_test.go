// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/errorownership/errorownership/connector/errorownershipconnector/internal/metadata"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/internal/configkeys/configkeystest"
)

func TestLoadConfig(t *testing.T) {
	processorID := component.MustNewID("errorownership")
	tests := []struct {
		name string
		id   component.ID
		// want is checked when there are no errs; errs are fragments the
		// validation error must contain, one per problem.
		want         func(c *Config)
		temporality  pmetric.AggregationTemporality
		errs         []string
		unmarshalErr string
	}{
		{name: "defaults", id: component.NewID(metadata.Type), want: func(*Config) {}, temporality: pmetric.AggregationTemporalityCumulative},
		{
			name: "beside a processor", id: component.NewIDWithName(metadata.Type, "beside"),
			want: func(c *Config) {
				c.Processor = &processorID
				c.AggregationTemporality = Delta
				c.MetricsFlushInterval = 30 * time.Second
			},
			temporality: pmetric.AggregationTemporalityDelta,
		},
		{
			name: "every key", id: component.NewIDWithName(metadata.Type, "custom"),
			want: func(c *Config) {
				c.DecisionWait, c.MaxTraces, c.MaxSpans, c.NumWorkers, c.FlushInterval = 10*time.Second, 1000, 20000, 4, time.Minute
				c.Classification.HTTPClientErrors = true
				c.EdgeModel.MinSamples, c.EdgeModel.HalfLife = 50, 5*time.Minute
				c.Rejudge.MaxHeld, c.Rejudge.MaxAge = 1000, 5*time.Minute
				c.AggregationTemporality = "AGGREGATION_TEMPORALITY_DELTA"
				c.MetricsFlushInterval, c.SeriesExpiration = time.Minute, time.Hour
				c.Cardinality = CardinalityConfig{MaxSeriesPerMetric: 2000, MaxSeriesPerService: 200}
				c.Exemplars.Enabled = false
			},
			temporality: pmetric.AggregationTemporalityDelta,
		},
		{
			name: "analysis keys beside a processor", id: component.NewIDWithName(metadata.Type, "analysis_keys_beside"),
			errs: []string{
				"decision_wait: the spans are analysed by processor errorownership, by its own keys; set decision_wait there, or remove processor: to have the connector analyse them itself",
				"edge_model: the spans are analysed by processor errorownership, by its own keys; set edge_model there",
			},
		},
		{
			name: "its own analysis writing to a store", id: component.NewIDWithName(metadata.Type, "own_analysis_with_store"),
			want: func(c *Config) {
				c.Store = errorownershipstoreextension.NewRef(component.MustNewID("errorownership_store"))
			},
			temporality: pmetric.AggregationTemporalityCumulative,
		},
		{
			name: "a store beside a processor", id: component.NewIDWithName(metadata.Type, "store_beside"),
			errs: []string{"store: the spans are analysed by processor errorownership, by its own keys; set store there"},
		},
		{
			name: "the analysis keys, as the processor checks them", id: component.NewIDWithName(metadata.Type, "bad_analysis"),
			errs: []string{
				"decision_wait: 0s must be positive, such as 5s",
				"edge_model: fail_open_threshold (0.9) must be below fail_close_threshold (0.8)",
			},
		},
		{
			name: "the connector's own keys", id: component.NewIDWithName(metadata.Type, "bad_own_keys"),
			errs: []string{
				`aggregation_temporality: "sometimes" is neither cumulative nor delta`,
				"metrics_flush_interval: 15ns must be at least 100ms; a bare number is read as nanoseconds; write a unit, such as 15s",
				"cardinality.max_series_per_service: 200 must be between 1 and max_series_per_metric (100), such as 100",
				"exemplars.max_per_data_point: 0 must be at least 1 while exemplars are enabled, such as 1",
			},
		},
		{
			name: "no series at all", id: component.NewIDWithName(metadata.Type, "no_series"),
			errs: []string{
				"cardinality.max_series_per_metric: 0 must be at least 1, such as 10000",
				"cardinality.max_series_per_service: 1000 must be between 1 and max_series_per_metric (0), such as 1",
			},
		},
		{
			name: "series_expiration below metrics_flush_interval", id: component.NewIDWithName(metadata.Type, "short_expiration"),
			errs: []string{"series_expiration: 30s must be 0 or at least metrics_flush_interval (1m0s), such as 10m"},
		},
		{
			name: "negative series_expiration", id: component.NewIDWithName(metadata.Type, "negative_expiration"),
			errs: []string{"series_expiration: -1m0s must not be negative; use 0 to keep every series, such as 10m"},
		},
		{
			name: "misspelt key", id: component.NewIDWithName(metadata.Type, "unknown_key"),
			unmarshalErr: "cardinality.max_series_per_metrics: did you mean cardinality.max_series_per_metric?",
		},
	}
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if tt.unmarshalErr != "" {
				require.ErrorContains(t, err, tt.unmarshalErr)
				return
			}
			require.NoError(t, err)
			if len(tt.errs) == 0 {
				require.NoError(t, confmap.Validate(cfg))
				want := NewFactory().CreateDefaultConfig().(*Config)
				tt.want(want)
				want.given = cfg.given
				assert.Equal(t, want, cfg)
				assert.Equal(t, tt.temporality, cfg.temporality())
				return
			}
			// The collector validates with confmap.Validate, which walks
			// the struct: every problem must be reported exactly once.
			err = confmap.Validate(cfg)
			require.Error(t, err)
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tt.errs), err.Error())
			for _, want := range tt.errs {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

// TestConfigSchemaCoversEveryKey keeps config.schema.yaml in step with the
// configuration: every key of Config is described, and nothing else.
func TestConfigSchemaCoversEveryKey(t *testing.T) {
	configkeystest.CheckSchema(t, "config.schema.yaml", &Config{}, nil)
}

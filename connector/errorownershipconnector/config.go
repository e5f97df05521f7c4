// SPDX-License-Identifier: Apache-2.0

package errorownershipconnector // import "github.com/errorownership/errorownership/connector/errorownershipconnector"

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/errorownership/errorownership/internal/configcheck"
	"github.com/errorownership/errorownership/internal/configkeys"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// The aggregation_temporality values: spanmetrics' spelling is accepted
// too, so that a configuration copied from it works.
const (
	Cumulative = "cumulative"
	Delta      = "delta"

	spanmetricsCumulative = "AGGREGATION_TEMPORALITY_CUMULATIVE"
	spanmetricsDelta      = "AGGREGATION_TEMPORALITY_DELTA"
)

// Defaults and bounds of the connector's own keys.
const (
	defaultMetricsFlushInterval = 15 * time.Second
	minMetricsFlushInterval     = 100 * time.Millisecond
	// Ten thousand series of a metric are about a megabyte here and in
	// the exporter, and as many series in Prometheus, where a metric's
	// cardinality is what costs.
	defaultMaxSeriesPerMetric  = 10_000
	defaultMaxSeriesPerService = 1_000
	defaultExemplarsPerPoint   = 1
)

// Config configures the errorownership connector.
type Config struct {
	// Processor names the errorownership processor whose figures the
	// connector turns into metrics, in the same collector: the spans are
	// analysed once. Unset, the connector analyses the spans it receives
	// itself, by the analysis keys below.
	Processor *component.ID `mapstructure:"processor"`

	// AnalysisConfig holds the analysis keys, the processor's (its
	// README), for a connector that analyses the spans itself.
	errorownershipprocessor.AnalysisConfig `mapstructure:",squash"`

	// AggregationTemporality is cumulative or delta.
	AggregationTemporality string `mapstructure:"aggregation_temporality"`
	// MetricsFlushInterval is how often the metrics are handed to the
	// metrics pipeline.
	MetricsFlushInterval time.Duration `mapstructure:"metrics_flush_interval"`
	// SeriesExpiration drops a series that has not changed for this long,
	// making room under the cardinality bounds; 0 keeps every series.
	SeriesExpiration time.Duration `mapstructure:"series_expiration"`
	// Cardinality bounds the series of every metric.
	Cardinality CardinalityConfig `mapstructure:"cardinality"`
	// Exemplars configures the trace IDs on the propagated and
	// coincidental counts.
	Exemplars ExemplarsConfig `mapstructure:"exemplars"`

	// given lists the analysis keys the configuration set, so that
	// Validate can refuse them beside processor.
	given []string

	// prevent unkeyed literal initialization
	_ struct{}
}

// CardinalityConfig bounds how many series each metric has. Figures of a
// series past a bound are counted in an overflow series, marked
// otel.metric.overflow="true", and in the connector's telemetry.
type CardinalityConfig struct {
	// MaxSeriesPerMetric bounds each metric's series; past it, figures go
	// to one series with no attribute but otel.metric.overflow.
	MaxSeriesPerMetric int `mapstructure:"max_series_per_metric"`
	// MaxSeriesPerService bounds a service's series of each metric (the
	// root service's, for the root metrics), so that one service's flood
	// of operation or peer names cannot take the others' room; past it,
	// the service's figures go to one series with its service name and
	// otel.metric.overflow.
	MaxSeriesPerService int `mapstructure:"max_series_per_service"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// ExemplarsConfig configures exemplars.
type ExemplarsConfig struct {
	// Enabled puts trace IDs on the data points of propagated and
	// coincidental failed requests.
	Enabled bool `mapstructure:"enabled"`
	// MaxPerDataPoint bounds the exemplars on one data point, the latest
	// kept.
	MaxPerDataPoint int `mapstructure:"max_per_data_point"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// analysisKeys are the keys of the connector's own analysis, read off the
// analysis configuration's type.
var analysisKeys = func() []string {
	keys, _ := configkeys.Keys(reflect.TypeOf(errorownershipprocessor.AnalysisConfig{}))
	var top []string
	for _, k := range keys {
		k, _, _ = strings.Cut(k, ".")
		if !slices.Contains(top, k) {
			top = append(top, k)
		}
	}
	return top
}()

var (
	_ component.Config    = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

// Unmarshal reads the configuration as the collector does, says which key
// a misspelt key may have meant, and notes which analysis keys were given.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if err := configkeys.Unmarshal(conf, c); err != nil {
		return err
	}
	c.given = c.given[:0]
	for _, k := range analysisKeys {
		if conf.IsSet(k) {
			c.given = append(c.given, k)
		}
	}
	return nil
}

// Validate reports every problem in the configuration, each naming its key
// and the fix.
func (c *Config) Validate() error {
	var errs []error
	if c.Processor != nil {
		for _, k := range c.given {
			errs = append(errs, fmt.Errorf("%s: the spans are analysed by processor %s, by its own keys; set %s there, or remove processor: to have the connector analyse them itself", k, c.Processor, k))
		}
	} else {
		errs = append(errs, c.Check())
	}
	switch c.AggregationTemporality {
	case Cumulative, Delta, spanmetricsCumulative, spanmetricsDelta:
	default:
		errs = append(errs, fmt.Errorf("aggregation_temporality: %q is neither cumulative nor delta", c.AggregationTemporality))
	}
	if c.MetricsFlushInterval < minMetricsFlushInterval {
		errs = append(errs, configcheck.TooShort("metrics_flush_interval", c.MetricsFlushInterval, minMetricsFlushInterval, "15s"))
	}
	if e := c.SeriesExpiration; e < 0 {
		errs = append(errs, fmt.Errorf("series_expiration: %v must not be negative; use 0 to keep every series, such as 10m", e))
	} else if e > 0 && e < c.MetricsFlushInterval {
		errs = append(errs, fmt.Errorf("series_expiration: %v must be 0 or at least metrics_flush_interval (%v), such as 10m%s", e, c.MetricsFlushInterval, configcheck.BareNumber(e, "10m")))
	}
	if n := c.Cardinality.MaxSeriesPerMetric; n < 1 {
		errs = append(errs, fmt.Errorf("cardinality.max_series_per_metric: %d must be at least 1, such as %d", n, defaultMaxSeriesPerMetric))
	}
	if n := c.Cardinality.MaxSeriesPerService; n < 1 || n > c.Cardinality.MaxSeriesPerMetric {
		errs = append(errs, fmt.Errorf("cardinality.max_series_per_service: %d must be between 1 and max_series_per_metric (%d), such as %d", n, c.Cardinality.MaxSeriesPerMetric, min(defaultMaxSeriesPerService, max(c.Cardinality.MaxSeriesPerMetric, 1))))
	}
	if c.Exemplars.Enabled && c.Exemplars.MaxPerDataPoint < 1 {
		errs = append(errs, fmt.Errorf("exemplars.max_per_data_point: %d must be at least 1 while exemplars are enabled, such as %d", c.Exemplars.MaxPerDataPoint, defaultExemplarsPerPoint))
	}
	return errors.Join(errs...)
}

// temporality is AggregationTemporality as pdata's.
func (c *Config) temporality() pmetric.AggregationTemporality {
	if c.AggregationTemporality == Delta || c.AggregationTemporality == spanmetricsDelta {
		return pmetric.AggregationTemporalityDelta
	}
	return pmetric.AggregationTemporalityCumulative
}

// analysis is the processor configuration of the connector's own analysis:
// its analysis keys, without hints, whose figures only the connector reads.
func (c *Config) analysis() *errorownershipprocessor.Config {
	return &errorownershipprocessor.Config{AnalysisConfig: c.AnalysisConfig}
}

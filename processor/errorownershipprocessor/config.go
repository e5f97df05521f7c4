// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/internal/configcheck"
	"github.com/errorownership/errorownership/internal/configkeys"
)

// Defaults of the processor's own keys; the engine's come from
// dependencyanalysis.DefaultConfig.
const (
	defaultDecisionWait  = 5 * time.Second
	defaultMaxTraces     = 50_000
	defaultMaxSpans      = 1_000_000
	defaultFlushInterval = 30 * time.Second
	// A new edge needs min_samples failed calls before it gets a mode: ten
	// minutes and 100,000 requests cover that at the rates where it
	// matters, in about 12 MiB.
	defaultRejudgeMaxHeld = 100_000
	defaultRejudgeMaxAge  = 10 * time.Minute
	// Behind a tail sampler that keeps every error and a tenth of the
	// rest, a fleet failing 10 % of its traces shows 53 % failing.
	defaultWarnFailedShare = 0.5
)

// Bounds of the processor's keys. Below the minimums a duration is a
// mistake, most often a bare number, which the collector reads as
// nanoseconds: a decision_wait of 5 ns keeps an idle collector busy.
// Workers beyond the maximum only cost memory, each holding its own
// statistics, since there are never that many CPUs to run them.
const (
	minDecisionWait  = 100 * time.Millisecond
	minFlushInterval = time.Second
	maxNumWorkers    = 1024
)

// Config configures the errorownership processor.
type Config struct {
	// AnalysisConfig holds the analysis keys, the connector's too.
	AnalysisConfig `mapstructure:",squash"`

	// HintsExtension names the errorownership_hints extension that serves
	// this processor's edge model as ownership hints; nil serves none.
	// (With a store, the extension may read the merged model itself.)
	HintsExtension *component.ID `mapstructure:"hints_extension"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// AnalysisConfig configures an analysis: the processor's, or that of an
// errorownership connector that analyses the spans itself. It is one type,
// embedded by both, so that the two read the same keys the same way.
type AnalysisConfig struct {
	// DecisionWait is how long a trace must go without a new span before it
	// is analysed.
	DecisionWait time.Duration `mapstructure:"decision_wait"`
	// MaxTraces bounds the traces held in the buffer; when it is full the
	// oldest trace is analysed early.
	MaxTraces int `mapstructure:"max_traces"`
	// MaxSpans bounds the spans held in the buffer, like MaxTraces.
	MaxSpans int `mapstructure:"max_spans"`
	// NumWorkers is the number of buffer shards, each analysed by its own
	// goroutine. Zero means runtime.GOMAXPROCS(0).
	NumWorkers int `mapstructure:"num_workers"`
	// FlushInterval is how often the statistics are handed on, and so the
	// length of a statistics bucket.
	FlushInterval time.Duration `mapstructure:"flush_interval"`

	// EngineConfig holds the classification, edge_model and attributes keys.
	EngineConfig `mapstructure:",squash"`

	// Rejudge bounds the failed requests held to be judged again: those
	// whose verdict rested on edges without a mode when they were
	// analysed, as every edge is while the model learns it.
	Rejudge RejudgeConfig `mapstructure:"rejudge"`

	// Sampling says when figures counted from traces without sampling
	// information are called unrepresentative.
	Sampling SamplingConfig `mapstructure:"sampling"`

	// Store names the errorownership_store extension the statistics are
	// written to, and whose merged edge model the verdicts read; nil
	// writes nothing and judges by the analysis' own model.
	Store *errorownershipstoreextension.Ref `mapstructure:"store"`
}

// RejudgeConfig bounds the held failed requests. Each is judged again at
// every flush_interval by the model of the time, and counted — its
// statistics and its audit entry — once its edges have a mode, or when it
// is max_age old, or when max_held newer ones push it out, or at shutdown,
// with what is known then.
type RejudgeConfig struct {
	// MaxHeld bounds the requests held; 0 holds none.
	MaxHeld int `mapstructure:"max_held"`
	// MaxAge is how long a request is held at most; 0 holds none.
	MaxAge time.Duration `mapstructure:"max_age"`
}

// SamplingConfig tunes the warning that a sampler upstream skews the
// figures (docs/design.md §8.1). A trace's weight comes from its sampling
// threshold (tracestate ot=th) or attributes.sample_rate; a trace with
// neither counts as one, which is right only if nothing sampled it.
type SamplingConfig struct {
	// WarnFailedShare: when more than this share of a flush's whole
	// traces without sampling information had a failed request, the
	// status and the log say that a sampler upstream that keeps errors is
	// likely and the figures are not estimates of traffic. 0 turns the
	// warning off.
	WarnFailedShare float64 `mapstructure:"warn_failed_share"`
}

// holds reports whether requests are held at all.
func (c RejudgeConfig) holds() bool { return c.MaxHeld > 0 && c.MaxAge > 0 }

// EngineConfig is the engine's configuration, dependencyanalysis.Config.
// It is a distinct type, without the engine's Validate method, so that the
// collector's recursive validation reports each engine problem once, through
// Config.Validate, rather than a second time under a made-up "config" key.
type EngineConfig dependencyanalysis.Config

// Engine returns the engine's configuration.
func (c *AnalysisConfig) Engine() dependencyanalysis.Config {
	return dependencyanalysis.Config(c.EngineConfig)
}

var _ component.Config = (*Config)(nil)

var _ confmap.Unmarshaler = (*Config)(nil)

// Unmarshal reads the configuration as the collector does, and for a
// misspelt key says which key it may have meant.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	return configkeys.Unmarshal(conf, c)
}

// Validate reports every problem in the configuration, each naming its key
// and the fix.
func (c *Config) Validate() error {
	return c.Check()
}

// Check reports every problem of the analysis keys, each naming its key and
// the fix. (It is not named Validate so that the collector, which validates
// embedded settings too, reports each problem once, through the Validate
// of the configuration that embeds it.)
func (c *AnalysisConfig) Check() error {
	var errs []error
	if c.DecisionWait < minDecisionWait {
		errs = append(errs, configcheck.TooShort("decision_wait", c.DecisionWait, minDecisionWait, "5s"))
	}
	if c.MaxTraces < 1 {
		errs = append(errs, fmt.Errorf("max_traces: %d must be at least 1, such as %d", c.MaxTraces, defaultMaxTraces))
	}
	if c.MaxSpans < 1 {
		errs = append(errs, fmt.Errorf("max_spans: %d must be at least 1, such as %d", c.MaxSpans, defaultMaxSpans))
	}
	switch {
	case c.NumWorkers < 0:
		errs = append(errs, fmt.Errorf("num_workers: %d must not be negative; use 0 for one worker per CPU (GOMAXPROCS)", c.NumWorkers))
	case c.NumWorkers > maxNumWorkers:
		errs = append(errs, fmt.Errorf("num_workers: %d must be at most %d: workers beyond the CPUs only cost memory; use 0 for one worker per CPU (GOMAXPROCS)", c.NumWorkers, maxNumWorkers))
	}
	if c.FlushInterval < minFlushInterval {
		errs = append(errs, configcheck.TooShort("flush_interval", c.FlushInterval, minFlushInterval, "30s"))
	}
	engine := c.Engine()
	if c.Rejudge.MaxHeld < 0 {
		errs = append(errs, fmt.Errorf("rejudge.max_held: %d must not be negative; use 0 to judge every request once, such as %d", c.Rejudge.MaxHeld, defaultRejudgeMaxHeld))
	}
	if a := c.Rejudge.MaxAge; a < 0 {
		errs = append(errs, fmt.Errorf("rejudge.max_age: %v must not be negative; use 0 to judge every request once, such as 10m", a))
	} else if a > 0 && a < c.FlushInterval {
		errs = append(errs, fmt.Errorf("rejudge.max_age: %v must be 0 or at least flush_interval (%v), when held requests are judged again, such as 10m%s", a, c.FlushInterval, configcheck.BareNumber(a, "10m")))
	}
	if f := c.Sampling.WarnFailedShare; !(f >= 0 && f < 1) {
		errs = append(errs, fmt.Errorf("sampling.warn_failed_share: %v must be in [0, 1), such as %v; 0 turns the warning off", f, defaultWarnFailedShare))
	}
	errs = append(errs, engine.Validate())
	if c.Store != nil && engine.EdgeModel != dependencyanalysis.DefaultConfig().EdgeModel {
		errs = append(errs, fmt.Errorf("edge_model: with store, the verdicts read the model merged in the store, which %s's edge_model judges; move this section under extensions: %s: (edge_model)", c.Store, c.Store))
	}
	return errors.Join(errs...)
}

// auditLimit is how many coincidental errors a statistics bucket keeps per
// service for the audit: the store's audit_per_service_per_minute for each
// minute of flush_interval begun. (Without a store, the only reader of the
// audit, none: -1.)
func (c *AnalysisConfig) auditLimit(perMinute int) int {
	minutes := int((c.FlushInterval + time.Minute - 1) / time.Minute)
	return perMinute * max(minutes, 1)
}

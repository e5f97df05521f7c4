package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/store"
)

// Defaults of the processor's own keys; the engine's come from
// dependencyanalysis.DefaultConfig.
const (
	defaultDecisionWait  = 5 * time.Second
	defaultMaxTraces     = 50_000
	defaultMaxSpans      = 1_000_000
	defaultFlushInterval = 30 * time.Second
)

// Config configures the errorownership processor.
type Config struct {
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

	// Store configures the PostgreSQL store the statistics are written to;
	// without a store section nothing is written.
	Store configoptional.Optional[store.Config] `mapstructure:"store"`

	// Hints configures the ownership hints endpoint; off without an endpoint.
	Hints HintsConfig `mapstructure:"hints"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// EngineConfig is the engine's configuration, dependencyanalysis.Config.
// It is a distinct type, without the engine's Validate method, so that the
// collector's recursive validation reports each engine problem once, through
// Config.Validate, rather than a second time under a made-up "config" key.
type EngineConfig dependencyanalysis.Config

// Engine returns the engine's configuration.
func (c *Config) Engine() dependencyanalysis.Config {
	return dependencyanalysis.Config(c.EngineConfig)
}

var _ component.Config = (*Config)(nil)

// Validate reports every problem in the configuration, each naming its key
// and the fix.
func (c *Config) Validate() error {
	var errs []error
	if c.DecisionWait <= 0 {
		errs = append(errs, fmt.Errorf("decision_wait: %v must be positive, such as 5s: it is how long a trace may go without a new span before it is analysed", c.DecisionWait))
	}
	if c.MaxTraces < 1 {
		errs = append(errs, fmt.Errorf("max_traces: %d must be at least 1, such as %d", c.MaxTraces, defaultMaxTraces))
	}
	if c.MaxSpans < 1 {
		errs = append(errs, fmt.Errorf("max_spans: %d must be at least 1, such as %d", c.MaxSpans, defaultMaxSpans))
	}
	if c.NumWorkers < 0 {
		errs = append(errs, fmt.Errorf("num_workers: %d must not be negative; use 0 for one worker per CPU (GOMAXPROCS)", c.NumWorkers))
	}
	if c.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("flush_interval: %v must be positive, such as 30s", c.FlushInterval))
	}
	engine := c.Engine()
	errs = append(errs, engine.Validate(), c.Hints.validate())
	return errors.Join(errs...)
}

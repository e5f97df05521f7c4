package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/configcheck"
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

// Bounds of the processor's keys. Below the minimums a duration is a
// mistake, most often a bare number, which the collector reads as
// nanoseconds: a decision_wait of 5 ns keeps an idle collector busy.
// Workers beyond the maximum only cost memory, each holding its own
// statistics, since there are never that many CPUs to run them.
const (
	minDecisionWait  = 100 * time.Millisecond
	minFlushInterval = time.Second
	minHalfLife      = time.Second // edge_model.half_life, unless 0
	minHintsRefresh  = 100 * time.Millisecond
	minHintsTTL      = time.Second
	maxNumWorkers    = 1024
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
	// The engine reports a negative half-life; a positive one this short
	// is a unit forgotten.
	if hl := c.EdgeModel.HalfLife; hl > 0 && hl < minHalfLife {
		errs = append(errs, fmt.Errorf("edge_model.half_life: %v must be 0 (observations never fade) or at least %v%s", hl, minHalfLife, cmp.Or(configcheck.BareNumber(hl, "10m"), ", such as 10m")))
	}
	engine := c.Engine()
	errs = append(errs, engine.Validate(), c.Hints.validate(), c.hintsWithoutEndpoint())
	return errors.Join(errs...)
}

// hintsWithoutEndpoint reports hints keys set while hints.endpoint is not:
// they do nothing, and the user most likely forgot the endpoint.
func (c *Config) hintsWithoutEndpoint() error {
	if c.Hints.NetAddr.Endpoint != "" {
		return nil
	}
	set, def := confmap.New(), confmap.New()
	if err := set.Marshal(c.Hints); err != nil {
		return fmt.Errorf("hints: %w", err)
	}
	if err := def.Marshal(defaultHintsConfig()); err != nil {
		return fmt.Errorf("hints: %w", err)
	}
	var keys []string
	for _, k := range slices.Compact(slices.Sorted(slices.Values(append(set.AllKeys(), def.AllKeys()...)))) {
		if !reflect.DeepEqual(set.Get(k), def.Get(k)) {
			keys = append(keys, "hints."+strings.ReplaceAll(k, confmap.KeyDelimiter, "."))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return fmt.Errorf("hints: %s set, but hints.endpoint is not, so no hints are served; set hints.endpoint, such as 0.0.0.0:4320, or remove them", strings.Join(keys, ", "))
}

// auditLimit is how many coincidental errors a statistics bucket keeps per
// service for the audit: store.audit_per_service_per_minute for each
// minute of flush_interval begun, or none without a store, which is the
// only reader of the audit.
func (c *Config) auditLimit() int {
	if !c.Store.HasValue() {
		return -1
	}
	perMinute := c.Store.Get().AuditPerServicePerMinute
	minutes := int((c.FlushInterval + time.Minute - 1) / time.Minute)
	return perMinute * max(minutes, 1)
}

// SPDX-License-Identifier: Apache-2.0

package errorownershipstoreextension // import "github.com/errorownership/errorownership/extension/errorownershipstoreextension"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/configkeys"
	"github.com/errorownership/errorownership/store"
)

// Config configures the errorownership_store extension.
type Config struct {
	// Config holds the store's keys: dsn, the writer's (max_pending_rows,
	// write_timeout, shutdown_timeout, audit_per_service_per_minute), the
	// tables' (bucket, retention) and the merged model's (model_refresh).
	// The collector validates them by store.Config's Validate, as it does
	// any embedded settings.
	store.Config `mapstructure:",squash"`
	// EdgeModel judges the counts merged in the store into modes: for the
	// verdicts of every analysis that writes to the store and for the hints
	// served from it alike.
	EdgeModel dependencyanalysis.ModelConfig `mapstructure:"edge_model"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() component.Config {
	return &Config{
		Config:    store.DefaultConfig(),
		EdgeModel: dependencyanalysis.DefaultConfig().EdgeModel,
	}
}

var (
	_ component.Config    = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

// Unmarshal reads the configuration as the collector does, and for a
// misspelt key says which key it may have meant.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	return configkeys.Unmarshal(conf, c)
}

// Validate reports every problem of edge_model, naming its key and the fix;
// the store's keys are store.Config's to check.
func (c *Config) Validate() error {
	return c.EdgeModel.Check("edge_model")
}

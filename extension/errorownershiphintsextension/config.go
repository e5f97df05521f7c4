// SPDX-License-Identifier: Apache-2.0

package errorownershiphintsextension // import "github.com/errorownership/errorownership/extension/errorownershiphintsextension"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/configcheck"
	"github.com/errorownership/errorownership/internal/configkeys"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// defaultEndpoint is where the hints are served by default: the loopback
// interface, as contrib's servers default to; 4320 is the hints' port
// throughout the documentation.
const defaultEndpoint = "localhost:4320"

// defaultRefresh is refresh's default, which a store section leaves as it is.
const defaultRefresh = time.Second

// Bounds of the duration keys: below them a value is a mistake, most often
// a bare number, which the collector reads as nanoseconds.
const (
	minTTL          = time.Second
	minRefresh      = 100 * time.Millisecond
	minModelRefresh = time.Second
)

// Config configures the errorownership_hints extension.
type Config struct {
	// ServerConfig is the HTTP server: endpoint, TLS, auth (the collector's
	// authenticator extensions), CORS…
	confighttp.ServerConfig `mapstructure:",squash"`
	// TTL is how long a service may use its hints before it asks again
	// (the body's ttl_seconds and Cache-Control max-age).
	TTL time.Duration `mapstructure:"ttl"`
	// Refresh is how long a view of the processor's model is reused, so
	// that a thousand callers cost one build of it a second. With a store,
	// store.model_refresh says how often the model is read instead.
	Refresh time.Duration `mapstructure:"refresh"`
	// RetryBudget is the budget every service is told to keep.
	RetryBudget ownership.RetryBudget `mapstructure:"retry_budget"`
	// Store, when set, serves the model merged in this PostgreSQL store
	// from every analysis collector's flushes, rather than the model of a
	// processor in this collector.
	Store configoptional.Optional[StoreConfig] `mapstructure:"store"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// StoreConfig is the store the hints are read from: the keys of a reader,
// not the writer's (the processor's store section has those).
type StoreConfig struct {
	// DSN is the PostgreSQL connection string, as a URL
	// (postgres://user@host:5432/db) or keyword/value pairs; empty uses the
	// PG* environment variables. A password is best given by PGPASSWORD or
	// ~/.pgpass; one written here is masked wherever the configuration is
	// shown.
	DSN configopaque.String `mapstructure:"dsn"`
	// ModelRefresh is how often the merged model is read.
	ModelRefresh time.Duration `mapstructure:"model_refresh"`
	// EdgeModel judges the merged counts into modes: it must match the
	// analysis collectors' processor edge_model section.
	EdgeModel dependencyanalysis.ModelConfig `mapstructure:"edge_model"`
}

// storeConfig returns the store's configuration for reading.
func (c *StoreConfig) storeConfig() store.Config {
	sc := store.DefaultConfig()
	sc.DSN = c.DSN
	sc.ModelRefresh = c.ModelRefresh
	return sc
}

func defaultStoreConfig() StoreConfig {
	return StoreConfig{
		ModelRefresh: store.DefaultConfig().ModelRefresh,
		EdgeModel:    dependencyanalysis.DefaultConfig().EdgeModel,
	}
}

func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultEndpoint
	return &Config{
		ServerConfig: server,
		TTL:          30 * time.Second,
		Refresh:      defaultRefresh,
		RetryBudget:  ownership.DefaultRetryBudget(),
		Store:        configoptional.Default(defaultStoreConfig()),
	}
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
	var errs []error
	if c.NetAddr.Endpoint == "" {
		errs = append(errs, fmt.Errorf("endpoint: empty; set the address to serve the hints on, such as %s or 0.0.0.0:4320", defaultEndpoint))
	}
	if c.TTL < minTTL {
		errs = append(errs, configcheck.TooShort("ttl", c.TTL, minTTL, "30s"))
	}
	if c.Refresh < minRefresh {
		errs = append(errs, configcheck.TooShort("refresh", c.Refresh, minRefresh, "1s"))
	} else if c.Refresh > c.TTL {
		errs = append(errs, fmt.Errorf("refresh: %v must be at most ttl (%v), such as 1s", c.Refresh, c.TTL))
	}
	if r := c.RetryBudget.Ratio; !(r >= 0 && r <= 1) {
		errs = append(errs, fmt.Errorf("retry_budget.ratio: %v must be between 0 and 1, such as 0.1", r))
	}
	if m := c.RetryBudget.MinRetriesPerSecond; !(m >= 0 && m <= ownership.MaxMinRetriesPerSecond) {
		errs = append(errs, fmt.Errorf("retry_budget.min_retries_per_second: %v must be between 0 and %d, such as 10",
			m, ownership.MaxMinRetriesPerSecond))
	}
	if sc := c.Store.Get(); sc != nil {
		// refresh would be accepted and do nothing: the store's model is
		// read every model_refresh.
		if c.Refresh != defaultRefresh {
			errs = append(errs, fmt.Errorf("refresh: %v applies only without a store; with a store section the model is read every store.model_refresh (%v): set that instead, or remove refresh", c.Refresh, sc.ModelRefresh))
		}
		if err := store.CheckDSN("store.dsn", sc.DSN); err != nil {
			errs = append(errs, err)
		}
		if sc.ModelRefresh < minModelRefresh {
			errs = append(errs, configcheck.TooShort("store.model_refresh", sc.ModelRefresh, minModelRefresh, "10s"))
		}
		errs = append(errs, sc.EdgeModel.Check("store.edge_model"))
	}
	return errors.Join(errs...)
}

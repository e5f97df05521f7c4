// SPDX-License-Identifier: Apache-2.0

package errorownershiphintsextension // import "github.com/errorownership/errorownership/extension/errorownershiphintsextension"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"

	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/internal/configcheck"
	"github.com/errorownership/errorownership/internal/configkeys"
	"github.com/errorownership/errorownership/ownership"
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
	minTTL     = time.Second
	minRefresh = 100 * time.Millisecond
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
	// Store, when set, names the errorownership_store extension whose
	// merged model is served, rather than the model of a processor in this
	// collector.
	Store *errorownershipstoreextension.Ref `mapstructure:"store"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultEndpoint
	return &Config{
		ServerConfig: server,
		TTL:          30 * time.Second,
		Refresh:      defaultRefresh,
		RetryBudget:  ownership.DefaultRetryBudget(),
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
	// refresh would be accepted and do nothing: the store's model is read
	// every model_refresh of the store extension.
	if c.Store != nil && c.Refresh != defaultRefresh {
		errs = append(errs, fmt.Errorf("refresh: %v applies only without a store; with store the model is read every model_refresh of %s: set that instead, or remove refresh", c.Refresh, c.Store))
	}
	return errors.Join(errs...)
}

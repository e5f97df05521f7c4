package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/errorownership/errorownership/internal/configcheck"
	"github.com/errorownership/errorownership/ownership"
)

// HintsConfig configures the ownership hints endpoint, GET /v1/hints?service=NAME.
type HintsConfig struct {
	// ServerConfig is the HTTP server: endpoint, TLS, auth (the collector's
	// authenticator extensions), CORS… An empty endpoint turns hints off.
	confighttp.ServerConfig `mapstructure:",squash"`
	// TTL is how long a service may use the hints before it asks again
	// (the body's ttl_seconds and Cache-Control max-age).
	TTL time.Duration `mapstructure:"ttl"`
	// Refresh is how long the processor reuses the hints it computed for a
	// service, so that a thousand callers cost one model read a second.
	Refresh time.Duration `mapstructure:"refresh"`
	// RetryBudget is the budget every service is told to keep.
	RetryBudget ownership.RetryBudget `mapstructure:"retry_budget"`
}

func defaultHintsConfig() HintsConfig {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = "" // off until asked for: a processor opens no port by surprise
	return HintsConfig{
		ServerConfig: server,
		TTL:          30 * time.Second,
		Refresh:      time.Second,
		RetryBudget:  ownership.DefaultRetryBudget(),
	}
}

// validate reports the problems of the hints section, each naming its key.
// It is not Validate so that the collector, which walks the configuration
// calling every Validate, does not report them twice: Config.Validate does.
func (c *HintsConfig) validate() error {
	var errs []error
	if c.TTL < minHintsTTL {
		errs = append(errs, configcheck.TooShort("hints.ttl", c.TTL, minHintsTTL, "30s"))
	}
	if c.Refresh < minHintsRefresh {
		errs = append(errs, configcheck.TooShort("hints.refresh", c.Refresh, minHintsRefresh, "1s"))
	} else if c.Refresh > c.TTL {
		errs = append(errs, fmt.Errorf("hints.refresh: %v must be at most hints.ttl (%v), such as 1s", c.Refresh, c.TTL))
	}
	if r := c.RetryBudget.Ratio; !(r >= 0 && r <= 1) {
		errs = append(errs, fmt.Errorf("hints.retry_budget.ratio: %v must be between 0 and 1, such as 0.1", r))
	}
	if m := c.RetryBudget.MinRetriesPerSecond; !(m >= 0 && m <= ownership.MaxMinRetriesPerSecond) {
		errs = append(errs, fmt.Errorf("hints.retry_budget.min_retries_per_second: %v must be between 0 and %d, such as 10",
			m, ownership.MaxMinRetriesPerSecond))
	}
	return errors.Join(errs...)
}

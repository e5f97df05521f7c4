// SPDX-License-Identifier: Apache-2.0

package errorownershiphintsextension

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/errorownership/errorownership/extension/errorownershiphintsextension/internal/metadata"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/internal/configkeys/configkeystest"
	"github.com/errorownership/errorownership/ownership"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		name string
		id   component.ID
		want func() *Config
		// errs are what Validate must report; unmarshalErr what unmarshalling must.
		errs         []string
		unmarshalErr string
	}{
		{name: "defaults", id: component.NewID(metadata.Type), want: func() *Config { return createDefaultConfig().(*Config) }},
		{
			name: "every key",
			id:   component.NewIDWithName(metadata.Type, "custom"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.NetAddr.Endpoint = "0.0.0.0:4320"
				c.TTL = time.Minute
				c.RetryBudget = ownership.RetryBudget{Ratio: 0.2, MinRetriesPerSecond: 5}
				c.Store = errorownershipstoreextension.NewRef(component.MustNewID("errorownership_store"))
				return c
			},
		},
		{name: "no endpoint", id: component.NewIDWithName(metadata.Type, "no_endpoint"),
			errs: []string{"endpoint: empty; set the address to serve the hints on, such as localhost:4320 or 0.0.0.0:4320"}},
		{
			// The collector reads a number without a unit as nanoseconds.
			name: "bare numbers as durations", id: component.NewIDWithName(metadata.Type, "bad_durations"),
			errs: []string{
				"ttl: 30ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 30s",
				"refresh: 1ns must be at least 100ms; a bare number is read as nanoseconds; write a unit, such as 1s",
			},
		},
		{name: "refresh above ttl", id: component.NewIDWithName(metadata.Type, "refresh_above_ttl"),
			errs: []string{"refresh: 1m0s must be at most ttl (10s), such as 1s"}},
		{
			name: "a budget that is none", id: component.NewIDWithName(metadata.Type, "bad_budget"),
			errs: []string{
				"retry_budget.ratio: 1.5 must be between 0 and 1, such as 0.1",
				"retry_budget.min_retries_per_second: 2000 must be between 0 and 1000, such as 10",
			},
		},
		{
			// The form before the store extension: its keys are read
			// only to say where they went.
			name: "a store section", id: component.NewIDWithName(metadata.Type, "store_section"),
			errs: []string{"store: the store is configured once, in an errorownership_store extension, and named here by its ID: move dsn, edge_model, model_refresh under extensions: errorownership_store:"},
		},
		{
			// With a store, refresh would do nothing.
			name: "refresh with a store", id: component.NewIDWithName(metadata.Type, "refresh_with_store"),
			errs: []string{"refresh: 5s applies only without a store; with store the model is read every model_refresh of errorownership_store/hints: set that instead, or remove refresh"},
		},
		{
			name: "misspelt keys, ours and confighttp's", id: component.NewIDWithName(metadata.Type, "misspelt"),
			unmarshalErr: "tll: did you mean ttl?\ntls.cert_fle: did you mean tls.cert_file?",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if tt.unmarshalErr != "" {
				require.ErrorContains(t, err, tt.unmarshalErr)
				return
			}
			require.NoError(t, err)
			err = confmap.Validate(cfg)
			if tt.errs == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want(), cfg)
				return
			}
			require.Error(t, err)
			for _, e := range tt.errs {
				assert.ErrorContains(t, err, e)
			}
		})
	}
}

func TestCreateDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, "localhost:4320", cfg.NetAddr.Endpoint, "loopback by default, as contrib's servers")
	assert.Equal(t, 30*time.Second, cfg.TTL)
	assert.Equal(t, time.Second, cfg.Refresh)
	assert.Equal(t, ownership.DefaultRetryBudget(), cfg.RetryBudget)
	assert.Nil(t, cfg.Store, "the processor's model until store names a store")
	require.NoError(t, cfg.Validate())
}

// TestConfigSchemaCoversEveryKey: config.schema.yaml describes every key
// of Config and no other (confighttp's keys come from its own schema).
func TestConfigSchemaCoversEveryKey(t *testing.T) {
	configkeystest.CheckSchema(t, "config.schema.yaml", &Config{}, []any{&confighttp.ServerConfig{}})
}

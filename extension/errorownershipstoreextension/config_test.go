// SPDX-License-Identifier: Apache-2.0

package errorownershipstoreextension

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

	"github.com/errorownership/errorownership/extension/errorownershipstoreextension/internal/metadata"
	"github.com/errorownership/errorownership/internal/configkeys/configkeystest"
	"github.com/errorownership/errorownership/store"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		name string
		id   component.ID
		want func() *Config
		// errs are what validation must report, each once; unmarshalErr
		// what unmarshalling must.
		errs         []string
		unmarshalErr string
	}{
		{name: "defaults", id: component.NewID(metadata.Type), want: func() *Config { return createDefaultConfig().(*Config) }},
		{
			name: "every key",
			id:   component.NewIDWithName(metadata.Type, "custom"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.DSN = "postgres://collector@db.internal:5432/errorownership"
				c.MaxPendingRows = 500_000
				c.Retention = 168 * time.Hour
				c.Bucket = 5 * time.Minute
				c.AuditPerServicePerMinute = 50
				c.ModelRefresh = 30 * time.Second
				c.WriteTimeout = 30 * time.Second
				c.ShutdownTimeout = 10 * time.Second
				c.EdgeModel.MinSamples, c.EdgeModel.HalfLife = 50, 5*time.Minute
				return c
			},
		},
		{
			name: "store and edge_model keys",
			id:   component.NewIDWithName(metadata.Type, "bad"),
			errs: []string{
				"dsn: (unparseable dsn) cannot be parsed",
				"max_pending_rows: 0 must be at least 1",
				"bucket: 7m0s must divide a day",
				"edge_model.min_samples: 0 must be at least 1",
			},
		},
		{
			// The collector reads a number without a unit as nanoseconds.
			name: "bare numbers as durations",
			id:   component.NewIDWithName(metadata.Type, "bare_durations"),
			errs: []string{
				"bucket: 60ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 1m",
				"retention: 720ns is shorter than the daily partitions; use at least 24h, or 0 to keep everything; a bare number is read as nanoseconds; write a unit, such as 720h",
				"model_refresh: 10ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 10s",
				"write_timeout: 60ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 1m",
				"shutdown_timeout: 5ns must be at least 100ms; a bare number is read as nanoseconds; write a unit, such as 5s",
				"edge_model.half_life: 600ns must be 0 (observations never fade) or at least 1s; a bare number is read as nanoseconds; write a unit, such as 10m",
			},
		},
		{
			name:         "misspelt keys",
			id:           component.NewIDWithName(metadata.Type, "misspelt"),
			unmarshalErr: "dns: did you mean dsn?\nedge_model.halflife: did you mean edge_model.half_life?",
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
			// The collector validates with confmap.Validate, which walks
			// the struct: every problem must be reported exactly once.
			err = confmap.Validate(cfg)
			if tt.errs == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want(), cfg)
				return
			}
			require.Error(t, err)
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tt.errs), err.Error())
			for _, e := range tt.errs {
				assert.ErrorContains(t, err, e)
			}
		})
	}
}

func TestCreateDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, store.DefaultConfig(), cfg.Config)
	require.NoError(t, confmap.Validate(cfg))
}

// TestConfigSchemaCoversEveryKey: config.schema.yaml describes every key
// of Config and no other.
func TestConfigSchemaCoversEveryKey(t *testing.T) {
	configkeystest.CheckSchema(t, "config.schema.yaml", &Config{}, nil)
}

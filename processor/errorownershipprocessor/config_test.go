package errorownershipprocessor

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadata"
	"github.com/errorownership/errorownership/store"
)

func TestLoadConfig(t *testing.T) {
	custom := createDefaultConfig().(*Config)
	custom.DecisionWait = 10 * time.Second
	custom.MaxTraces = 1000
	custom.MaxSpans = 20000
	custom.NumWorkers = 4
	custom.FlushInterval = time.Minute
	custom.Classification = dependencyanalysis.Classification{
		HTTPClientErrors:  true,
		GRPCErrorCodes:    []string{"UNAVAILABLE", "INTERNAL"},
		TimeoutErrorTypes: []string{"context_deadline"},
	}
	custom.EdgeModel = dependencyanalysis.ModelConfig{
		MinSamples:         50,
		Confidence:         0.99,
		FailCloseThreshold: 0.9,
		FailOpenThreshold:  0.1,
		HalfLife:           5 * time.Minute,
	}
	custom.Attributes = dependencyanalysis.AttributeNames{
		PeerService:  []string{"service.peer.name", "peer.service"},
		RetryAttempt: []string{"retry.attempt"},
	}

	tests := []struct {
		name string
		id   component.ID
		want *Config
		// errs are fragments the validation error must contain, one per
		// problem; unmarshalErr a fragment of the unmarshal error.
		errs         []string
		unmarshalErr string
	}{
		{
			name: "defaults",
			id:   component.NewID(metadata.Type),
			want: createDefaultConfig().(*Config),
		},
		{
			name: "every key",
			id:   component.NewIDWithName(metadata.Type, "custom"),
			want: custom,
		},
		{
			name: "zero decision_wait",
			id:   component.NewIDWithName(metadata.Type, "zero_decision_wait"),
			errs: []string{"decision_wait: 0s must be positive, such as 5s"},
		},
		{
			name: "bounds and workers out of range",
			id:   component.NewIDWithName(metadata.Type, "bad_bounds"),
			errs: []string{
				"max_traces: 0 must be at least 1, such as 50000",
				"max_spans: -1 must be at least 1, such as 1000000",
				"num_workers: -2 must not be negative; use 0 for one worker per CPU",
			},
		},
		{
			name: "zero flush_interval",
			id:   component.NewIDWithName(metadata.Type, "zero_flush_interval"),
			errs: []string{"flush_interval: 0s must be positive, such as 30s"},
		},
		{
			name: "engine keys",
			id:   component.NewIDWithName(metadata.Type, "bad_engine"),
			errs: []string{
				`classification.grpc_error_codes: "NOT_A_CODE" is not a gRPC status code name`,
				"edge_model.min_samples: 0 must be at least 1",
				"edge_model: fail_open_threshold (0.9) must be below fail_close_threshold (0.8)",
			},
		},
		{
			name: "with a store and hints",
			id:   component.NewIDWithName(metadata.Type, "with_store"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				sc := store.DefaultConfig()
				sc.DSN = "postgres://collector@db.internal:5432/errorownership"
				sc.Retention = 720 * time.Hour
				c.Store = configoptional.Some(sc)
				c.Hints.NetAddr.Endpoint = "127.0.0.1:4320"
				c.Hints.TTL = time.Minute
				return c
			}(),
		},
		{
			name: "store and hints keys",
			id:   component.NewIDWithName(metadata.Type, "bad_store"),
			errs: []string{
				"store.max_pending_rows: 0 must be at least 1",
				"store.bucket: 7m0s must divide a day",
				"hints.ttl: 0s must be at least 1s",
				"hints.refresh: 1s must be positive and at most hints.ttl",
			},
		},
		{
			name:         "misspelt key",
			id:           component.NewIDWithName(metadata.Type, "unknown_key"),
			unmarshalErr: "decison_wait",
		},
	}
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
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
			if len(tt.errs) == 0 {
				assert.NoError(t, confmap.Validate(cfg))
				assert.Equal(t, tt.want, cfg)
				return
			}
			// The collector validates with confmap.Validate, which walks
			// the struct: every problem must be reported exactly once.
			err = confmap.Validate(cfg)
			require.Error(t, err)
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tt.errs), err.Error())
			for _, want := range tt.errs {
				assert.ErrorContains(t, err, want)
			}
			// Validate alone reports the processor's own keys; the store
			// section, a component of its own, the collector validates as it walks.
			if own := cfg.(*Config).Validate(); own != nil {
				for _, line := range strings.Split(own.Error(), "\n") {
					assert.Contains(t, err.Error(), line)
				}
			}
		})
	}
}

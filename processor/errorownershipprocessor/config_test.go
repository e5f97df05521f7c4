// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

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

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/internal/configkeys/configkeystest"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadata"
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
		MaxEdges:           250_000,
	}
	custom.Attributes = dependencyanalysis.AttributeNames{
		PeerService:  []string{"service.peer.name", "peer.service"},
		RetryAttempt: []string{"error_ownership.retry.attempt"},
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
			name: "with a store and the hints extension",
			id:   component.NewIDWithName(metadata.Type, "with_store"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.Store = errorownershipstoreextension.NewRef(component.MustNewID("errorownership_store"))
				id := component.MustNewID("errorownership_hints")
				c.HintsExtension = &id
				return c
			}(),
		},
		{
			// The form before the store extension: its keys are read
			// only to say where they went.
			name: "a store section",
			id:   component.NewIDWithName(metadata.Type, "store_section"),
			errs: []string{"store: the store is configured once, in an errorownership_store extension, and named here by its ID: move dsn, half_life, retention under extensions: errorownership_store:"},
		},
		{
			name: "edge_model beside store",
			id:   component.NewIDWithName(metadata.Type, "edge_model_with_store"),
			errs: []string{"edge_model: with store, the verdicts read the model merged in the store, which errorownership_store/east's edge_model judges; move this section under extensions: errorownership_store/east: (edge_model)"},
		},
		{
			name:         "an empty store",
			id:           component.NewIDWithName(metadata.Type, "empty_store"),
			unmarshalErr: "empty; name the errorownership_store extension",
		},
		{
			// The collector reads a number without a unit as nanoseconds.
			name: "bare numbers as durations",
			id:   component.NewIDWithName(metadata.Type, "bare_durations"),
			errs: []string{
				"decision_wait: 5ns must be at least 100ms; a bare number is read as nanoseconds; write a unit, such as 5s",
				"flush_interval: 30ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 30s",
				"edge_model.half_life: 600ns must be 0 (observations never fade) or at least 1s; a bare number is read as nanoseconds; write a unit, such as 10m",
			},
		},
		{
			name: "durations below their minimums",
			id:   component.NewIDWithName(metadata.Type, "short_durations"),
			errs: []string{
				"decision_wait: 50ms must be at least 100ms, such as 5s",
				"flush_interval: 500ms must be at least 1s, such as 30s",
				"edge_model.half_life: 500ms must be 0 (observations never fade) or at least 1s, such as 10m",
			},
		},
		{
			name: "too many workers",
			id:   component.NewIDWithName(metadata.Type, "too_many_workers"),
			errs: []string{"num_workers: 100000 must be at most 1024: workers beyond the CPUs only cost memory; use 0 for one worker per CPU (GOMAXPROCS)"},
		},
		{
			name: "more peer_service names than are read",
			id:   component.NewIDWithName(metadata.Type, "too_many_peer_service_names"),
			errs: []string{"attributes.peer_service: 9 names, but only the first 8 are read; keep at most 8, the most specific first"},
		},
		{
			name:         "misspelt key",
			id:           component.NewIDWithName(metadata.Type, "unknown_key"),
			unmarshalErr: "decison_wait: did you mean decision_wait?", //nolint:misspell // the misspelt key is what is tested
		},
		{
			name:         "misspelt nested keys",
			id:           component.NewIDWithName(metadata.Type, "unknown_nested_key"),
			unmarshalErr: "edge_model.halflife: did you mean edge_model.half_life?\nrejudge.maxheld: did you mean rejudge.max_held?",
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
			// reference the collector validates as it walks.
			if own := cfg.(*Config).Validate(); own != nil {
				for _, line := range strings.Split(own.Error(), "\n") {
					assert.Contains(t, err.Error(), line)
				}
			}
		})
	}
}

// TestAuditLimit: one knob bounds the audit, the store's
// audit_per_service_per_minute, applied per statistics bucket.
func TestAuditLimit(t *testing.T) {
	tests := []struct {
		name      string
		perMinute int
		flush     time.Duration
		want      int
	}{
		{"a 30s flush keeps a minute's worth", 100, 30 * time.Second, 100},
		{"a 2m flush keeps two minutes' worth", 100, 2 * time.Minute, 200},
		{"90s begins a second minute", 100, 90 * time.Second, 200},
		{"0 is no limit", 0, 30 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.FlushInterval = tt.flush
			assert.Equal(t, tt.want, cfg.auditLimit(tt.perMinute))
		})
	}
}

// TestConfigSchemaCoversEveryKey keeps config.schema.yaml in step with the
// configuration: every key of Config is described, and nothing else (the
// old hints section is read only to say where it went).
func TestConfigSchemaCoversEveryKey(t *testing.T) {
	configkeystest.CheckSchema(t, "config.schema.yaml", &Config{}, nil, "hints")
}

// SPDX-License-Identifier: Apache-2.0

package errorownershipstoreextension

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/extension/extensiontest"
)

// host is a collector host with extensions.
type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }

// TestLookup: a component's store key finds the started extension, or
// fails naming the fix.
func TestLookup(t *testing.T) {
	id := component.MustNewIDWithName("errorownership_store", "east")
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	// The pool does not connect until asked: a database that is not
	// there does not fail Start.
	cfg.DSN = "host=/nonexistent dbname=x user=x"
	cfg.EdgeModel.MinSamples = 7
	cfg.ModelRefresh = 3 * time.Second
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	notStarted, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })

	tests := []struct {
		name string
		host host
		want string
	}{
		{"started", host{id: ext}, ""},
		{"absent", host{}, "store: no extension errorownership_store/east in this collector; configure it under extensions and list it in service.extensions"},
		{"another kind", host{id: struct {
			component.StartFunc
			component.ShutdownFunc
		}{}}, "store: errorownership_store/east is not an errorownership_store extension"},
		{"not started", host{id: notStarted}, "store: errorownership_store/east has not been started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := NewRef(id).Lookup(tt.host)
			if tt.want != "" {
				require.EqualError(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, cfg.EdgeModel, st.EdgeModel())
			assert.Equal(t, cfg.EdgeModel, st.Model(nil, nil).Config(), "its readers judge by its edge_model")
			assert.Equal(t, cfg.DSN, st.Store().Config().DSN)
		})
	}
}

// TestRefReads: the store key reads a component ID, and a section of the
// old form only to refuse it at Validate, naming the move.
func TestRefReads(t *testing.T) {
	tests := []struct {
		name      string
		conf      map[string]any
		want      string // the ID read
		errs      string // Validate's error
		unmarshal string // Unmarshal's error
	}{
		{"an ID", map[string]any{"store": "errorownership_store"}, "errorownership_store", "", ""},
		{"an ID with a name", map[string]any{"store": "errorownership_store/east"}, "errorownership_store/east", "", ""},
		{"empty", map[string]any{"store": ""}, "", "", "empty; name the errorownership_store extension"},
		{"a section", map[string]any{"store": map[string]any{"dsn": "postgres://x@db/y", "edge_model": map[string]any{"min_samples": 5}}}, "",
			"store: the store is configured once, in an errorownership_store extension, and named here by its ID: move dsn, edge_model under extensions: errorownership_store:", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg struct {
				Store *Ref `mapstructure:"store"`
			}
			err := confmap.NewFromStringMap(tt.conf).Unmarshal(&cfg)
			if tt.unmarshal != "" {
				require.ErrorContains(t, err, tt.unmarshal)
				return
			}
			require.NoError(t, err)
			err = confmap.Validate(&cfg)
			if tt.errs != "" {
				require.ErrorContains(t, err, tt.errs)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Store.String())
		})
	}
}

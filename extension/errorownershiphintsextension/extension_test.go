// SPDX-License-Identifier: Apache-2.0

package errorownershiphintsextension

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/errorownership/errorownership/extension/errorownershiphintsextension/internal/metadatatest"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/internal/hintsserver"
	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/ownership"
)

// start runs the extension on a free loopback port and returns it and the
// endpoint's base URL.
func start(t *testing.T, mutate func(*Config), exts ...extensionHost) (*hintsExtension, string) {
	t.Helper()
	return startWith(t, extensiontest.NewNopSettings(NewFactory().Type()), mutate, exts...)
}

// startWith is start with the extension's settings (its telemetry).
func startWith(t *testing.T, set extension.Settings, mutate func(*Config), exts ...extensionHost) (*hintsExtension, string) {
	t.Helper()
	// Reserved until the test ends: the extension binds the endpoint it is
	// configured with, and another test process must not bind it first.
	port, err := portlock.Reserve()
	require.NoError(t, err)
	t.Cleanup(port.Release)
	addr := port.Addr()
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = addr
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	set.ID = component.NewID(NewFactory().Type())
	ext, err := NewFactory().Create(context.Background(), set, cfg)
	require.NoError(t, err)
	host := extensionHost{}
	for _, e := range exts {
		maps.Copy(host, e)
	}
	require.NoError(t, ext.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return ext.(*hintsExtension), "http://" + addr
}

// extensionHost is a collector host with extensions.
type extensionHost map[component.ID]component.Component

func (h extensionHost) GetExtensions() map[component.ID]component.Component { return h }

// startStore starts an errorownership_store extension on a database that
// is not there (the pool does not connect until asked), as the collector
// starts it before the extensions that depend on it.
func startStore(t *testing.T, id component.ID) extensionHost {
	t.Helper()
	f := errorownershipstoreextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*errorownershipstoreextension.Config)
	cfg.DSN = "host=/nonexistent dbname=x user=x"
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return extensionHost{id: ext}
}

func get(t *testing.T, base, service string) (int, ownership.Hints) {
	t.Helper()
	res, err := http.Get(base + ownership.HintsPath + "?service=" + service)
	require.NoError(t, err)
	defer res.Body.Close()
	var doc ownership.Hints
	if res.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	}
	return res.StatusCode, doc
}

// fixedModel is a model with one fail-open edge of checkout's.
type fixedModel struct{ builds int }

func (m *fixedModel) View(context.Context) (*edges.View, error) {
	m.builds++
	return edges.NewViewOf(time.Now(), map[string][]ownership.HintEdge{
		"checkout": {{Operation: "POST /checkout", PeerService: "recommendations", PeerOperation: "GET /recommendations", Mode: ownership.ModeFailOpen}},
	}), nil
}

func TestServesTheModelOfTheProcessorThatNamesIt(t *testing.T) {
	ext, base := start(t, func(c *Config) { c.TTL, c.Refresh = time.Hour, time.Hour })
	code, _ := get(t, base, "checkout")
	assert.Equal(t, http.StatusServiceUnavailable, code, "no model before a processor names the extension")

	var reg hintsserver.Registry = ext
	proc := component.MustNewID("errorownership")
	model := &fixedModel{}
	stop, err := reg.ServeModelOf(proc, model)
	require.NoError(t, err)
	for range 3 {
		code, doc := get(t, base, "checkout")
		require.Equal(t, http.StatusOK, code)
		require.Len(t, doc.Edges, 1)
		assert.Equal(t, ownership.ModeFailOpen, doc.Edges[0].Mode)
	}
	assert.Equal(t, 1, model.builds, "the view is reused for refresh")

	_, err = reg.ServeModelOf(component.MustNewIDWithName("errorownership", "second"), &fixedModel{})
	require.EqualError(t, err, "hints_extension: errorownership_hints already serves the model of errorownership; give errorownership/second an errorownership_hints extension of its own, such as errorownership_hints/second")

	stop()
	code, _ = get(t, base, "checkout")
	assert.Equal(t, http.StatusServiceUnavailable, code, "no model once the processor stopped")
	_, err = reg.ServeModelOf(proc, model)
	require.NoError(t, err, "a processor started again may serve its model again")
}

func TestWithAStoreServesNoProcessorsModel(t *testing.T) {
	id := component.MustNewID("errorownership_store")
	ext, _ := start(t, func(c *Config) { c.Store = errorownershipstoreextension.NewRef(id) }, startStore(t, id))
	assert.Equal(t, []component.ID{id}, ext.Dependencies(), "the collector starts the store first")
	_, err := ext.ServeModelOf(component.MustNewID("errorownership"), &fixedModel{})
	require.EqualError(t, err, "hints_extension: errorownership_hints serves the edge model merged in its store; remove hints_extension from errorownership, or store from errorownership_hints")
}

// TestModelAge: with a store, the model's age is reported, and grows while
// no read succeeds (here: a database that is not there); without one, the
// processor's model is current and no age is reported.
func TestModelAge(t *testing.T) {
	age := func(tt *componenttest.Telemetry) (float64, bool) {
		m, err := tt.GetMetric("otelcol_extension_errorownership_hints_model_age")
		if err != nil {
			return 0, false
		}
		dps := m.Data.(metricdata.Gauge[float64]).DataPoints
		require.Len(t, dps, 1)
		return dps[0].Value, true
	}
	t.Run("store not there", func(t *testing.T) {
		tt := componenttest.NewTelemetry()
		t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
		id := component.MustNewID("errorownership_store")
		startWith(t, metadatatest.NewSettings(tt), func(c *Config) { c.Store = errorownershipstoreextension.NewRef(id) }, startStore(t, id))
		first, ok := age(tt)
		require.True(t, ok, "no model age with a store")
		require.Eventually(t, func() bool { now, _ := age(tt); return now >= first+0.05 }, 10*time.Second, 10*time.Millisecond,
			"the age of a model never read does not grow")
	})
	t.Run("the processor's model", func(t *testing.T) {
		tt := componenttest.NewTelemetry()
		t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
		startWith(t, metadatatest.NewSettings(tt), nil)
		_, ok := age(tt)
		assert.False(t, ok, "a model age without a store")
	})
}

// TestStoreNotThere: a store key naming no store extension, or another
// kind of extension, fails Start, naming the fix.
func TestStoreNotThere(t *testing.T) {
	id := component.MustNewIDWithName("errorownership_store", "x")
	tests := []struct {
		name string
		host extensionHost
		want string
	}{
		{"absent", extensionHost{}, "store: no extension errorownership_store/x in this collector; configure it under extensions and list it in service.extensions"},
		{"another kind", extensionHost{id: struct {
			component.StartFunc
			component.ShutdownFunc
		}{}}, "store: errorownership_store/x is not an errorownership_store extension"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.NetAddr.Endpoint = "127.0.0.1:0"
			cfg.Store = errorownershipstoreextension.NewRef(id)
			ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(NewFactory().Type()), cfg)
			require.NoError(t, err)
			require.EqualError(t, ext.Start(context.Background(), tt.host), tt.want)
			require.NoError(t, ext.Shutdown(context.Background()))
		})
	}
}

func TestPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = l.Addr().String()
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(NewFactory().Type()), cfg)
	require.NoError(t, err)
	require.ErrorContains(t, ext.Start(context.Background(), componenttest.NewNopHost()), "hints: cannot listen on "+`"`+l.Addr().String()+`"`)
	require.NoError(t, ext.Shutdown(context.Background()))
}

func TestLifecycle(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "errorownership_hints", f.Type().String())
	assert.Equal(t, component.StabilityLevelAlpha, f.Stability())
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	for range 2 { // started and shut down twice, as the collector may on a reload
		ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
		require.NoError(t, err)
		require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
		require.NoError(t, ext.Shutdown(context.Background()))
	}
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Shutdown(context.Background()), "shut down without being started")
}

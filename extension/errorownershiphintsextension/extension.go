// SPDX-License-Identifier: Apache-2.0

package errorownershiphintsextension // import "github.com/errorownership/errorownership/extension/errorownershiphintsextension"

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/extension/errorownershiphintsextension/internal/metadata"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/internal/hintsserver"
	"github.com/errorownership/errorownership/internal/status"
	"github.com/errorownership/errorownership/store"
)

// errNoModel is the answer while neither a store nor a processor gives the
// extension a model to serve.
var errNoModel = fmt.Errorf("%w: no errorownership processor serves its model through this extension, and it has no store section", edges.ErrNoModelYet)

// hintsExtension serves the hints from its store's model, or from the
// model a processor registered (hintsserver.Registry).
type hintsExtension struct {
	cfg    *Config
	set    extension.Settings
	logger *zap.Logger

	server    *hintsserver.Server
	model     *edges.Store // with a store
	status    *status.Reporter
	telemetry *metadata.TelemetryBuilder

	mu    sync.Mutex
	owner component.ID // the processor whose model is served
	view  edges.Viewer // its model, viewed at most once per refresh; nil without one
}

var (
	_ extension.Extension             = (*hintsExtension)(nil)
	_ extensioncapabilities.Dependent = (*hintsExtension)(nil)
	_ hintsserver.Registry            = (*hintsExtension)(nil)
)

// Dependencies has the collector start the store extension first, and
// shut it down after this one.
func (e *hintsExtension) Dependencies() []component.ID {
	if e.cfg.Store == nil {
		return nil
	}
	return []component.ID{e.cfg.Store.ID()}
}

func newHintsExtension(set extension.Settings, cfg *Config) *hintsExtension {
	return &hintsExtension{cfg: cfg, set: set, logger: set.Logger}
}

// Start finds the store extension, if any, starts reading its model in the
// background, and listens. A database that is down or refuses the
// password does not fail Start: the extension reports a recoverable error
// and answers 503 until the model can be read.
func (e *hintsExtension) Start(ctx context.Context, host component.Host) error {
	e.status = status.New(host)
	if e.cfg.Store != nil {
		ext, err := e.cfg.Store.Lookup(host)
		if err != nil {
			return err
		}
		e.model = ext.Model(nil, nil)
		e.model.OnRead(func(err error) { e.status.Set("reading the edge model from the store", err) })
		if err := e.startTelemetry(); err != nil {
			return err
		}
		e.model.Start()
		e.logger.Info("Serving ownership hints from the edge model merged in the store", zap.Stringer("store", ext.Store()))
	}
	e.server = hintsserver.New(e.cfg.ServerConfig, e.cfg.TTL, e.cfg.RetryBudget, e, e.logger)
	if err := e.server.Start(ctx, host, e.set.TelemetrySettings); err != nil {
		e.stopModel()
		return err
	}
	return nil
}

// startTelemetry reports the age of the model read from the store, which
// stops growing only while reads succeed: an alert on it tells that the
// hints went stale, as no request to them would.
func (e *hintsExtension) startTelemetry() error {
	tb, err := metadata.NewTelemetryBuilder(e.set.TelemetrySettings)
	if err != nil {
		return err
	}
	e.telemetry = tb
	started := time.Now()
	return tb.RegisterExtensionErrorownershipHintsModelAgeCallback(func(_ context.Context, o metric.Float64Observer) error {
		at := e.model.ReadAt()
		if at.IsZero() {
			at = started
		}
		o.Observe(time.Since(at).Seconds())
		return nil
	})
}

// Shutdown stops listening, waiting for the requests in flight at most
// until ctx ends, or store.DefaultConfig's shutdown timeout when ctx has no
// deadline (the collector's has none): a request waiting for a database
// that does not answer must not hold the collector's shutdown.
func (e *hintsExtension) Shutdown(ctx context.Context) error {
	if e.status != nil {
		e.status.Stop()
	}
	var err error
	if e.server != nil {
		sctx, cancel := context.WithTimeout(ctx, store.DefaultConfig().ShutdownTimeout)
		err = e.server.Shutdown(sctx)
		cancel()
	}
	e.stopModel()
	if e.telemetry != nil {
		e.telemetry.Shutdown()
	}
	return err
}

func (e *hintsExtension) stopModel() {
	if e.model != nil {
		e.model.Shutdown()
	}
}

// View gives the hints server the model to serve.
func (e *hintsExtension) View(ctx context.Context) (*edges.View, error) {
	if e.model != nil {
		return e.model.View(ctx)
	}
	e.mu.Lock()
	v := e.view
	e.mu.Unlock()
	if v == nil {
		return nil, errNoModel
	}
	return v.View(ctx)
}

// ServeModelOf serves the model of processor id from now until stop is
// called.
func (e *hintsExtension) ServeModelOf(id component.ID, v edges.Viewer) (stop func(), err error) {
	if e.model != nil {
		return nil, fmt.Errorf("hints_extension: %s serves the edge model merged in its store; remove hints_extension from %s, or store from %s",
			e.set.ID, id, e.set.ID)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.view != nil {
		return nil, fmt.Errorf("hints_extension: %s already serves the model of %s; give %s an errorownership_hints extension of its own, such as errorownership_hints/%s",
			e.set.ID, e.owner, id, id.Name())
	}
	e.owner, e.view = id, edges.Every(v, e.cfg.Refresh)
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.owner == id {
			e.owner, e.view = component.ID{}, nil
		}
	}, nil
}

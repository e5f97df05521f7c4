// SPDX-License-Identifier: Apache-2.0

package errorownershipstoreextension // import "github.com/errorownership/errorownership/extension/errorownershipstoreextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/store"
)

// storeExtension holds the store the components that name it share.
type storeExtension struct {
	cfg    *Config
	logger *zap.Logger
	st     *store.Store
}

var _ Store = (*storeExtension)(nil)

// Start opens the pool. It does not connect: a database that is down or
// refuses the password does not keep the collector from starting; the
// writers and readers of the components that name the extension wait for
// it, and report their status.
func (e *storeExtension) Start(ctx context.Context, _ component.Host) error {
	st, err := store.Open(ctx, e.cfg.Config)
	if err != nil {
		return err
	}
	e.st = st
	e.logger.Info("Opened the error-ownership store", zap.Stringer("store", st))
	return nil
}

// Shutdown closes the pool, after the components that use it have stopped:
// the collector shuts extensions down after the pipelines, and after the
// extensions that depend on them.
func (e *storeExtension) Shutdown(context.Context) error {
	if e.st != nil {
		e.st.Close()
	}
	return nil
}

func (e *storeExtension) Store() *store.Store { return e.st }

func (e *storeExtension) EdgeModel() dependencyanalysis.ModelConfig { return e.cfg.EdgeModel }

func (e *storeExtension) Model(names *dependencyanalysis.Symbols, inUse edges.RLocker) *edges.Store {
	return edges.NewStore(e.st, e.cfg.EdgeModel, names, inUse, e.cfg.ModelRefresh, e.logger)
}

// SPDX-License-Identifier: Apache-2.0

package errorownershipstoreextension // import "github.com/errorownership/errorownership/extension/errorownershipstoreextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/errorownership/errorownership/extension/errorownershipstoreextension/internal/metadata"
)

// NewFactory returns a factory for the errorownership_store extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &storeExtension{cfg: cfg.(*Config), logger: set.Logger}, nil
}
